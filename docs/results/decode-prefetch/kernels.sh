#!/bin/bash
# The decode kernel in cache (BM_AttendChunks, 8,192 entries, d = 64, G = 3
# and 7, f32/f16/q8_0/q4_0) before and after, alternated for 3 rounds, and
# from memory with its prefetch on and off (BM_AttendChunksFromMemory's last
# argument) in the same runs. NEW, OLD: the two kvtrim_kernels_bench binaries
# (OLD built from the commit before, outside the repository). OUTDIR: the
# folder of the JSON files, relative to this one (default: this one);
# FILTER: the benchmarks (default: the ones above).
cd "$(dirname "$0")" && cd "${OUTDIR:-.}" || exit 1
NEW=${NEW:-../../../build/bench/kvtrim_kernels_bench}
: "${OLD:?OLD: the kvtrim_kernels_bench of the commit before}"
FILTER=${FILTER:-'BM_AttendChunks/8192/(0|1|8|2)/(3|7)$|BM_AttendChunksFromMemory'}
for r in 1 2 3; do
  for b in new old; do
    bin=$NEW; [ $b = old ] && bin=$OLD
    $bin --benchmark_filter="$FILTER" --benchmark_format=json > kernels-$b-r$r.json 2> /dev/null
  done
done
