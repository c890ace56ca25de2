#!/usr/bin/env bash
# llama.cpp beside kvtrim at depth 16,384 on the Qwen2.5-0.5B and
# Llama-3.2-1B shapes (q8_0 noise weights), nothing else running:
# per shape llama.cpp with f16 and with q8_0 KV (llama-batched-bench, flash
# attention), then kvtrim's full f16 cache and snapkv r = 0.1 prefilled
# 2,048 tokens at a time (kvtrim bench, each row against the read-bandwidth
# probes beside its decode steps). Appends to depth-sweep.jsonl here.
# As run on 2026-11-30: the first command, its Llama q8_0 llama.cpp row
# stopped after 16 minutes of its prefill (the f16 one took 20; q8_0 was
# the slower on Qwen here and on SmolLM2 before), then the second for
# kvtrim's Llama rows.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=bench/results/llamacpp-16k-shapes LLAMA_KV="f16 q8_0" KV_SETTINGS="full 0.1" PREFILL_CHUNK=2048 \
  bench/depth_sweep.sh -m "qwen2.5-0.5b llama3.2-1b" -d 16384 -g 32 -t 2
OUT=bench/results/llamacpp-16k-shapes LLAMA_KV="" KV_SETTINGS="full 0.1" PREFILL_CHUNK=2048 \
  bench/depth_sweep.sh -m llama3.2-1b -d 16384 -g 32 -t 2
