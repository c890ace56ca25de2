#!/usr/bin/env bash
# Runs a command with the wall clocks ticking in 20 ms steps (coarse_clock.c),
# e.g. bash scripts/coarse_clock/run.sh ctest --test-dir build -j2
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="${TMPDIR:-/tmp}/kvtrim-coarse-clock.so"
if [ ! -f "$lib" ] || [ "$here/coarse_clock.c" -nt "$lib" ]; then
  cc -O2 -shared -fPIC -o "$lib" "$here/coarse_clock.c" -ldl
fi
LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" exec "$@"
