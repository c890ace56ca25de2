#!/usr/bin/env python3
"""The markdown table of run-1k-32k.sh's JSON files: per shape, depth and KV
type, decode tok/s (share of the probes beside the row, their mean GB/s),
round 1 / round 2, and the count of rows at >= 60%."""
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
shapes = [("smollm2-135m", "SmolLM2-135M"), ("qwen2.5-0.5b", "Qwen2.5-0.5B"), ("llama3.2-1b", "Llama-3.2-1B")]
rounds = [r for r in ("r1", "r2") if any(os.path.exists(f"{here}/{s}-f16-{r}.json") for s, _ in shapes)]


def rows(s, t, r):
    p = f"{here}/{s}-{t}-{r}.json"
    return {x["depth"]: x for x in json.load(open(p))} if os.path.exists(p) else {}


def cell(x):
    if not x:
        return "-"
    return f"{x['decode_tok_s']:.1f} ({100 * x['bw_share']:.1f}%, {x['row_mem_read_gb_s']:.0f})"


met = total = 0
print("| shape | depth | f16 KV | q8_0 KV |")
print("|---|---:|---|---|")
for s, name in shapes:
    data = {(t, r): rows(s, t, r) for t in ("f16", "q8_0") for r in rounds}
    depths = sorted({d for v in data.values() for d in v})
    for d in depths:
        cells = []
        for t in ("f16", "q8_0"):
            xs = [data[(t, r)].get(d) for r in rounds]
            for x in xs:
                if x:
                    total += 1
                    met += x["bw_share"] >= 0.6
            cells.append(" / ".join(cell(x) for x in xs))
        print(f"| {name} | {d:,} | {cells[0]} | {cells[1]} |")
print(f"\nRows at >= 60% of the probes beside them: {met} of {total}", file=sys.stderr)
