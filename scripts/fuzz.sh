#!/usr/bin/env bash
# Runs one libFuzzer target for SECONDS (docs/reliability.md):
#   scripts/fuzz.sh gguf|tokenizer|plan|request SECONDS [libFuzzer flags...]
# Builds build-fuzz/ with clang (-DKVTRIM_FUZZ=ON: ASan + UBSan + coverage),
# writes the seed corpora once (fuzz/make_seeds.cpp, from ../shared and the
# test GGUF writer), and grows build-fuzz/corpus/TARGET. Crashing inputs land
# in build-fuzz/crashes/TARGET/; the log in build-fuzz/logs/TARGET.log.
# Environment: KVTRIM_FUZZ_BUILD (build dir), KVTRIM_SHARED_DIR, JOBS (build -j, default 2).
set -euo pipefail
TARGET=${1:?usage: scripts/fuzz.sh gguf|tokenizer|plan|request|context SECONDS [libFuzzer flags...]}
SECS=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
case "$TARGET" in
  gguf) MAX_LEN=800000 ;;   # the tiny models cut from the shared ones are up to ~770 KB
  tokenizer) MAX_LEN=4096 ;;
  plan) MAX_LEN=2048 ;;
  request) MAX_LEN=4096 ;;
  context) MAX_LEN=65536 ;;  # context files of a few hundred tokens of stories260K are ~20 KB
  *) echo "unknown target '$TARGET' (gguf, tokenizer, plan, request, context)" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${KVTRIM_FUZZ_BUILD:-$ROOT/build-fuzz}
SHARED=$(cd "${KVTRIM_SHARED_DIR:-$ROOT/../shared}" && pwd)
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$ROOT" -B "$B" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release -DKVTRIM_FUZZ=ON \
  -DKVTRIM_BUILD_TESTS=OFF -DKVTRIM_BUILD_BENCH=OFF -DKVTRIM_SHARED_DIR="$SHARED" "${LAUNCHER[@]}" >/dev/null
cmake --build "$B" -j"${JOBS:-2}" --target "fuzz_$TARGET" kvtrim_fuzz_seeds >/dev/null
[ -d "$B/seeds/$TARGET" ] || "$B/fuzz/kvtrim_fuzz_seeds" "$B/seeds" "$SHARED"
mkdir -p "$B/seeds/$TARGET"  # context: seeds from KVTRIM_FUZZ_SEED_FILES (real context files), else none
for f in ${KVTRIM_FUZZ_SEED_FILES:-}; do cp "$f" "$B/seeds/$TARGET/"; done
mkdir -p "$B/corpus/$TARGET" "$B/crashes/$TARGET" "$B/logs"
echo "fuzz_$TARGET for ${SECS}s (log: $B/logs/$TARGET.log)"
set +e
"$B/fuzz/fuzz_$TARGET" "$B/corpus/$TARGET" "$B/seeds/$TARGET" -max_total_time="$SECS" -max_len="$MAX_LEN" \
  -timeout=20 -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$B/crashes/$TARGET/" "$@" \
  >"$B/logs/$TARGET.log" 2>&1
rc=$?
set -e
grep -E "^#[0-9]+ +(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY" "$B/logs/$TARGET.log" || true
exit $rc
