#!/bin/bash
# Decode at depth 8,192 by KV type (f16, q8_0, q4_0) on the three shapes,
# each row against the read-bandwidth probes beside its decode steps.
# run.sh [r2]: round 1 shapes SmolLM2, Qwen, Llama and types f16, q8_0,
# q4_0; r2 both in the other order. Writes its files beside itself.
# KVTRIM: the binary; SHAPES: the folder of the
# `kvtrim make-model --shape S --type q8_0 --seed 1` files (S-q8_0.gguf).
cd "$(dirname "$0")"
K=${KVTRIM:-../../../build/kvtrim}
r=${1:-r1}
shapes="smollm2-135m qwen2.5-0.5b llama3.2-1b" types="f16 q8_0 q4_0"
[ "$r" = r2 ] && shapes="llama3.2-1b qwen2.5-0.5b smollm2-135m" types="q4_0 q8_0 f16"
for s in $shapes; do
  M=${SHAPES:-../../../models-shape}/$s-q8_0.gguf
  rope=()
  [ $s = smollm2-135m ] && rope=(--rope-scaling linear --rope-scale 2)  # trained at 8k
  for t in $types; do
    echo "$(date -u +%T) $s $t $r" >> progress-$r.log
    $K bench -m $M -d 8192 -c 8300 "${rope[@]}" --gen 32 --reps 1 -t 2 --kv-quant $t \
      --bf16-attention all --membw 512 --json $s-$t-$r.json > $s-$t-$r.txt 2>&1
  done
done
echo "$(date -u +%T) done" >> progress-$r.log
