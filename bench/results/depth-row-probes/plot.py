#!/usr/bin/env python3
"""NAME.dat and .gp from run-1k-32k.sh's JSON files, then gnuplot:
(left) each row's decode GB/s against the probes' GB/s beside it, with the
60% line; (right) the share against depth per shape and KV type.

    plot.py [DIR]   # DIR: the run's folder (default this one); NAME its name
"""
import json, os, subprocess, sys

here = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
name = os.path.basename(here)
shapes = ["smollm2-135m", "qwen2.5-0.5b", "llama3.2-1b"]
colors = {"smollm2-135m": "#2ca02c", "qwen2.5-0.5b": "#ff7f0e", "llama3.2-1b": "#1f77b4"}
series = []
with open(f"{here}/{name}.dat", "w") as out:
    for s in shapes:
        for t in ("f16", "q8_0"):
            for r in ("r1", "r2"):
                p = f"{here}/{s}-{t}-{r}.json"
                if not os.path.exists(p):
                    continue
                out.write(f"# {s} {t} {r}: depth tok/s share% probe_gb_s decode_gb_s\n")
                for x in json.load(open(p)):
                    out.write(f"{x['depth']} {x['decode_tok_s']:.2f} {100 * x['bw_share']:.2f} "
                              f"{x['row_mem_read_gb_s']:.2f} {x['gb_s']:.2f}\n")
                out.write("\n\n")
                series.append((s, t, r))
left, right = [], []
for i, (s, t, r) in enumerate(series):
    pt = 7 if t == "f16" else 5
    dt = 1 if r == "r1" else 2
    label = f"{s} {t} {r}"
    left.append(f"'{name}.dat' index {i} using 4:5 with points pt {pt} lc rgb '{colors[s]}' title '{label}'")
    right.append(f"'{name}.dat' index {i} using 1:3 with linespoints pt {pt} dt {dt} lc rgb '{colors[s]}' "
                 f"notitle")
gp = f"""# Re-render: python3 plot.py (in this directory; writes the .dat and runs gnuplot)
set terminal svg size 1200,520 dynamic font 'sans,11'
set output '{name}.svg'
set multiplot layout 1,2 title 'Full-cache decode, 2 threads, shape models (noise weights): bytes a second against the read bandwidth beside each row'
set termoption noenhanced
set grid
set key below maxrows 4 font ',8'
set title 'decode GB/s against the probes beside the row'
set xlabel 'read bandwidth beside the row (GB/s)'
set ylabel 'decode: (weights + KV bytes) a second (GB/s)'
set xrange [0:*]
set yrange [0:*]
plot {', '.join(left)}, 0.6*x with lines dt 3 lc rgb '#999999' title '60% of the probes'
set title 'share of the probes against depth (f16 circles, q8_0 squares; r2 dashed)'
set xlabel 'depth (tokens)'
set ylabel '% of the read bandwidth beside the row'
set logscale x 2
set xrange [700:48000]
set xtics ('1k' 1024, '4k' 4096, '8k' 8192, '16k' 16384, '32k' 32700)
set yrange [0:120]
unset key
plot {', '.join(right)}, 60 with lines dt 3 lc rgb '#999999'
unset multiplot
"""
open(f"{here}/{name}.gp", "w").write(gp)
subprocess.run(["gnuplot", f"{name}.gp"], cwd=here, check=True)
