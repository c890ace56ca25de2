#!/bin/bash
# Two builds A and B (BINS/kvtrim-A, BINS/kvtrim-B) alternated, the order flipped each round:
# decode at depth 256 on the three shapes, q8_0 KV. Used as `e2e-depth256.sh tr final`
# (small pages against huge pages) and `e2e-depth256.sh final s2` (a second accumulator chain).
cd "$(dirname "$0")"
A=${1:?build A}; B=${2:?build B}
for m in qwen2.5-0.5b llama3.2-1b smollm2-135m; do
M=${SHAPES:-../../../models-shape}/$m-q8_0.gguf
for r in 1 2 3 4; do
  if [ $((r % 2)) = 1 ]; then bins="$A $B"; else bins="$B $A"; fi
  for b in $bins; do
    ${BINS:?folder of the builds kvtrim-NAME}/kvtrim-$b bench -m $M -d 256 -c 600 --gen 64 --reps 3 -t 2 --kv-quant q8_0 --membw 256 > $m-$b-r$r.txt 2>&1
  done
done
done
