#!/usr/bin/env python3
"""The kernel runs of kernels.sh as a table (medians over the rounds, min-max,
before / after), and the end-to-end runs of run.sh when present (decode tok/s
and share of the bandwidth probes beside each row)."""
import glob, json, os, statistics

os.chdir(os.path.dirname(os.path.abspath(__file__)))
TYPES = {'0': 'f32', '1': 'f16', '8': 'q8_0', '2': 'q4_0'}


def kernel_rows():
    times = {}
    for f in sorted(glob.glob('kernels-*-r*.json')):
        build = f.split('-')[1]
        for b in json.load(open(f))['benchmarks']:
            scale = 1e-3 if b['time_unit'] == 'ns' else 1.0  # in cache: us; from memory: ms
            times.setdefault((b['name'], build), []).append(b['real_time'] * scale)
    return times


def fmt(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if max(v) < 20 else \
        f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"


def kernels():
    t = kernel_rows()
    print('| benchmark | type | G | before | after | before / after |')
    print('|---|---|---:|---:|---:|---:|')
    names = sorted({n for n, _ in t}, key=lambda n: (n.split('/')[0], n.split('/')[3], list(TYPES).index(n.split('/')[2])))
    for n in names:
        f = n.split('/')
        old, new = t.get((n, 'old')), t.get((n, 'new'))
        if not old or not new:
            continue
        what = 'in cache, 8,192 entries, us' if f[0] == 'BM_AttendChunks' else 'from memory, 90 heads x 4,096, ms'
        print(f"| {what} | {TYPES[f[2]]} | {f[3]} | {fmt(old)} | {fmt(new)} | "
              f"{statistics.median(old) / statistics.median(new):.2f}x |")


def end_to_end():
    rows = []
    for f in sorted(glob.glob('e2e-*.json')):
        for r in json.load(open(f)):
            rows.append((f, r))
    if not rows:
        return
    print()
    print('| run | depth | decode tok/s | bw GB/s beside | % of bw |')
    print('|---|---:|---:|---:|---:|')
    for f, r in rows:
        print(f"| {f[:-5]} | {r.get('depth')} | {r.get('decode_tok_s', float('nan')):.1f} | "
              f"{r.get('row_mem_read_gb_s', float('nan')):.1f} | {r.get('bw_share', float('nan')) * 100:.1f}% |")


kernels()
end_to_end()
