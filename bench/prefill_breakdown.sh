#!/usr/bin/env bash
# Where a prefill of N tokens spends its time, two kvtrim binaries side by side.
#
#   bench/prefill_breakdown.sh BEFORE_BIN AFTER_BIN [-r ROUNDS] [-t "1 2"] [-m "model ..."] [-n TOKENS]
#
# Runs `kvtrim bench -m MODEL -t T --prefill N --reps 3 --time-breakdown --kv h2o --kv-ratio 0.5`
# with each binary, alternating (before, after, before, ...) so load drifts hit both, and prints a
# markdown table (one row per run) on stdout. MODELS (default ../shared/models) is where the models are.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { echo "usage: $0 BEFORE_BIN AFTER_BIN [-r ROUNDS] [-t THREADS] [-m MODELS] [-n TOKENS]" >&2; exit 2; }
BEFORE=$1 AFTER=$2
shift 2
MODELS=${MODELS:-../shared/models}
ROUNDS=2 THREADS="1 2" N=1024
LIST="needle-v1-3.7M-f32 needle-v1-3.7M-q8_0 needle-v1-3.7M-q4_0"
while getopts "r:t:m:n:" opt; do
  case $opt in
    r) ROUNDS=$OPTARG ;; t) THREADS=$OPTARG ;; m) LIST=$OPTARG ;; n) N=$OPTARG ;;
    *) exit 2 ;;
  esac
done
for b in "$BEFORE" "$AFTER"; do [[ -x $b ]] || { echo "missing executable: $b" >&2; exit 1; }; done
echo "Command: \`kvtrim bench -m MODEL -t THREADS --prefill $N --reps 3 --time-breakdown --kv h2o --kv-ratio 0.5\`"
echo "before: \`$BEFORE\`; after: \`$AFTER\`; $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | run | model | threads | total ms | tok/s | matrix products | attention | statistics taps | other |"
echo "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
row() {  # round label binary model threads
  local out
  out=$("$3" bench -m "$MODELS/$4.gguf" -t "$5" --prefill "$N" --reps 3 --time-breakdown --kv h2o --kv-ratio 0.5 2>&1)
  echo "$out" | awk -v r="$1" -v run="$2" -v m="$4" -v t="$5" '
    /^prefill of/ { for (i = 1; i <= NF; ++i) { if ($i == "ms") total = $(i-1); if ($i ~ /^\(/) { tps = substr($i, 2) } } }
    /matrix products/ { mm = $3 " ms (" int($5 + 0.5) "%)" }
    /^  attention/ { at = $2 " ms (" int($4 + 0.5) "%)" }
    /statistics taps/ { st = $3 " ms (" int($5 + 0.5) "%)" }
    /^  other/ { ot = $2 " ms (" int($4 + 0.5) "%)" }
    END { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r, run, m, t, total, tps, mm, at, st, ot }'
}
for r in $(seq 1 "$ROUNDS"); do
  for m in $LIST; do
    for t in $THREADS; do
      row "$r" before "$BEFORE" "$m" "$t"
      row "$r" after "$AFTER" "$m" "$t"
    done
  done
done
