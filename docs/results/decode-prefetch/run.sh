#!/bin/bash
# The decode kernel's software prefetch against none, end to end: SmolLM2-135M
# shape, depth 16,384, 2 threads, each type's runs alternated (on, off) for
# ROUNDS rounds (f16: 2, q8_0: 1 by default). Writes its files beside itself.
# KVTRIM: the binary; SHAPES: the folder of the
# `kvtrim make-model --shape S --type q8_0 --seed 1` files.
cd "$(dirname "$0")" || exit 1
K=${KVTRIM:-../../../build/kvtrim}
M=${SHAPES:-../../../models-shape}/smollm2-135m-q8_0.gguf
for spec in "f16 ${F16_ROUNDS:-2}" "q8_0 ${Q8_ROUNDS:-1}"; do
  set -- $spec
  t=$1
  for r in $(seq 1 "$2"); do
    for pf in 1 0; do
      echo "$(date -u +%T) $t prefetch $pf round $r" >> progress.log
      KVTRIM_DECODE_PREFETCH=$pf $K bench -m $M -d 16384 -c 16500 --rope-scaling linear --rope-scale 3 \
        --gen 32 --reps 1 -t 2 --kv-quant $t --bf16-attention all --membw 512 \
        --json $t-pf$pf-r$r.json > $t-pf$pf-r$r.txt 2>&1
    done
  done
done
echo "$(date -u +%T) done" >> progress.log
