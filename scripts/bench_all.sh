#!/usr/bin/env bash
# Reproduces the benchmark numbers quoted in the issue notes; writes JSON rows
# to bench/results/ and a log to bench/results/bench_all.log.
# Usage: scripts/bench_all.sh [kvtrim binary] (default build/kvtrim). Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${1:-build/kvtrim}
S=${KVTRIM_SHARED:-../shared}/models
R=bench/results
mkdir -p "$R"
{
  echo "# $(date -u +%FT%TZ) $(nproc) cores, $K"
  echo "## read bandwidth probes (MiB: 1 ~ L2, 16 ~ needle f32 working set, 1024 ~ DRAM)"
  for mb in 1 4 16 1024; do "$K" bench -m "$S/stories260K.gguf" -d 0 --gen 4 --reps 1 --membw "$mb" | grep "read bandwidth"; done
  echo "## engine: needle f32 / q8_0 / q4_0 at depth 0 and 1024 (clipped to ctx - gen = 992), stories260K at 0 and 256"
  "$K" bench -m models/needle-3.7M-f32.gguf -d 0,1024 --gen 32 --reps 5 --json "$R/needle-f32.json"
  "$K" bench -m "$S/needle-3.7M-q8_0.gguf" -d 0,1024 --gen 32 --reps 5 --json "$R/needle-q8_0.json"
  "$K" bench -m "$S/needle-3.7M-q4_0.gguf" -d 0,1024 --gen 32 --reps 5 --json "$R/needle-q4_0.json"
  "$K" bench -m "$S/stories260K.gguf" -d 0,256 --gen 64 --reps 5 --json "$R/stories260K.json"
  echo "## compressed caches at 10% retention, depth 1024 (decode-time eviction during the timed steps)"
  for p in full window h2o scissorhands lru random; do
    "$K" bench -m models/needle-3.7M-f32.gguf -d 1024 --gen 32 --reps 5 --kv "$p" --kv-ratio 0.1 --json "$R/kv-$p-r0.1.json"
  done
  echo "## peak RSS of a 1002-token generation: full vs window 0.1"
  for p in full window; do
    "$K" run -p "It was a dark and stormy night." -n 990 --temp 0.8 --seed 3 --ignore-eos --kv "$p" --kv-ratio 0.1 2>&1 >/dev/null | grep -E "decode|kv:|RSS"
  done
} 2>&1 | grep -v clipped | tee "$R/bench_all.log"
