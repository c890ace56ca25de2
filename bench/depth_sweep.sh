#!/usr/bin/env bash
# Decode speed against context depth, kvtrim against llama.cpp (issue 29
# item 5), on the shape models (`kvtrim make-model`: noise weights, speed
# only), interleaved per depth so that load drifts hit every setting alike.
#
#   bench/depth_sweep.sh [-m "smollm2-135m ..."] [-d "1024 4096 ..."] [-g GEN] [-t THREADS] [-T TYPE]
#
# Per model and depth D, in this order: llama.cpp with flash attention and
# f16 KV, then q8_0 KV (llama-batched-bench: a D-token prompt, then GEN
# decode steps timed on their own, -npl 1), kvtrim with the full cache (f16
# KV), snapkv at r = 0.25 and at r = 0.1 (`kvtrim bench -d D --gen GEN`, f16
# KV). This llama-bench (c392e509) has no -d, so llama-batched-bench gives
# the decode at depth directly (its S_TG column: GEN tokens over their own
# time) instead of by subtraction. kvtrim also measures the machine's read
# bandwidth (`--membw 512`) once per model, and each kvtrim row gives its
# decode's bytes read per second as a share of it.
#
# Depths beyond a model's context: both get a context of D + GEN (-c);
# kvtrim also scales RoPE linearly (`--rope-scaling linear --rope-scale F`:
# the speed does not depend on the rotation).
#
# Run it on a quiet machine: a `nice -n 19` job beside a 2-thread decode
# halves it here (its time slices stall every layer's barrier); stop such
# jobs (kill -STOP) while it runs.
#
# Environment: KVTRIM (build/kvtrim), LLAMA_BB (/work/llama.cpp/build/bin/
# llama-batched-bench), SHAPES (/work/models-shape), OUT (bench/results),
# LLAMA_KV (the llama.cpp KV types, default "f16 q8_0"; empty: no llama.cpp
# rows), KV_SETTINGS (default "full 0.25 0.1": kvtrim's full f16 cache and
# snapkv at those ratios), PREFILL_CHUNK (empty: the compressed settings
# prefill the prompt whole, then compress; N: `--prefill-chunk N`, which
# keeps the same number of entries and prefills long prompts faster).
# Appends one JSON line per measurement to $OUT/depth-sweep.jsonl;
# bench/depth_sweep.py turns it into the table and the plot.
set -euo pipefail
cd "$(dirname "$0")/.."
KVTRIM=${KVTRIM:-build/kvtrim}
LLAMA_BB=${LLAMA_BB:-/work/llama.cpp/build/bin/llama-batched-bench}
SHAPES=${SHAPES:-/work/models-shape}
OUT=${OUT:-bench/results}
MODELS="smollm2-135m"
DEPTHS="1024 4096 8192 16384 32768"
GEN=32
THREADS=2
TYPE=q8_0
LLAMA_KV=${LLAMA_KV-f16 q8_0}
KV_SETTINGS=${KV_SETTINGS-full 0.25 0.1}
PREFILL_CHUNK=${PREFILL_CHUNK-}
CHUNK_FLAGS=()
[[ -n $PREFILL_CHUNK ]] && CHUNK_FLAGS=(--prefill-chunk "$PREFILL_CHUNK")
while getopts "m:d:g:t:T:" opt; do
  case $opt in
    m) MODELS=$OPTARG ;; d) DEPTHS=$OPTARG ;; g) GEN=$OPTARG ;; t) THREADS=$OPTARG ;; T) TYPE=$OPTARG ;;
    *) echo "usage: $0 [-m MODELS] [-d DEPTHS] [-g GEN] [-t THREADS] [-T TYPE]" >&2; exit 2 ;;
  esac
done
for b in "$KVTRIM" "$LLAMA_BB"; do
  [[ -x $b ]] || { echo "missing executable: $b" >&2; exit 1; }
done
mkdir -p "$OUT"
LOG="$OUT/depth-sweep.jsonl"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The model's trained context (kvtrim inspect).
context_of() { "$KVTRIM" inspect "$1" | sed -n 's/.*context \([0-9]*\),.*/\1/p' | head -1; }

llama_row() {  # model file, depth, kv type -> one JSON line
  local m=$1 d=$2 kt=$3
  "$LLAMA_BB" -m "$m" -c $((d + GEN + 16)) -b 2048 -ub 512 -npp "$d" -ntg "$GEN" -npl 1 -fa \
    -ctk "$kt" -ctv "$kt" -t "$THREADS" > "$TMP/bb.txt" 2> "$TMP/bb.err" || { tail -5 "$TMP/bb.err" >&2; return 1; }
  # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
  awk -v m="$m" -v d="$d" -v kt="$kt" -v th="$THREADS" -F'|' \
    '$2 ~ /^ *[0-9]+ *$/ {gsub(/ /,""); printf "{\"engine\":\"llama.cpp\",\"setting\":\"fa %s\",\"model\":\"%s\",\"depth\":%s,\"threads\":%s,\"decode_tok_s\":%s,\"decode_s\":%s,\"prefill_tok_s\":%s}\n", kt, m, d, th, $9, $8, $7}' \
    "$TMP/bb.txt"
}

kvtrim_row() {  # model file, depth, setting name, extra flags...
  local m=$1 d=$2 name=$3
  shift 3
  local rope=()
  if (( d + GEN + 1 > CTX )); then  # + the untimed first decode step
    local f=$(( (d + GEN + CTX) / CTX ))
    rope=(-c $((d + GEN + 1)) --rope-scaling linear --rope-scale "$f")
  fi
  "$KVTRIM" bench -m "$m" -d "$d" --gen "$GEN" --reps 1 -t "$THREADS" --kv-quant f16 "${rope[@]}" "$@" --membw 512 \
    --json "$TMP/kv.json" > /dev/null 2> "$TMP/kv.err" || { tail -5 "$TMP/kv.err" >&2; return 1; }
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))[-1]
# the row probes beside its decode steps; for llama.cpp rows the once-per-model figure
r.update(engine="kvtrim", setting=sys.argv[2], membw_gb_s=r.get("row_mem_read_gb_s") or float(sys.argv[3]))
print(json.dumps(r))' "$TMP/kv.json" "$name" "$MEMBW"
}

for name in $MODELS; do
  m="$SHAPES/$name-$TYPE.gguf"
  [[ -f $m ]] || "$KVTRIM" make-model --shape "$name" --type "$TYPE" --seed 1 --out "$m" -q
  CTX=$(context_of "$m")
  # The machine's read bandwidth, once per model (kvtrim bench --membw 512).
  "$KVTRIM" bench -m "$m" -d 0 --gen 8 --reps 1 -t "$THREADS" --membw 512 --json "$TMP/bw.json" > /dev/null 2>&1
  MEMBW=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[-1]["mem_read_gb_s"])' "$TMP/bw.json")
  echo "# $name: context $CTX, read bandwidth $MEMBW GB/s" >&2
  for d in $DEPTHS; do
    echo "# $name depth $d ($(date -u +%H:%M:%S))" >&2
    for kt in $LLAMA_KV; do llama_row "$m" "$d" "$kt" >> "$LOG"; done
    for s in $KV_SETTINGS; do
      if [[ $s == full ]]; then kvtrim_row "$m" "$d" "full f16" >> "$LOG"
      else kvtrim_row "$m" "$d" "snapkv $s" --kv snapkv --kv-ratio "$s" "${CHUNK_FLAGS[@]}" >> "$LOG"; fi
    done
  done
done
