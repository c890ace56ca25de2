#!/bin/bash
# base vs transposed int8 scores, Qwen2.5-0.5B shape, q8_0 KV, alternated
cd "$(dirname "$0")"
M=${SHAPES:-../../../models-shape}/qwen2.5-0.5b-q8_0.gguf
for r in 1 2; do
  if [ $r = 1 ]; then bins="base tr"; else bins="tr base"; fi
  for b in $bins; do
    echo "$(date -u +%T) $b r$r" >> progress.log
    ${BINS:?folder of the builds kvtrim-NAME}/kvtrim-$b bench -m $M -d 4096,8192,16384 -c 16450 --gen 32 --reps 1 -t 2 --kv-quant q8_0 \
      --bf16-attention all --membw 512 --json qwen-q8-$b-r$r.json > qwen-q8-$b-r$r.txt 2>&1
  done
done
touch all.done
