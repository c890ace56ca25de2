#!/usr/bin/env python3
"""The kernel runs of kernels.sh as a table (medians over the rounds, min-max)
and the end-to-end runs of run.sh (decode tok/s and share of the bandwidth)."""
import glob, json, os, re, statistics, sys

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
    return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"


def main():
    t = kernel_rows()
    print('| benchmark | type | G | before | after | before / after |')
    print('|---|---|---:|---:|---:|---:|')
    names = sorted({n for n, _ in t if n.startswith('BM_AttendChunks/')}, key=lambda n: (n.split('/')[3], n.split('/')[2]))
    for n in names:
        _, _, ty, G = n.split('/')
        old, new = t.get((n, 'old')), t.get((n, 'new'))
        if not old or not new:
            continue
        print(f"| in cache, 8,192 entries, us | {TYPES[ty]} | {G} | {fmt(old)} | {fmt(new)} | {statistics.median(old) / statistics.median(new):.2f}x |")
    print()
    print('| from memory, 90 heads x 4,096 entries, ms | type | G | prefetch off | prefetch on | off / on |')
    print('|---|---|---:|---:|---:|---:|')
    for ty in ['1', '8', '2']:
        for G in ['3', '7']:
            on = t.get((f'BM_AttendChunksFromMemory/4096/{ty}/{G}/1', 'new'))
            off = t.get((f'BM_AttendChunksFromMemory/4096/{ty}/{G}/0', 'new'))
            if on and off:
                print(f"| | {TYPES[ty]} | {G} | {fmt(off)} | {fmt(on)} | {statistics.median(off) / statistics.median(on):.2f}x |")
    print()
    print('| type | round | prefetch | decode tok/s | % of bw | bw GB/s |')
    print('|---|---:|---|---:|---:|---:|')
    for f in sorted(glob.glob('*-pf*-r*.json')):
        m = re.match(r'(.+)-pf(\d)-r(\d+)\.json', f)
        row = json.load(open(f))[0]
        print(f"| {m[1]} | {m[3]} | {'on' if m[2] == '1' else 'off'} | {row['decode_tok_s']:.1f} | "
              f"{100 * row['bw_share']:.1f}% | {row['mem_read_gb_s']:.1f} |")


if __name__ == '__main__':
    sys.exit(main())
