#!/usr/bin/env python3
"""A long conversation on `kvtrim serve`, turn by turn, budgeted against full.

One conversation of N turns per KV setting on a fresh server: every turn a
user message of about W words and an answer of A tokens (greedy,
ignore_eos, so every turn has the same size). Per turn it records, from
outside the server: the turn's wall time on the client, the server's
resident memory (VmRSS, /proc) after the turn, and what the response
reports: the conversation's tokens, the entries held, the bytes held, the
turn's peak KV bytes, prefill and decode ms. Writes DIR/turns.csv,
DIR/summary.json and DIR/turns.png (gnuplot).

  python3 bench/conversation_turns.py --kvtrim build/kvtrim -m MODEL --out DIR \
      --turns 200 --budget 2048 --policy snapkv [--store] [--ctx N]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

from serve_http import call, free_port, rss_kib, wait_healthy

WORDS = ("river mill stone bridge lantern orchard meadow harbour signal winter candle ledger "
         "quarry thistle compass furnace ribbon saddle").split()








def start(a, port, log, store):
    cmd = [a.kvtrim, "serve", "-m", a.model, "--port", str(port), "-t", str(a.threads)]
    if a.ctx:
        cmd += ["-c", str(a.ctx)]
    if store:
        cmd += ["--context-store", store]
    return wait_healthy(subprocess.Popen(cmd, stderr=log, stdout=log), port, cmd)


def run(a, label, kv):
    port = free_port()
    log = open(os.path.join(a.out, f"server-{label}.log"), "w")
    store = tempfile.mkdtemp(prefix="kvtrim-conv-") if a.store else None
    p = start(a, port, log, store)
    rows = []
    try:
        call(port, "POST", "/v1/conversations", dict(id="bench", **kv))
        for t in range(1, a.turns + 1):
            words = " ".join(WORDS[(t * 7 + i * 3) % len(WORDS)] for i in range(a.words))
            body = {"conversation": "bench", "messages": [{"role": "user", "content": f"Turn {t}: {words}."}],
                    "max_tokens": a.answer, "temperature": 0, "ignore_eos": True}
            r, ms = call(port, "POST", "/v1/chat/completions", body)
            c, x = r["kvtrim"]["conversation"], r["kvtrim"]
            rows.append(dict(mode=label, turn=t, wall_ms=round(ms, 2), prefill_ms=x["prefill_ms"],
                             decode_ms=x["decode_ms"], tokens=c["tokens"], rope_position=c["rope_position"], entries=c["entries"], kv_bytes=c["kv_bytes"],
                             kv_bytes_held=c["kv_bytes_held"], kv_bytes_peak_turn=c["kv_bytes_peak_turn"],
                             kv_bytes_full=c["kv_bytes_full"], rss_kib=rss_kib(p.pid),
                             turn_tokens=r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"]))
            if t % 20 == 0:
                print(f"{label}: turn {t}: {ms:.0f} ms, {c['tokens']} tokens, {c['entries']} entries, "
                      f"peak {c['kv_bytes_peak_turn'] / 2**20:.1f} MiB", file=sys.stderr, flush=True)
    finally:
        p.terminate()
        p.wait()
    return rows


def summarize(rows, budget_entries_per_head, heads, bytes_per_entry):
    late = [r for r in rows if r["turn"] >= 10]
    walls = [r["wall_ms"] for r in late]
    med = statistics.median(walls)
    first10 = statistics.median(r["wall_ms"] for r in rows[9:19])
    last10 = statistics.median(r["wall_ms"] for r in rows[-10:])
    s = dict(turns=len(rows), wall_ms_median_10_on=med, wall_ms_median_turns_10_19=first10,
             wall_ms_median_last_10=last10, last_over_first=last10 / first10,
             wall_ms_min_10_on=min(walls), wall_ms_max_10_on=max(walls),
             peak_kv_max=max(r["kv_bytes_peak_turn"] for r in rows),
             tokens_last=rows[-1]["tokens"], rss_kib_first=rows[0]["rss_kib"], rss_kib_last=rows[-1]["rss_kib"])
    if "rope_position" in rows[0]:  # re-bases: turns whose RoPE position fell
        pos = [int(r["rope_position"]) for r in rows]
        s["rope_position_max"] = max(pos)
        s["rebases"] = sum(1 for a, b in zip(pos, pos[1:]) if b < a)
    if budget_entries_per_head:
        # The bound: budget + the turn's tokens per head, at the allocation's
        # growth step (max(16, n / 16) rows) above it.
        worst = 0.0
        for r in rows:
            n = budget_entries_per_head + r["turn_tokens"]
            bound = heads * (n + max(16, n // 16)) * bytes_per_entry
            worst = max(worst, r["kv_bytes_peak_turn"] / bound)
        s["peak_over_bound_max"] = worst
    return s


def plot(a, rows):
    dat = os.path.join(a.out, "turns.dat")
    with open(dat, "w") as f:
        for mode in ("budget", "full"):
            f.write(f'"{mode}"\n')
            for r in rows:
                if r["mode"] == mode:
                    f.write(f'{r["turn"]} {r["wall_ms"]} {r["kv_bytes_peak_turn"] / 2**20:.3f} {r["rss_kib"] / 1024:.1f}\n')
            f.write("\n\n")
    gp = f"""set terminal pngcairo size 1100,420 font ",10" noenhanced
set output "{os.path.join(a.out, 'turns.png')}"
set multiplot layout 1,2 title "{a.turns}-turn conversation, {os.path.basename(a.model)}, {a.policy} at {a.budget} entries/head vs full cache"
set xlabel "turn"; set ylabel "peak KV of the turn (MiB)"; set key top left; set grid
plot "{dat}" index 0 using 1:3 with lines lw 2 title "{a.policy}, budget {a.budget}", "" index 1 using 1:3 with lines lw 2 title "full cache"
set ylabel "turn latency on the client (ms)"
plot "{dat}" index 0 using 1:2 with lines lw 2 title "{a.policy}, budget {a.budget}", "" index 1 using 1:2 with lines lw 2 title "full cache"
unset multiplot
"""
    subprocess.run(["gnuplot"], input=gp.encode(), check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvtrim", default="build/kvtrim")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--words", type=int, default=12)
    ap.add_argument("--answer", type=int, default=16)
    ap.add_argument("--budget", type=int, default=2048)
    ap.add_argument("--policy", default="snapkv")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=0,
                    help="the server's -c: a conversation past it is re-based (docs/server.md)")
    ap.add_argument("--store", action="store_true", help="serve with a directory --context-store")
    ap.add_argument("--heads", type=int, default=0,
                    help="n_layer * n_head_kv of the model (0: the full run's entries / tokens after turn 1)")
    ap.add_argument("--bytes-per-entry", type=int, default=0,
                    help="one entry's bytes, 2 rows + pos + logw (0: the full run's kv_bytes / entries)")
    ap.add_argument("--plot-only", action="store_true", help="redraw DIR/turns.png from DIR/turns.csv")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.plot_only:
        import csv
        rows = [dict(r, turn=int(r["turn"]), wall_ms=float(r["wall_ms"]), kv_bytes_peak_turn=int(r["kv_bytes_peak_turn"]),
                     rss_kib=int(r["rss_kib"])) for r in csv.DictReader(open(os.path.join(a.out, "turns.csv")))]
        return plot(a, rows)
    rows = run(a, "budget", {"kv": a.policy, "kv_budget": a.budget})
    rows += run(a, "full", {"kv": "full"})
    first_full = next(r for r in rows if r["mode"] == "full")
    if a.heads <= 0:
        a.heads = first_full["entries"] // first_full["tokens"]
    if a.bytes_per_entry <= 0:
        a.bytes_per_entry = round(first_full["kv_bytes"] / first_full["entries"])
    with open(os.path.join(a.out, "turns.csv"), "w") as f:
        keys = list(rows[0].keys())
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(str(r[k]) for k in keys) + "\n")
    summary = dict(args=vars(a),
                   budget=summarize([r for r in rows if r["mode"] == "budget"], a.budget, a.heads, a.bytes_per_entry),
                   full=summarize([r for r in rows if r["mode"] == "full"], 0, a.heads, a.bytes_per_entry))
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    plot(a, rows)


if __name__ == "__main__":
    main()
