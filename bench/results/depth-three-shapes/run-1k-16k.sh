#!/bin/bash
# Three shapes, f16 and q8_0 KV, depths 1k-16k, two rounds (types alternated, order flipped in round 2).
# Writes its files beside itself, or in OUT (a folder beside this one). KVTRIM: the binary;
# SHAPES: the folder of the `kvtrim make-model --shape S --type q8_0 --seed 1` files (S-q8_0.gguf).
cd "$(dirname "$0")"
[ -n "$OUT" ] && cd "../$OUT"
K=${KVTRIM:-../../../build/kvtrim}
for r in 1 2; do
  for s in smollm2-135m qwen2.5-0.5b llama3.2-1b; do
    M=${SHAPES:-../../../models-shape}/$s-q8_0.gguf
    rope=()
    [ $s = smollm2-135m ] && rope=(--rope-scaling linear --rope-scale 3)
    if [ $r = 1 ]; then types="f16 q8_0"; else types="q8_0 f16"; fi
    for t in $types; do
      echo "$(date -u +%T) $s $t r$r" >> progress.log
      $K bench -m $M -d 1024,4096,8192,16384 -c 16450 "${rope[@]}" --gen 32 --reps 1 -t 2 --kv-quant $t \
        --bf16-attention all --membw 512 --json $s-$t-r$r.json > $s-$t-r$r.txt 2>&1
    done
  done
done
echo "$(date -u +%T) done" >> progress.log
touch all.done
