#!/usr/bin/env python3
"""Compare two `kvtrim eval` samples.jsonl files record for record.

    scripts/metrics/compare_samples.py A/samples.jsonl B/samples.jsonl [method,method...]

Records are matched on (method, ratio, task, sample). Timings (compress_ms,
counters ending in -us, *_below_* marks) and fields only one side has (a
newer field such as kv_bytes_peak) are left out. Prints the number of
records that differ, per method and per field, with the largest relative
difference of each numeric field.
"""
import json
import sys
from collections import Counter, defaultdict


def load(path, methods):
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if methods and r.get("method") not in methods:
                continue
            out[(r["method"], r["ratio"], r["task"], r["sample"])] = r
    return out


def comparable(r, other):
    keep = {}
    for k, v in r.items():
        if k not in other or k == "compress_ms" or "below" in k:
            continue
        if k == "counters" and isinstance(v, dict):
            v = {c: x for c, x in v.items() if not c.endswith("-us")}
        keep[k] = v
    return keep


def main():
    methods = set(sys.argv[3].split(",")) if len(sys.argv) > 3 and sys.argv[3] else None
    a, b = load(sys.argv[1], methods), load(sys.argv[2], methods)
    common = [k for k in a if k in b]
    by_method, by_field, rel = Counter(), defaultdict(Counter), defaultdict(float)
    for k in common:
        ra, rb = comparable(a[k], b[k]), comparable(b[k], a[k])
        if ra == rb:
            continue
        by_method[k[0]] += 1
        for f in ra:
            if ra[f] == rb.get(f):
                continue
            by_field[f][k[0]] += 1
            x, y = ra[f], rb.get(f)
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                rel[(f, k[0])] = max(rel[(f, k[0])], abs(x - y) / max(abs(x), 1e-12))
    print(f"records: {len(a)} / {len(b)}, matched {len(common)}, differ {sum(by_method.values())}")
    for m, n in sorted(by_method.items()):
        print(f"  {m}: {n}")
    for f, c in sorted(by_field.items()):
        parts = [f"{m} {n} (max rel {rel[(f, m)]:.2e})" if (f, m) in rel else f"{m} {n}" for m, n in sorted(c.items())]
        print(f"field {f}: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
