#!/bin/bash
# The decode kernel with P.V in int16 products on q8_0 / q4_0 values against
# the build before (float P.V): in cache (BM_AttendChunks, 8,192 entries,
# d = 64, G = 3 and 7, f32/f16/q8_0/q4_0) and from memory (prefetch on),
# alternated for 3 rounds: decode-prefetch/kernels.sh with these benchmarks,
# its files written here. NEW, OLD: the two kvtrim_kernels_bench binaries
# (OLD built from the commit before, outside the repository).
OUTDIR=../decode-int16-pv \
  FILTER='BM_AttendChunks/8192/(0|1|8|2)/(3|7)$|BM_AttendChunksFromMemory/4096/(1|8|2)/(3|7)/1' \
  exec "$(dirname "$0")/../decode-prefetch/kernels.sh" "$@"
