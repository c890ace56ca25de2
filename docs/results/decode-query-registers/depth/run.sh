#!/bin/bash
# decode against depth, full cache, f16 and q8_0: before (ed3312d, kvtrim-att) and after (6c0515e, kvtrim-grp) the query in registers, alternated, two rounds
M=/work/models-shape/smollm2-135m-q8_0.gguf
cd /work/exp/sw2
for r in 1 2; do
  for q in f16 q8_0; do
    for b in att grp; do
      /work/exp/kvtrim-$b bench -m $M -d 1024,4096,8192,16384 -c 16450 --rope-scaling linear --rope-scale 3 \
        --gen 32 --reps 2 -t 2 --kv-quant $q --bf16-attention all --membw 512 --json $b-$q-$r.json > $b-$q-$r.txt 2>&1
      date >> progress.txt
    done
  done
done
echo done > done
