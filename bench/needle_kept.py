#!/usr/bin/env python3
"""Where a method loses the needle: `needle_kept` from `kvtrim eval` runs.

    python3 bench/needle_kept.py RUN_DIR [RUN_DIR ...] [--layers L --kv-heads H --head FLAT]

For each (task, method, ratio) over the samples in each RUN_DIR's
samples.jsonl: accuracy, the mean share of the asked needle's tokens held
(over heads and samples), the share held by the head that holds the most
of it (mean over samples), the mean share per layer, one head's share
(--head FLAT = layer * kv_heads + head; the default model's copy head is
12: layer 3, KV head 0), and accuracy split by whether that head kept at
least half of the needle. Markdown on stdout.
"""
import argparse
import json
import os
from collections import defaultdict


def load(dirs):
    rows = []
    for d in dirs:
        with open(os.path.join(d, "samples.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("needle_kept") and r.get("accuracy") is not None:
                    r["_run"] = os.path.basename(os.path.normpath(d))
                    rows.append(r)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head", type=int, default=12)
    a = ap.parse_args()
    cells = defaultdict(list)
    for r in load(a.dirs):
        cells[(r["_run"], r["task"], r["method"], r["ratio"])].append(r)
    L, H = a.layers, a.kv_heads
    print("| run | task | method | r | n | accuracy %% | needle kept (mean over heads) | best head | "
          "kept per layer | head %d | accuracy %% when head %d kept >= 50%% / < 50%% |" % (a.head, a.head))
    print("|---|---|---|---:|---:|---:|---:|---:|---|---:|---|")
    for (run, task, method, ratio), rs in sorted(cells.items()):
        n = len(rs)
        acc = 100.0 * sum(r["accuracy"] for r in rs) / n
        mean = sum(sum(r["needle_kept"]) / len(r["needle_kept"]) for r in rs) / n
        best = sum(max(r["needle_kept"]) for r in rs) / n
        one = sum(r["needle_kept"][a.head] for r in rs) / n
        per_layer = []
        for l in range(L):
            per_layer.append(sum(sum(r["needle_kept"][l * H:(l + 1) * H]) / H for r in rs) / n)
        hit = [r["accuracy"] for r in rs if r["needle_kept"][a.head] >= 0.5]
        miss = [r["accuracy"] for r in rs if r["needle_kept"][a.head] < 0.5]
        split = "%s / %s" % ("%.0f (n=%d)" % (100.0 * sum(hit) / len(hit), len(hit)) if hit else "-",
                             "%.0f (n=%d)" % (100.0 * sum(miss) / len(miss), len(miss)) if miss else "-")
        print("| %s | %s | %s | %g | %d | %.1f | %.3f | %.2f | %s | %.2f | %s |" % (
            run, task, method, ratio, n, acc, mean, best, " / ".join("%.2f" % v for v in per_layer), one, split))


if __name__ == "__main__":
    main()
