#!/usr/bin/env python3
"""The markdown table of a run's JSON files (SHAPE-TYPE-rN.json, as
run-1k-32k.sh writes them): per shape, depth and KV type, decode tok/s
(share of the probes beside the row, their mean GB/s), round 1 / round 2,
and the count of rows at >= 60%."""
import json, os, sys

# table.py [DIR]: DIR the run's folder (default this one)
here = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
shapes = [("smollm2-135m", "SmolLM2-135M"), ("qwen2.5-0.5b", "Qwen2.5-0.5B"), ("llama3.2-1b", "Llama-3.2-1B")]
kv_types = [t for t in ("f16", "q8_0", "q4_0") if any(os.path.exists(f"{here}/{s}-{t}-r1.json") for s, _ in shapes)]
rounds = [r for r in ("r1", "r2") if any(os.path.exists(f"{here}/{s}-{t}-{r}.json") for s, _ in shapes for t in kv_types)]


def rows(s, t, r):
    p = f"{here}/{s}-{t}-{r}.json"
    return {x["depth"]: x for x in json.load(open(p))} if os.path.exists(p) else {}


def cell(x):
    if not x:
        return "-"
    return f"{x['decode_tok_s']:.1f} ({100 * x['bw_share']:.1f}%, {x['row_mem_read_gb_s']:.0f})"


met = total = 0
print("| shape | depth | " + " | ".join(f"{t} KV" for t in kv_types) + " |")
print("|---|---:|" + "---|" * len(kv_types))
for s, name in shapes:
    data = {(t, r): rows(s, t, r) for t in kv_types for r in rounds}
    depths = sorted({d for v in data.values() for d in v})
    for d in depths:
        cells = []
        for t in kv_types:
            xs = [data[(t, r)].get(d) for r in rounds]
            for x in xs:
                if x:
                    total += 1
                    met += x["bw_share"] >= 0.6
            cells.append(" / ".join(cell(x) for x in xs))
        print(f"| {name} | {d:,} | " + " | ".join(cells) + " |")
print(f"\nRows at >= 60% of the probes beside them: {met} of {total}", file=sys.stderr)
