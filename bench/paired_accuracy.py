#!/usr/bin/env python3
"""Paired accuracy difference between two eval runs over the same samples.

    bench/paired_accuracy.py BEFORE_DIR AFTER_DIR [BEFORE_DIR AFTER_DIR ...] [--method M] [--before-method M]
    bench/paired_accuracy.py DIR DIR --before-method full   (a method against the full cache)

Both runs must use the same model, tasks, seed and sample count, so that
(task, sample) names the same context in both. For each task and ratio:
the two accuracies, and the mean of the per-sample difference (after -
before) with its standard error (sd / sqrt(n)) -- a paired comparison, not
the difference of two independent means. Several pairs of runs (other
seeds) pool their samples cell by cell. Prints a Markdown table.
"""
import argparse
import json
import math
import os
from collections import defaultdict


def load(d, method):
    acc = {}
    with open(os.path.join(d, "samples.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["method"] != method or r.get("accuracy") is None:
                continue
            ratio = None if method == "full" else r["ratio"]  # the full cache stands for every ratio
            acc[(r["task"], ratio, r["sample"])] = 100.0 * r["accuracy"]
    return acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", help="BEFORE AFTER, and more such pairs")
    ap.add_argument("--method", default="kvzip")
    ap.add_argument("--before-method", default=None)
    a = ap.parse_args()
    if len(a.dirs) % 2:
        ap.error("the run directories come in pairs: BEFORE AFTER [BEFORE AFTER ...]")
    cells = defaultdict(list)
    for before, after in zip(a.dirs[::2], a.dirs[1::2]):
        b = load(before, a.before_method or a.method)
        c = load(after, a.method)
        for key, y in c.items():
            x = b.get(key, b.get((key[0], None, key[2])))
            if x is not None:
                cells[key[:2]].append((x, y))
    print("| task | ratio | n | before % | after % | after - before (paired) |")
    print("|---|---:|---:|---:|---:|---:|")
    for (task, ratio), pairs in sorted(cells.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        n = len(pairs)
        d = [y - x for x, y in pairs]
        mean = sum(d) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1)) if n > 1 else 0.0
        mb = sum(x for x, _ in pairs) / n
        ma = sum(y for _, y in pairs) / n
        print(f"| {task} | {ratio:g} | {n} | {mb:.1f} | {ma:.1f} | {mean:+.1f} +- {sd / math.sqrt(n):.1f} |")


if __name__ == "__main__":
    main()
