#!/usr/bin/env bash
# Installs the Debian packages kvtrim builds and runs with.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
PKGS=(
  g++ cmake make              # C++20 toolchain
  libsleef-dev                # vectorized exp (softmax)
  libeigen3-dev               # GEMM for batched prefill; eigen/QR/least squares for the compression methods
  libcli11-dev                # command-line parsing
  nlohmann-json3-dev          # JSON output and test goldens
  libpcre2-dev pkg-config     # Unicode regexes of the byte-level BPE pre-tokenizers
  libcpp-httplib-dev          # HTTP server
  pkg-config                  # finds cpp-httplib's compiled library and flags
  libgtest-dev libgmock-dev   # unit tests
  libbenchmark-dev            # kernel micro-benchmarks
  gnuplot-nox                 # plots in eval reports
  libxxhash-dev               # checksums of the context files (--save-context)
  libhiredis-dev              # kvtrim serve --context-store redis://HOST:PORT (replicas sharing contexts)
  redis-server                # the tests of that store start a real one on a loopback port
  tmux                        # the tests drive `kvtrim chat` through a pseudo-terminal
)
# Fuzzing (docs/reliability.md; not needed by CI): KVTRIM_FUZZ=1 bash scripts/setup.sh
if [ "${KVTRIM_FUZZ:-0}" = 1 ]; then
  PKGS+=(clang libclang-rt-14-dev llvm)  # clang++ -fsanitize=fuzzer, llvm-cov
fi
missing=()
for p in "${PKGS[@]}"; do
  [[ "$p" == \#* ]] && continue
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
