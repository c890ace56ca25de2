#!/usr/bin/env python3
"""The kernel runs of kernels.sh as a table (medians over the rounds, min-max,
before / after), and the end-to-end runs of run.sh when present (decode tok/s
and share of the bandwidth probes beside each row)."""
import glob, importlib.util, json, os, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
TYPES = {'0': 'f32', '1': 'f16', '8': 'q8_0', '2': 'q4_0'}
# kernel_rows: the kernels-*.json files of the working folder, read as
# decode-prefetch's table reads them (loading it moves into its folder)
_spec = importlib.util.spec_from_file_location('prefetch_table', os.path.join(HERE, '../decode-prefetch/table.py'))
_prefetch_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_prefetch_table)
kernel_rows = _prefetch_table.kernel_rows
os.chdir(HERE)


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
