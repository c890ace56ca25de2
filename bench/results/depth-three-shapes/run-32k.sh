#!/bin/bash
# Writes its files beside itself. KVTRIM: the binary; SHAPES: the folder of the
# `kvtrim make-model --shape S --type q8_0 --seed 1` files (S-q8_0.gguf).
# run-32k.sh [r2]: round 1 (no argument) runs Qwen then Llama, f16 then q8_0,
# into S-T-32k.*; r2 the other order into S-T-32k-r2.*.
cd "$(dirname "$0")"
K=${KVTRIM:-../../../build/kvtrim}
shapes="qwen2.5-0.5b llama3.2-1b" types="f16 q8_0" tag="" log=progress32.log
if [ "${1:-}" = r2 ]; then shapes="llama3.2-1b qwen2.5-0.5b" types="q8_0 f16" tag="-r2" log=progress32b.log; fi
for s in $shapes; do
  M=${SHAPES:-../../../models-shape}/$s-q8_0.gguf
  for t in $types; do
    echo "$(date -u +%T) $s $t 32k${tag:+ r2}" >> $log
    $K bench -m $M -d 32700 -c 32768 --gen 32 --reps 1 -t 2 --kv-quant $t --bf16-attention all --membw 512 --json $s-$t-32k$tag.json > $s-$t-32k$tag.txt 2>&1
  done
done
echo "$(date -u +%T) done" >> $log
