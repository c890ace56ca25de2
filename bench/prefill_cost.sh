#!/usr/bin/env bash
# Prefill-time compression cost against the prefill of the same context
# (issue 30 item 2), one-shot and with --prefill-chunk, on a shape model
# (`kvtrim make-model`: noise weights, speed only; never quality).
#
#   bench/prefill_cost.sh [-m SHAPE] [-d "1024 4096 8192"] [-M "snapkv h2o ..."] [-r RATIO] [-c CHUNK] [-o "oneshot chunked"] [-t THREADS]
#
# Per depth D, method and mode: `kvtrim bench -d D --gen 1 --reps 1
# --kv METHOD --kv-ratio RATIO --kv-quant f16` (chunked: + --prefill-chunk
# CHUNK), one JSON line appended to $OUT/prefill-cost.jsonl with the mode
# and method. The bench row holds the prefill rate (chunked: compression
# between chunks included, prefill_compress_ms says how much), compress_ms
# (plans and applying, all chunks) and, for methods with a reference pass,
# the counter ref-pass-us. A "full" row per depth (one-shot) gives the
# prefill without any statistics. Methods that cannot stream are skipped in
# chunked mode. Past the model's context, -c D+2 with linear RoPE scaling
# (the speed does not depend on the rotation).
# `kvzip-per-head` runs kvzip with --kvzip-per-head (the mode that
# streams, with chunked reconstruction); `am-q1024` runs am with
# --am-max-queries 1024 (bounded reference queries), `am-ctxq` with
# --am-queries 0 (the context's own queries, no repeat pass), `am-lite`
# with both. A suffix -pcN on a kvzip or am method (`kvzip-pc0`,
# `kvzip-per-head-pc512`, `am-pc256`) adds --kvzip-pass-chunk N or
# --am-pass-chunk N (the reference pass repeating N tokens at a time; 0: all
# at once). A suffix -f32 (`kvzip-f32`, `am-pc256-f32`) runs with
# --bf16-attention off (the reference pass's tiles in f32, as before the
# bf16 tiles; the default `pass` uses bf16 where the CPU has it). On am
# methods, a suffix -frN adds --am-fit-rows N (`am-fr1024`, `am-fr1024-f32`),
# -rrN --am-refill-rounds N (`am-rr8`: the refill's rounds before the
# default became 1), -aqN --am-queries N and -mqN --am-max-queries N
# (`am-aq2`: the repeat's queries alone, one a token; `am-aq2-mq1024-pc512`),
# -opN --am-onpolicy N (`am-aq2-op2`: one repeat pass, each layer compacted
# as it reaches it), -minqN --am-min-queries N (`am-minq0`: the repeat's
# queries alone however few; `am-aq1-op0`: the defaults before).
# Suffixes come in any order. On kvzip methods, -poolK adds --kvzip-pool K and -fsF
# --kvzip-floor-share F (`kvzip-pool3-fs0.25`: pooled scores with a floor).
# bench/prefill_cost.py turns the log into the table and the plot.
set -euo pipefail
cd "$(dirname "$0")/.."
KVTRIM=${KVTRIM:-build/kvtrim}
SHAPES=${SHAPES:-/work/models-shape}
OUT=${OUT:-bench/results}
SHAPE=smollm2-135m
TYPE=q8_0
DEPTHS="1024 4096 8192"
METHODS="full window lru h2o scissorhands snapkv pyramidkv tova knorm keydiff expected-attention compactor kvslimmer razor kvzip am"
RATIO=0.1
CHUNK=2048
MODES="oneshot chunked"
THREADS=2
while getopts "m:d:M:r:c:o:t:" opt; do
  case $opt in
    m) SHAPE=$OPTARG ;; d) DEPTHS=$OPTARG ;; M) METHODS=$OPTARG ;; r) RATIO=$OPTARG ;; c) CHUNK=$OPTARG ;;
    o) MODES=$OPTARG ;; t) THREADS=$OPTARG ;;
    *) echo "usage: $0 [-m SHAPE] [-d DEPTHS] [-M METHODS] [-r RATIO] [-c CHUNK] [-o MODES] [-t THREADS]" >&2; exit 2 ;;
  esac
done
m="$SHAPES/$SHAPE-$TYPE.gguf"
[[ -f $m ]] || "$KVTRIM" make-model --shape "$SHAPE" --type "$TYPE" --seed 1 --out "$m" -q
CTX=$("$KVTRIM" inspect "$m" | sed -n 's/.*context \([0-9]*\),.*/\1/p' | head -1)
NOSTREAM=$("$KVTRIM" policies | awk '/^[a-z]/ {name=$1} /no --prefill-chunk/ {print name}')
mkdir -p "$OUT"
LOG="$OUT/prefill-cost.jsonl"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for d in $DEPTHS; do
  rope=()
  if (( d + 2 > CTX )); then rope=(-c $((d + 2)) --rope-scaling linear --rope-scale $(( (d + 1 + CTX) / CTX ))); fi
  for method in $METHODS; do
    for mode in $MODES; do
      base=$method pc=() arith=()
      while :; do  # suffixes, in any order, each stripped from the end
        if [[ $base =~ ^(.*)-f32$ ]]; then base=${BASH_REMATCH[1]} arith+=(--bf16-attention off)
        elif [[ $base =~ ^(am.*)-rr([0-9]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--am-refill-rounds "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^(am.*)-fr([0-9]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--am-fit-rows "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^(am.*)-aq([0-9]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--am-queries "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^(am.*)-mq([0-9]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--am-max-queries "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^(am.*)-op([0-9]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--am-onpolicy "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^(am.*)-minq([0-9]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--am-min-queries "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^(kvzip.*)-fs([0-9.]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--kvzip-floor-share "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^(kvzip.*)-pool([0-9]+)$ ]]; then base=${BASH_REMATCH[1]} arith+=(--kvzip-pool "${BASH_REMATCH[2]}")
        elif [[ $base =~ ^((kvzip|am).*)-pc([0-9]+)$ ]]; then
          base=${BASH_REMATCH[1]} pc=("--${BASH_REMATCH[2]}-pass-chunk" "${BASH_REMATCH[3]}")
        else break
        fi
      done
      flags=(--kv "$base")
      [[ $base == kvzip-per-head ]] && flags=(--kv kvzip --kvzip-per-head)
      flags+=("${pc[@]}" "${arith[@]}")
      [[ $method == am-q1024 ]] && flags=(--kv am --am-max-queries 1024)
      [[ $method == am-ctxq ]] && flags=(--kv am --am-queries 0)
      [[ $method == am-lite ]] && flags=(--kv am --am-queries 0 --am-max-queries 1024)
      [[ $method == full ]] || flags+=(--kv-ratio "$RATIO")
      if [[ $mode == chunked ]]; then
        [[ $method == full ]] && continue
        grep -qx "$base" <<< "$NOSTREAM" && continue
        flags+=(--prefill-chunk "$CHUNK")
      fi
      echo "# $SHAPE depth $d $method $mode ($(date -u +%H:%M:%S))" >&2
      "$KVTRIM" bench -m "$m" -d "$d" --gen 1 --reps 1 -t "$THREADS" --kv-quant f16 "${rope[@]}" "${flags[@]}" \
        --json "$TMP/b.json" > /dev/null 2> "$TMP/b.err" || { tail -3 "$TMP/b.err" >&2; continue; }
      python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))[-1]
r.update(shape=sys.argv[2], method=sys.argv[3], mode=sys.argv[4])
print(json.dumps(r))' "$TMP/b.json" "$SHAPE" "$method" "$mode" >> "$LOG"
    done
  done
done
