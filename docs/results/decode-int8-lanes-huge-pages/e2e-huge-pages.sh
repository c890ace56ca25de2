#!/bin/bash
# the build before (tr: weights, KV and the probe in 4 KiB pages) against the final one (huge pages), alternated
cd "$(dirname "$0")"
for m in qwen2.5-0.5b llama3.2-1b smollm2-135m; do
M=${SHAPES:-../../../models-shape}/$m-q8_0.gguf
for r in 1 2 3 4; do
  if [ $((r % 2)) = 1 ]; then bins="tr final"; else bins="final tr"; fi
  for b in $bins; do
    ${BINS:?folder of the builds kvtrim-NAME}/kvtrim-$b bench -m $M -d 256 -c 600 --gen 64 --reps 3 -t 2 --kv-quant q8_0 --membw 256 > $m-$b-r$r.txt 2>&1
  done
done
done
touch all.done
