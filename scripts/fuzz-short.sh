#!/usr/bin/env bash
# A short run of every fuzz target (60 s each; not part of the default test
# command): scripts/fuzz-short.sh [SECONDS]. Stops at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
for t in gguf tokenizer plan request; do
  bash scripts/fuzz.sh "$t" "${1:-60}"
done
