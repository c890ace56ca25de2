#!/bin/bash
# Writes its files beside itself. KVTRIM: the binary; SHAPES: the folder of the
# `kvtrim make-model --shape S --type q8_0 --seed 1` files (S-q8_0.gguf).
cd "$(dirname "$0")"
K=${KVTRIM:-../../../build/kvtrim}
for s in llama3.2-1b qwen2.5-0.5b; do
  M=${SHAPES:-../../../models-shape}/$s-q8_0.gguf
  for t in q8_0 f16; do
    echo "$(date -u +%T) $s $t 32k r2" >> progress32b.log
    $K bench -m $M -d 32700 -c 32768 --gen 32 --reps 1 -t 2 --kv-quant $t --bf16-attention all --membw 512 --json $s-$t-32k-r2.json > $s-$t-32k-r2.txt 2>&1
  done
done
echo "$(date -u +%T) done" >> progress32b.log
touch all32b.done
