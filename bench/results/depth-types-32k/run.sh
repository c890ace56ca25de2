#!/bin/bash
# decode against depth to 32k, SmolLM2-135M shape, full cache, f16 / q8_0 / q4_0 alternated, two rounds;
# prefill with bf16 tiles (decode is f32 either way), bandwidth measured in each run
M=/work/models-shape/smollm2-135m-q8_0.gguf
cd /work/exp/sweep32
for r in 1 2; do
  for q in f16 q8_0 q4_0; do
    /work/exp/kvtrim-att bench -m $M -d 1024,4096,8192,16384,32768 -c 32800 --rope-scaling linear --rope-scale 4 \
      --gen 32 --reps 2 -t 2 --kv-quant $q --bf16-attention all --membw 512 --json $q-$r.json > $q-$r.txt 2>&1
    date >> progress.txt
  done
done
echo done > done
