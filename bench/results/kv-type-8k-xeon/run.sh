#!/bin/bash
# Decode at depth 8,192 by KV type (f16, q8_0, q4_0) on the three shapes,
# each row against the read-bandwidth probes beside its decode steps:
# depth-row-probes/run-1k-32k.sh at one depth. run.sh [r2]: round 1 shapes
# SmolLM2, Qwen, Llama and types f16, q8_0, q4_0; r2 both in the other order.
# `kvtrim bench -m SHAPE -d 8192 -c 8300 --gen 32 --reps 1 -t 2 --kv-quant T
# --bf16-attention all --membw 512` (SmolLM2 `--rope-scaling linear
# --rope-scale 2`). Writes its files beside itself.
OUTDIR=../kv-type-8k-xeon DEPTHS=8192 CTX=8300 TYPES="f16 q8_0 q4_0" \
  exec "$(dirname "$0")/../depth-row-probes/run-1k-32k.sh" "$@"
