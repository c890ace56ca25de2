#!/usr/bin/env python3
"""Table and plot of bench/depth_sweep.sh's measurements (issue 29 item 5).

    python3 bench/depth_sweep.py [bench/results/depth-sweep.jsonl] [OUT_PREFIX]

Writes OUT_PREFIX.md (default bench/results/depth-sweep) with one row per
(model, depth): llama.cpp's decode tok/s with f16 and q8_0 KV (flash
attention), the faster of the two, kvtrim's full f16 cache and snapkv at
r = 0.25 and 0.1, kvtrim / llama.cpp-best ratios, and each kvtrim row's
decode read rate as a share of the machine's read bandwidth; where a
setting was measured more than once, the median and the spread (min-max).
Also OUT_PREFIX.dat and OUT_PREFIX.gp, rendered to OUT_PREFIX.svg with
gnuplot when it is installed.
"""
import json
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

SETTINGS = ["fa f16", "fa q8_0", "full f16", "snapkv 0.25", "snapkv 0.1"]


def load(path):
    """(model, depth, setting) -> [row]. A kvtrim row whose depth was clipped
    to the context less the decode steps (runs before `bench -c`: 8,160 for
    8,192 on SmolLM2's 8,192 context) counts at the llama.cpp depth within
    64 tokens above it; the table marks such cells with '*'."""
    raw = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                raw.append(json.loads(line))
    asked = defaultdict(set)
    for r in raw:
        model = r["model"].rsplit("/", 1)[-1].removesuffix(".gguf")
        r["_model"] = model
        if r["engine"] == "llama.cpp":
            asked[model].add(int(r["depth"]))
    rows = defaultdict(list)
    for r in raw:
        d = int(r["depth"])
        if r["engine"] == "kvtrim" and d not in asked[r["_model"]]:
            near = [a for a in asked[r["_model"]] if 0 < a - d <= 64]
            if near:
                r["_clipped"] = d
                d = min(near)
        rows[(r["_model"], d, r["setting"])].append(r)
    return rows


def med(rs, key):
    v = [float(r[key]) for r in rs]
    return statistics.median(v), min(v), max(v)


def cell(rs, key="decode_tok_s"):
    if not rs:
        return "-"
    m, lo, hi = med(rs, key)
    star = "*" if any("_clipped" in r for r in rs) else ""
    return (f"{m:.1f}" if len(rs) == 1 else f"{m:.1f} ({lo:.1f}-{hi:.1f})") + star


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "bench/results/depth-sweep.jsonl"
    out = sys.argv[2] if len(sys.argv) > 2 else "bench/results/depth-sweep"
    rows = load(src)
    keys = sorted({(m, d) for (m, d, _) in rows})
    lines = [
        "| model | depth | llama.cpp fa f16 | llama.cpp fa q8_0 | kvtrim full f16 | snapkv 0.25 | snapkv 0.1 "
        "| full / llama best | 0.1 / llama full best | kvtrim full: share of read bandwidth | kvtrim full: first step ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    dat = defaultdict(list)  # model -> lines
    for m, d in keys:
        get = {s: rows.get((m, d, s), []) for s in SETTINGS}
        best = max((med(get[s], "decode_tok_s")[0] for s in ("fa f16", "fa q8_0") if get[s]), default=None)
        full = med(get["full f16"], "decode_tok_s")[0] if get["full f16"] else None
        r01 = med(get["snapkv 0.1"], "decode_tok_s")[0] if get["snapkv 0.1"] else None
        share = "-"
        if get["full f16"]:
            r = get["full f16"][0]
            if float(r.get("membw_gb_s", 0)) > 0:
                share = f"{100 * med(get['full f16'], 'gb_s')[0] / float(r['membw_gb_s']):.1f}%"
        ratio = f"{full / best:.2f}x" if full and best else "-"
        ratio01 = f"{r01 / best:.2f}x" if r01 and best else "-"
        first = [r for r in get["full f16"] if "first_decode_ms" in r]
        first_ms = f"{med(first, 'first_decode_ms')[0]:.0f}" if first else "-"
        lines.append(f"| {m} | {d} | " + " | ".join(cell(get[s]) for s in SETTINGS)
                     + f" | {ratio} | {ratio01} | {share} | {first_ms} |")
        dat[m].append(f"{d} " + " ".join(f"{med(get[s], 'decode_tok_s')[0]:.3f}" if get[s] else "NaN" for s in SETTINGS))
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out + ".dat", "w") as f:
        f.write("# depth " + " | ".join(SETTINGS) + " (decode tok/s; one block per model)\n")
        for i, m in enumerate(dat):
            f.write(f"# index {i}: {m}\n" + "\n".join(dat[m]) + "\n\n\n")
    name = out.rsplit("/", 1)[-1]
    plots = []
    styles = ["lc rgb '#999999' dt 2", "lc rgb '#555555' dt 3", "lc rgb '#1f77b4' lw 2", "lc rgb '#ff7f0e'",
              "lc rgb '#2ca02c'"]
    gp = [
        f"# Re-render: gnuplot {name}.gp (in this directory)",
        "set terminal svg size 1200,480 dynamic font 'sans,11'",
        f"set output '{name}.svg'",
        f"set multiplot layout 1,{max(1, len(dat))} title 'Decode tok/s against depth (2 threads; shape models, noise weights)'",
        "set termoption noenhanced",  # model names with underscores, as written
        "set logscale xy 2", "set xlabel 'depth (tokens)'", "set ylabel 'decode tok/s'",
        "set key below maxrows 2 font ',9'",
        "set grid",
    ]
    for i, m in enumerate(dat):
        series = ", ".join(
            f"'{name}.dat' index {i} using 1:{j + 2} with linespoints {styles[j]} title '{'llama.cpp ' if j < 2 else 'kvtrim '}{s}'"
            for j, s in enumerate(SETTINGS))
        gp += [f"set title '{m}'", f"plot {series}"]
    gp.append("unset multiplot")
    with open(out + ".gp", "w") as f:
        f.write("\n".join(gp) + "\n")
    if shutil.which("gnuplot"):
        subprocess.run(["gnuplot", name + ".gp"], cwd=out.rsplit("/", 1)[0] if "/" in out else ".", check=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
