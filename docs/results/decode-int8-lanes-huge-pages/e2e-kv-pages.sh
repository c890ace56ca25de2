#!/bin/bash
# KV in 4 KiB pages (arena build) or, for head arrays of 2 MiB and more, huge pages (kv build); SmolLM2 f16 at 16k
cd "$(dirname "$0")"
M=${SHAPES:-../../../models-shape}/smollm2-135m-q8_0.gguf
for r in 1 2 3 4; do
  if [ $((r % 2)) = 1 ]; then bins="arena kv"; else bins="kv arena"; fi
  for b in $bins; do
    ${BINS:?folder of the builds kvtrim-NAME}/kvtrim-$b bench -m $M -d 16384 -c 16450 --rope-scaling linear --rope-scale 3 --gen 32 --reps 1 -t 2 --kv-quant f16 \
      --bf16-attention all --membw 512 > smol-f16-$b-r$r.txt 2>&1
  done
done
touch all.done
