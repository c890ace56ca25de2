#!/bin/bash
# Three shapes, f16 and q8_0 KV, depths 1k-32k in one run each, every row read
# against the bandwidth probes beside its own decode steps (kvtrim bench --membw).
# run-1k-32k.sh [r2]: round 1 SmolLM2, Qwen, Llama with the types in order;
# r2 the other order of shapes and of types. Writes its files beside itself,
# or in OUTDIR (a folder beside this one: the default paths below are relative).
# KVTRIM: the binary; SHAPES: the folder of the
# `kvtrim make-model --shape S --type q8_0 --seed 1` files (S-q8_0.gguf);
# DEPTHS (1024,4096,8192,16384,32700), CTX (32768) and TYPES ("f16 q8_0"):
# the bench's depths, context and KV types (SmolLM2, trained at 8k, gets
# RoPE scaled linearly by CTX / 8192, rounded up).
cd "$(dirname "$0")" && cd "${OUTDIR:-.}" || exit 1  # OUTDIR: relative to this folder
K=${KVTRIM:-../../../build/kvtrim}
r=${1:-r1}
depths=${DEPTHS:-1024,4096,8192,16384,32700} ctx=${CTX:-32768}
shapes="smollm2-135m qwen2.5-0.5b llama3.2-1b" types=${TYPES:-f16 q8_0}
if [ "$r" = r2 ]; then
  shapes="llama3.2-1b qwen2.5-0.5b smollm2-135m"
  types=$(echo $types | tr ' ' '\n' | tac | tr '\n' ' ')
fi
for s in $shapes; do
  M=${SHAPES:-../../../models-shape}/$s-q8_0.gguf
  rope=()
  [ $s = smollm2-135m ] && rope=(--rope-scaling linear --rope-scale $(( (ctx + 8191) / 8192 )))
  for t in $types; do
    echo "$(date -u +%T) $s $t $r" >> progress-$r.log
    $K bench -m $M -d $depths -c $ctx "${rope[@]}" --gen 32 --reps 1 -t 2 --kv-quant $t \
      --bf16-attention all --membw 512 --json $s-$t-$r.json > $s-$t-$r.txt 2>&1
  done
done
echo "$(date -u +%T) done" >> progress-$r.log
