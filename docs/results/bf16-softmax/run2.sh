#!/bin/bash
# before/after this change, bf16 all: kvtrim-def (57f4265) vs kvtrim-att
M=/work/models-shape/smollm2-135m-q8_0.gguf
A="-m $M -d 16384 -c 16386 --rope-scaling linear --rope-scale 3 --gen 1 --reps 1 -t 2 --kv-quant f16 --bf16-attention all"
cd /work/exp/p16
for r in 1 2; do
  /work/exp/kvtrim-def bench $A --json before-$r.json > before-$r.txt 2>&1
  /work/exp/kvtrim-att bench $A --json after-$r.json > after-$r.txt 2>&1
  date >> progress2.txt
done
echo done > done2
