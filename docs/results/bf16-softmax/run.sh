#!/bin/bash
# one-shot 16k prefill: old (c4e10b3), new f32 tiles (off), new bf16 (all); alternated
M=/work/models-shape/smollm2-135m-q8_0.gguf
A="-m $M -d 16384 -c 16386 --rope-scaling linear --rope-scale 3 --gen 1 --reps 1 -t 2 --kv-quant f16"
cd /work/exp/p16
for r in 1 2 3; do
  /tmp/old50/build/kvtrim bench $A --json old-$r.json > old-$r.txt 2>&1
  /work/exp/kvtrim-att bench $A --bf16-attention all --json all-$r.json > all-$r.txt 2>&1
  /work/exp/kvtrim-att bench $A --bf16-attention off --json off-$r.json > off-$r.txt 2>&1
  date >> progress.txt
done
echo done > done
