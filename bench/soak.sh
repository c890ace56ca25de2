#!/usr/bin/env bash
# Issue 32's soak (docs/server.md): `kvtrim serve` over a --context-store
# directory, and `kvtrim serve-bench --soak-minutes M` against it on
# loopback: clients create a context, ask it questions, delete it, again.
#   bash bench/soak.sh [MINUTES] [OUT]   (defaults: 20, docs/results/context-store/soak)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MIN=${1:-20}
OUT=${2:-$ROOT/docs/results/context-store/soak}
K=${KVTRIM:-$ROOT/build/kvtrim}
STORE=$(mktemp -d /tmp/kvtrim-soak-XXXX)
PORT=${PORT:-18555}
mkdir -p "$OUT"
"$K" serve --port "$PORT" -t 1 --parallel 1 --queue 8 --context-store "$STORE" 2>"$OUT/server.log" &
SRV=$!
trap 'kill $SRV 2>/dev/null; rm -rf "$STORE"' EXIT
for _ in $(seq 100); do curl -sf "localhost:$PORT/health" >/dev/null && break; sleep 0.1; done
"$K" serve-bench --port "$PORT" --soak-minutes "$MIN" --soak-interval-s 60 --clients 2 --questions 5 \
  --context-tokens 900 --max-tokens 8 --kv snapkv --ratios 0.25 --out "$OUT" >/dev/null
echo "files left in the store: $(ls "$STORE" | wc -l)" | tee -a "$OUT/soak.md"
