#!/bin/bash
# The decode kernel with P.V in int16 products on q8_0 / q4_0 values against
# the build before (float P.V): in cache (BM_AttendChunks, 8,192 entries,
# d = 64, G = 3 and 7, f32/f16/q8_0/q4_0) and from memory (prefetch on),
# alternated for 3 rounds. NEW, OLD: the two kvtrim_kernels_bench binaries
# (OLD built from the commit before, outside the repository).
cd "$(dirname "$0")" || exit 1
NEW=${NEW:-../../../build/bench/kvtrim_kernels_bench}
: "${OLD:?OLD: the kvtrim_kernels_bench of the commit before}"
for r in 1 2 3; do
  for b in new old; do
    bin=$NEW; [ $b = old ] && bin=$OLD
    $bin --benchmark_filter='BM_AttendChunks/8192/(0|1|8|2)/(3|7)$|BM_AttendChunksFromMemory/4096/(1|8|2)/(3|7)/1' \
      --benchmark_format=json > kernels-$b-r$r.json 2> /dev/null
  done
done
