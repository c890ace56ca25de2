#!/usr/bin/env bash
# One line per fuzz log: executions, exec/s, final coverage (libFuzzer's cov
# = covered edges, ft = features), corpus size, peak RSS, crashes.
#   scripts/fuzz-stats.sh build-fuzz/logs/*.log
for log in "$@"; do
  t=$(basename "$log" .log)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $NF}')
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | awk '{print $NF}')
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | awk '{print $NF}')
  last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -1)
  init=$(grep -E '^#[0-9]+[[:space:]]+INITED' "$log" | head -1)
  cov=$(sed -E 's/.*cov: ([0-9]+).*/\1/' <<<"$last"); ft=$(sed -E 's/.*ft: ([0-9]+).*/\1/' <<<"$last")
  corp=$(sed -E 's/.*corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/' <<<"$last")
  icov=$(sed -E 's/.*cov: ([0-9]+).*/\1/' <<<"$init"); ift=$(sed -E 's/.*ft: ([0-9]+).*/\1/' <<<"$init")
  crashes=$(grep -c -E '^==[0-9]+==ERROR|SUMMARY: |deadly signal' "$log")
  echo "$t: executions $execs ($eps/s), cov $icov -> $cov, ft $ift -> $ft, corpus $corp, peak RSS ${rss} MB, crash reports $crashes"
done
