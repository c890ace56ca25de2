#!/usr/bin/env python3
"""Chunked against one-shot compression, per (task, method, ratio), from two
`kvtrim eval --out` reports of the same sweep (issue 30 item 3).

  python3 bench/chunked_vs_oneshot.py ONESHOT/report.json CHUNKED/report.json > table.md

Accuracy % +- standard error of each, their difference, and whether it is
within one standard error (of the difference: sqrt(se1^2 + se2^2), and of
the one-shot cell as the issue states it), KL of each, the peak KV of each.
"""
import json, math, sys

def rows(path):
    return {(r["task"], r["method"], r["ratio"]): r for r in json.load(open(path))["rows"]}

def main():
    one, ch = rows(sys.argv[1]), rows(sys.argv[2])
    print("| task | method | ratio | one-shot acc % | chunked acc % | diff | within 1 se (one-shot's) | "
          "within 1 se (of the difference) | KL one-shot | KL chunked | peak KV one-shot MiB | peak KV chunked MiB | note |")
    print("|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---|")
    within = within1 = total = 0
    for key in sorted(one):
        a, b = one[key], ch.get(key)
        if b is None or a["method"] == "full":
            continue
        if a["n"] == 0 or b["n"] == 0:
            print(f"| {key[0]} | {key[1]} | {key[2]} | - | - | - | - | - | - | - | - | - | "
                  f"{(b['note'] or a['note'])[:90]} |")
            continue
        pa, pb, sa, sb = (100 * x for x in (a["accuracy"], b["accuracy"], a["stderr"], b["stderr"]))
        d = pb - pa
        se_d = math.hypot(sa, sb)
        w1 = abs(d) <= sa + 1e-9
        w2 = abs(d) <= se_d + 1e-9
        total += 1
        within += w2
        within1 += w1
        print(f"| {key[0]} | {key[1]} | {key[2]} | {pa:.1f} ± {sa:.1f} | "
              f"{pb:.1f} ± {sb:.1f} | {d:+.1f} | {'yes' if w1 else 'no'} | {'yes' if w2 else 'no'} | "
              f"{a['kl']:.3f} | {b['kl']:.3f} | {a['kv_bytes_peak'] / 2**20:.1f} | {b['kv_bytes_peak'] / 2**20:.1f} | |")
    print(f"\n{within} of {total} measured cells within one standard error of the difference; "
          f"{within1} within the one-shot cell's standard error.")

if __name__ == "__main__":
    main()
