#!/bin/bash
# End to end, the kernel with int16 P.V against the build before: SmolLM2-135M
# shape, q8_0 and q4_0 KV, depths 16,384 and 32,700 (context 32,768, RoPE
# scaled linearly by 4), 2 threads, the bandwidth probes beside each row; the
# two builds alternated for ROUNDS rounds (default 2). Writes e2e-*.json / .txt
# beside itself. NEW, OLD: the two kvtrim binaries (OLD built from the commit
# before, outside the repository); SHAPES: the folder of the
# `kvtrim make-model --shape S --type q8_0 --seed 1` files; TYPES: KV types.
cd "$(dirname "$0")" || exit 1
NEW=${NEW:-../../../build/kvtrim}
: "${OLD:?OLD: the kvtrim of the commit before}"
M=${SHAPES:-../../../models-shape}/smollm2-135m-q8_0.gguf
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in ${TYPES:-q8_0}; do
    for b in new old; do
      bin=$NEW; [ $b = old ] && bin=$OLD
      echo "$(date -u +%T) $t $b round $r" >> progress.log
      $bin bench -m $M -d 16384,32700 -c 32768 --rope-scaling linear --rope-scale 4 --gen 32 --reps 1 -t 2 \
        --kv-quant $t --bf16-attention all --membw 512 --json e2e-$t-$b-r$r.json > e2e-$t-$b-r$r.txt 2>&1
    done
  done
done
echo "$(date -u +%T) done" >> progress.log
