#!/usr/bin/env bash
# Quiet-machine timing set for issue 50 (run with every eval stopped).
# Environment: REPO (the checkout), SHAPES (the shape models), NEW (this
# code's kvtrim), OLD (kvtrim built from 1a16f06^, the code the day the
# decode issue was filed), LLAMA_BB (llama-batched-bench), W (where the
# results go).
set -u
cd "$REPO"
S=$SHAPES/smollm2-135m-q8_0.gguf
export LLAMA_BB
log() { echo "# $* ($(date -u +%H:%M:%S))" | tee -a $W/progress.txt; }
# 1. one-shot prefill at 16k: the binary before the first commit against this one (off, all), alternated
for round in 1 2; do
  for b in old new-off new-all; do
    log "prefill16k $b round $round"
    case $b in
      old) bin=$OLD; extra=() ;;
      new-off) bin=$NEW; extra=(--bf16-attention off) ;;
      new-all) bin=$NEW; extra=(--bf16-attention all) ;;
    esac
    $bin bench -m $S -d 16384 -c 16386 --rope-scaling linear --rope-scale 3 --gen 1 --reps 1 -t 2 --kv-quant f16 "${extra[@]}" \
      --json $W/prefill16k-$b-$round.json > $W/prefill16k-$b-$round.txt 2>&1
  done
done
# 2. KV types at 8k, full cache, two rounds
for round in 1 2; do
  for kv in f16 q8_0 q4_0; do
    log "types8k $kv round $round"
    $NEW bench -m $S -d 8192 --gen 32 --reps 3 -t 2 --kv-quant $kv --membw 512 --json $W/types8k-$kv-$round.json > $W/types8k-$kv-$round.txt 2>&1
  done
done
# 3. llama.cpp f16 and kvtrim (full f16, snapkv 0.1 chunked) at 16k; then 32k (llama.cpp f16, snapkv 0.1 chunked)
log "sweep 16k"
OUT=$W/sweep KVTRIM=$NEW LLAMA_KV="f16" KV_SETTINGS="full 0.1" PREFILL_CHUNK=2048 bash bench/depth_sweep.sh -m smollm2-135m -d 16384 2>> $W/progress.txt
log "sweep 32k"
OUT=$W/sweep KVTRIM=$NEW LLAMA_KV="f16" KV_SETTINGS="0.1" PREFILL_CHUNK=2048 bash bench/depth_sweep.sh -m smollm2-135m -d 32768 2>> $W/progress.txt
log "done"
