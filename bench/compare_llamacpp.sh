#!/usr/bin/env bash
# kvtrim vs llama.cpp on the same GGUF files, same threads, runs interleaved.
#
#   bench/compare_llamacpp.sh [-r ROUNDS] [-k REPS] [-t "1 2"] [-m "model ..."]
#
# Environment: KVTRIM (default build/kvtrim), LLAMA_BENCH (default
# /work/llama.cpp/build/bin/llama-bench), MODELS (default ../shared/models),
# OUT (default bench/results). Writes $OUT/llamacpp-compare.{md,json}.
#
# Tests per model and thread count: pp512 (prefill 512 tokens, empty cache),
# tg64 (64 decode steps from an empty cache) and tg64 @ dD (64 decode steps
# after D = min(960, ctx - 64) tokens). This llama-bench (c392e509) has no -d,
# so its tg64 @ dD is derived from the same run: 64 / (t(pp D + tg 64) - t(pp D))
# with the median times of -pg D,64 and -p D. kvtrim measures it directly
# (`kvtrim bench -o json -p 0 -n 64 -d D`). Each round runs llama.cpp, then
# kvtrim (or the other way round on odd rounds), so load drifts hit both;
# the table gives medians over every sample of every round and the
# interquartile range relative to the median as the noise.
set -euo pipefail
cd "$(dirname "$0")/.."
KVTRIM=${KVTRIM:-build/kvtrim}
LLAMA_BENCH=${LLAMA_BENCH:-/work/llama.cpp/build/bin/llama-bench}
MODELS=${MODELS:-../shared/models}
OUT=${OUT:-bench/results}
ROUNDS=3
REPS=5
THREADS="1 2"
LIST="needle-v1-3.7M-f32 needle-v1-3.7M-q8_0 needle-v1-3.7M-q4_0 stories260K needle-3.7M-q4_k_m"
while getopts "r:k:t:m:" opt; do
  case $opt in
    r) ROUNDS=$OPTARG ;; k) REPS=$OPTARG ;; t) THREADS=$OPTARG ;; m) LIST=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-k REPS] [-t THREADS] [-m MODELS]" >&2; exit 2 ;;
  esac
done
for b in "$KVTRIM" "$LLAMA_BENCH"; do
  [[ -x $b ]] || { echo "missing executable: $b" >&2; exit 1; }
done
mkdir -p "$OUT"
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT

ctx_of() {  # context length from kvtrim inspect
  "$KVTRIM" inspect "$1" | sed -n 's/.*context \([0-9]*\).*/\1/p' | head -1
}

run_llama() {  # model threads depth round
  local f=$RAW/llama-$(basename "$1" .gguf)-t$2-r$4.json
  "$LLAMA_BENCH" -m "$1" -t "$2" -p 512,"$3" -n 64 -pg "$3",64 -r "$REPS" -o json >"$f" 2>"$f.err" ||
    { echo "llama-bench failed on $1 (see below)" >&2; cat "$f.err" >&2; echo "[]" >"$f"; }
}
run_kvtrim() {  # model threads depth round
  local base=$RAW/kvtrim-$(basename "$1" .gguf)-t$2-r$4
  "$KVTRIM" bench -m "$1" -t "$2" -o json -p 512 -n 64 --reps "$REPS" >"$base-a.json" 2>"$base.err" &&
    "$KVTRIM" bench -m "$1" -t "$2" -o json -p 0 -n 64 -d "$3" --reps "$REPS" >"$base-b.json" 2>>"$base.err" ||
    { echo "kvtrim bench failed on $1" >&2; cat "$base.err" >&2; echo "[]" >"$base-a.json"; echo "[]" >"$base-b.json"; }
}

META=$RAW/meta.txt
: >"$META"
for r in $(seq 1 "$ROUNDS"); do
  for name in $LIST; do
    m=$MODELS/$name.gguf
    [[ -f $m ]] || { echo "skipping missing model $m" >&2; continue; }
    ctx=$(ctx_of "$m")
    depth=$(( ctx - 64 < 960 ? ctx - 64 : 960 ))
    [[ $r == 1 ]] && echo "$name $depth" >>"$META"
    for t in $THREADS; do
      echo "round $r/$ROUNDS: $name, $t threads, depth $depth" >&2
      if (( r % 2 )); then run_llama "$m" "$t" "$depth" "$r"; run_kvtrim "$m" "$t" "$depth" "$r";
      else run_kvtrim "$m" "$t" "$depth" "$r"; run_llama "$m" "$t" "$depth" "$r"; fi
    done
  done
done

python3 - "$RAW" "$OUT" "$ROUNDS" "$REPS" "$LLAMA_BENCH" <<'PY'
import glob, json, os, statistics as st, sys, subprocess, datetime
raw, out, rounds, reps, llama = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
depth = dict(l.split() for l in open(os.path.join(raw, "meta.txt")))
def load(pat):
    rows = []
    for f in sorted(glob.glob(os.path.join(raw, pat))):
        try: rows += json.load(open(f))
        except Exception: pass
    return rows
def q(xs, p):
    xs = sorted(xs); i = (len(xs) - 1) * p; lo = int(i); hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)
def med_iqr(ns):  # median seconds, IQR / median
    if not ns: return None, None
    m = st.median(ns); return m, (q(ns, .75) - q(ns, .25)) / m
results = []
for name, d in depth.items():
    d = int(d)
    for t in sorted({int(f.split("-t")[-1].split("-r")[0]) for f in glob.glob(os.path.join(raw, f"llama-{name}-t*-r*.json"))}):
        L = load(f"llama-{name}-t{t}-r*.json"); K = load(f"kvtrim-{name}-t{t}-r*-?.json")
        def ls(p, g): return [x for r in L if r["n_prompt"] == p and r["n_gen"] == g for x in r["samples_ns"]]
        def ks(p, g, dd): return [x for r in K if r["n_prompt"] == p and r["n_gen"] == g and r.get("n_depth", 0) == dd for x in r["samples_ns"]]
        rows = []
        lm, ln = med_iqr(ls(512, 0)); km, kn = med_iqr(ks(512, 0, 0)); rows.append(("pp512", 512, lm, ln, km, kn))
        lm, ln = med_iqr(ls(0, 64)); km, kn = med_iqr(ks(0, 64, 0)); rows.append(("tg64", 64, lm, ln, km, kn))
        pg, pgn = med_iqr(ls(d, 64)); pd, pdn = med_iqr(ls(d, 0)); km, kn = med_iqr(ks(0, 64, d))
        lm = pg - pd if pg and pd and pg > pd else None
        ln = (pgn * pg + pdn * pd) / lm if lm else None  # IQRs of both terms, relative to the difference
        rows.append((f"tg64 @ d{d}", 64, lm, ln, km, kn))
        for test, n, lm, ln, km, kn in rows:
            lt = n / lm * 1e9 if lm else None; kt = n / km * 1e9 if km else None
            results.append(dict(model=name, threads=t, test=test, llama_ts=lt, llama_noise=ln, kvtrim_ts=kt,
                                kvtrim_noise=kn, ratio=(kt / lt if lt and kt else None)))
def f(x, fmt): return fmt % x if x is not None else "n/a"
def pct(x): return "%.0f%%" % (100 * x) if x is not None else "n/a"
md = [f"# kvtrim vs llama.cpp ({datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC)", "",
      f"llama-bench: `{llama}`; {rounds} interleaved rounds x {reps} repetitions; medians over all samples;",
      "noise = interquartile range / median of the samples (llama.cpp's tg @ depth: from -pg D,64 minus -p D).", "",
      "| model | threads | test | llama.cpp t/s | noise | kvtrim t/s | noise | kvtrim / llama.cpp |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for r in results:
    md.append(f"| {r['model']} | {r['threads']} | {r['test']} | {f(r['llama_ts'], '%.1f')} | {pct(r['llama_noise'])} | "
              f"{f(r['kvtrim_ts'], '%.1f')} | {pct(r['kvtrim_noise'])} | {f(r['ratio'], '%.2fx')} |")
open(os.path.join(out, "llamacpp-compare.md"), "w").write("\n".join(md) + "\n")
json.dump(dict(rounds=rounds, reps=reps, llama_bench=llama, rows=results), open(os.path.join(out, "llamacpp-compare.json"), "w"), indent=2)
print("\n".join(md))
PY
