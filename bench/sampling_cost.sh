#!/usr/bin/env bash
# Decode speed with sampling against greedy, run after run in turn on one
# model and prompt: how much of a decode step the sampler takes.
#   bash bench/sampling_cost.sh MODEL PROMPT_FILE [REPS] [N] [THREADS]
# Each rep runs `kvtrim run -n N` greedy (--temp 0), with the default chain
# (--temp 0.8: penalty off, top-k 40, top-p 0.9) and with top-k off
# (--top-k 0: top-p over the whole vocabulary), in that order, and reads
# the decode rate from the run's stderr. Prints every rate, each setting's
# median, and the median over reps of each rep's sampled/greedy ratio (the
# pairing cancels the machine's drift). Run it on a quiet machine.
set -euo pipefail
model=$1 prompt=$2 reps=${3:-7} n=${4:-128} threads=${5:-2}
kvtrim=${KVTRIM:-./build/kvtrim}
rate() {  # rate ARGS...: decode tok/s of one run, and the sampler's share of the decode time (%)
  "$kvtrim" run -m "$model" -f "$prompt" -n "$n" --ignore-eos -t "$threads" "$@" 2>&1 >/dev/null |
    sed -n 's/^decode: .* (\([0-9.]*\) tok\/s), sampling .* ms (\([0-9.]*\)%)$/\1 \2/p'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
g=() d=() k=() rd=() rk=() sg=() sd=() sk=()
for ((i = 0; i < reps; i++)); do
  read -r a pa < <(rate --temp 0)
  read -r b pb < <(rate)
  read -r c pc < <(rate --top-k 0)
  g+=("$a") d+=("$b") k+=("$c") sg+=("$pa") sd+=("$pb") sk+=("$pc")
  rd+=("$(awk -v x="$b" -v y="$a" 'BEGIN {print x / y}')") rk+=("$(awk -v x="$c" -v y="$a" 'BEGIN {print x / y}')")
  echo "rep $i: greedy $a, default chain $b, top-k off $c tok/s (sampler $pa, $pb, $pc % of the decode)" >&2
done
printf '| setting | decode tok/s (median of %d) | min | max | / greedy (median of paired ratios) | sampler, %% of the decode (median) |\n|---|---:|---:|---:|---:|---:|\n' "$reps"
row() {  # row NAME RATIO SHARE VALUES...
  local name=$1 ratio=$2 share=$3
  shift 3
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$(printf '%s\n' "$@" | median)" \
    "$(printf '%s\n' "$@" | sort -g | head -1)" "$(printf '%s\n' "$@" | sort -g | tail -1)" "$ratio" "$share"
}
med() { printf '%s\n' "$@" | median | xargs printf '%.3f'; }
row "greedy (--temp 0)" 1 "$(med "${sg[@]}")" "${g[@]}"
row "default chain (top-k 40, top-p 0.9, temp 0.8)" "$(med "${rd[@]}")" "$(med "${sd[@]}")" "${d[@]}"
row "top-k off (--top-k 0: top-p over the vocabulary)" "$(med "${rk[@]}")" "$(med "${sk[@]}")" "${k[@]}"
