#!/usr/bin/env python3
"""Table and plot of bench/prefill_cost.sh's log (issue 30 item 2).

  python3 bench/prefill_cost.py [LOG] [OUT_PREFIX]

LOG defaults to bench/results/prefill-cost.jsonl, OUT_PREFIX to
bench/results/prefill-cost. Writes OUT_PREFIX.md (per context length: per
method and mode the prefill's seconds, the compression's seconds and their
ratio, where the compression's time went (the reference pass; am's fit:
scores, selection with NNLS, values; else the plans), the prefill's slowdown against the full cache's from the statistics
it collects, and the peak KV), OUT_PREFIX.dat and OUT_PREFIX.gp (compression
time / prefill time against context length, one line per method and mode),
rendered to OUT_PREFIX.svg when gnuplot is installed.

Compression seconds: compress_ms (plans and applying, every chunk) plus the
reference pass (counter ref-pass-us: kvzip's reconstruction, am's repeat).
Prefill seconds: prefill_len / prefill_tok_s, less the compression between
chunks that the chunked prefill's span holds (prefill_compress_ms). The
last row of a (shape, depth, method, mode) wins when a run was repeated.
"""
import json, shutil, subprocess, sys

def load(path):
    rows = {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        rows[(r["shape"], r["prefill_len"], r["method"], r["mode"])] = r
    return rows

def costs(r):
    # The forward passes' time: the Session's own counter where the policy
    # reports it (KVzip, AM: a chunked prefill runs each chunk's
    # reconstruction inside Prefill, and those passes count as compression).
    if "prefill-us" in r.get("counters", {}):
        return r["counters"]["prefill-us"] / 1e6, r["compress_ms"] / 1e3 + r["counters"].get("ref-pass-us", 0) / 1e6
    pf = r["prefill_len"] / r["prefill_tok_s"] - r.get("prefill_compress_ms", 0) / 1e3
    comp = r["compress_ms"] / 1e3 + r.get("counters", {}).get("ref-pass-us", 0) / 1e6
    return pf, comp

def split(r, pf):
    # Where the compression's time went, in prefills: the reference pass,
    # and for am its fit's parts (CPU time summed over the threads that fit
    # the heads, so they may add to more than the wall time), else the
    # plans and applying.
    c = r.get("counters", {})
    parts = []
    if c.get("ref-pass-us"):
        parts.append(f"pass {c['ref-pass-us'] / 1e6 / pf:.2f}")
    if "am-scores-us" in c:
        parts += [f"{k[3:-3]} {c[k] / 1e6 / pf:.2f}" for k in ("am-scores-us", "am-select-us", "am-values-us")]
        if "am-nnls-us" in c:  # within select
            parts.insert(-1, f"(nnls {c['am-nnls-us'] / 1e6 / pf:.2f})")
    else:
        parts.append(f"plans {r['compress_ms'] / 1e3 / pf:.2f}")
    return ", ".join(parts) if pf > 0 else "-"

def main():
    log = sys.argv[1] if len(sys.argv) > 1 else "bench/results/prefill-cost.jsonl"
    out = sys.argv[2] if len(sys.argv) > 2 else "bench/results/prefill-cost"
    rows = load(log)
    md = ["| shape | tokens | method | mode | prefill s | compression s | compression / prefill | "
          "split (prefills) | prefill / full's | peak KV MiB | full f32 KV MiB |",
          "|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|"]
    series = {}
    for key in sorted(rows, key=lambda k: (k[0], k[1], k[2] != "full", k[2], k[3])):
        shape, n, method, mode = key
        r = rows[key]
        pf, comp = costs(r)
        full = rows.get((shape, n, "full", "oneshot"))
        slow = f"{pf / costs(full)[0]:.2f}x" if full and method != "full" else "-"
        ratio = comp / pf if pf > 0 else float("nan")
        md.append(f"| {shape} | {n} | {method} | {mode} | {pf:.2f} | {comp:.3f} | {ratio:.3f} | {split(r, pf)} | {slow} | "
                  f"{r['kv_bytes_peak'] / 2**20:.1f} | {r['kv_bytes_full'] / 2**20:.1f} |")
        if method != "full":
            series.setdefault(f"{method} {mode}", []).append((n, max(ratio, 1e-5)))
    open(out + ".md", "w").write("\n".join(md) + "\n")
    name = out.rsplit("/", 1)[-1]
    with open(out + ".dat", "w") as f:
        for s, pts in series.items():
            f.write(f'"{s}"\n')
            for n, v in sorted(pts):
                f.write(f"{n} {v:.6g}\n")
            f.write("\n\n")
    gp = [f"# Re-render: gnuplot {name}.gp (in this directory)",
          "set terminal svg size 1100,620 dynamic font 'sans,11'", f"set output '{name}.svg'",
          "set logscale xy", "set xlabel 'prompt tokens'", "set ylabel 'compression time / prefill time'",
          "set key outside right", "set grid",
          "set title 'Prefill-time compression cost (shape model, noise weights: speed only)'",
          "plot " + ", ".join(f"'{name}.dat' index {i} with linespoints dt {2 if s.endswith('chunked') else 1} "
                              f"title columnheader(1)" for i, s in enumerate(series))]
    open(out + ".gp", "w").write("\n".join(gp) + "\n")
    if shutil.which("gnuplot") and series:
        subprocess.run(["gnuplot", name + ".gp"], cwd=out.rsplit("/", 1)[0] if "/" in out else ".", check=True)

if __name__ == "__main__":
    main()
