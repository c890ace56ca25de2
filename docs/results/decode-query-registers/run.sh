#!/bin/bash
# decode at 8k: before (kvtrim-att) and after (kvtrim-qreg) the queries held in registers, alternated, three rounds
M=/work/models-shape/smollm2-135m-q8_0.gguf
cd /work/exp/qreg
for r in 1 2 3; do
  for q in f16 q8_0 q4_0; do
    for b in att qreg; do
      /work/exp/kvtrim-$b bench -m $M -d 8192 -c 8300 --gen 64 --reps 2 -t 2 --kv-quant $q --bf16-attention all --json $b-$q-$r.json > $b-$q-$r.txt 2>&1
    done
  done
  date >> progress.txt
done
echo done > done
