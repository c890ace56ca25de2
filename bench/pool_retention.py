#!/usr/bin/env python3
"""Retention pooled over eval runs of other seeds (other samples).

    bench/pool_retention.py --method M DIR [DIR ...]

Each DIR is a `kvtrim eval` report folder (report.json) of the same model,
haystack and context, with its own seed: the runs' samples are different
contexts, so their retention counts add up. Per (task, ratio): the samples
the full cache answers (`retention_n`) and those the method answers too
(`retention` x `retention_n`), summed over the runs, with the Wilson 95%
interval of the pooled share (as `kvtrim eval` computes it); then the worst
task per ratio. The runs must differ in seed (a seed twice would count its
samples twice). Prints a Markdown table.
"""
import argparse
import json
import math
import os
import sys

Z = 1.959963984540054


def wilson(k, n):
    if n == 0:
        return 0.0, 1.0
    c = (k + Z * Z / 2) / (n + Z * Z)
    h = Z * math.sqrt(k * (n - k) / n + Z * Z / 4) / (n + Z * Z)
    return c - h, c + h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--method", required=True)
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    pooled, seeds, context = {}, set(), None
    for d in a.dirs:
        r = json.load(open(os.path.join(d, "report.json")))
        meta = r["meta"]
        key = (os.path.basename(meta["model"]), meta.get("haystack"), meta.get("context_tokens"))
        if context is None:
            context = key
        elif key != context:
            sys.exit(f"{d}: another model, haystack or context ({key} against {context})")
        if meta["seed"] in seeds:
            sys.exit(f"{d}: seed {meta['seed']} twice: its samples would count twice")
        seeds.add(meta["seed"])
        for row in r["rows"]:
            if row["method"] != a.method or row.get("retention") is None or not row.get("retention_n"):
                continue
            n = row["retention_n"]
            k = round(row["retention"] * n)
            p = pooled.setdefault((row["task"], row["ratio"]), [0, 0])
            p[0] += k
            p[1] += n
    if not pooled:
        sys.exit(f"no retention rows of '{a.method}'")
    print(f"{a.method}, seeds {sorted(seeds)}, pooled")
    print()
    print("| task | r | answered by full | kept | retention [95% CI] |")
    print("|---|---:|---:|---:|---:|")
    for (task, ratio), (k, n) in sorted(pooled.items(), key=lambda x: (x[0][0], -x[0][1])):
        lo, hi = wilson(k, n)
        print(f"| {task} | {ratio:g} | {n} | {k} | {k / n:.3f} [{lo:.3f}, {hi:.3f}] |")
    print()
    for ratio in sorted({r for _, r in pooled}, reverse=True):
        task, (k, n) = min(((t, v) for (t, r), v in pooled.items() if r == ratio), key=lambda x: x[1][0] / x[1][1])
        lo, hi = wilson(k, n)
        print(f"worst task at r = {ratio:g}: {task} {k / n:.3f} [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
