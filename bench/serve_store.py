#!/usr/bin/env python3
"""Issue 32's figures for `kvtrim serve --context-store` (docs/server.md).

1. Time to first token for N questions on a T-token context with the store
   on disk, against re-prefilling the context with every question, before
   and after a server restart (the first question after it loads the file).
2. Two replicas over one Redis: a context created on one, N questions on the
   other, the same answers as on the first.

Time to first token is a completion's wall time with max_tokens 1 (fork or
load, prefill of the question, the first token sampled), measured here on
the client over loopback. The clock of these machines may tick in 20 ms
steps: every figure is a sum or mean over many of them.

  python3 bench/serve_store.py --kvtrim build/kvtrim -m MODEL --out DIR
"""
import argparse, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

from serve_http import call, free_port, wait_healthy






def start_server(a, port, store, log):
    cmd = [a.kvtrim, "serve", "-m", a.model, "--port", str(port), "-t", str(a.threads), "--context-store", store]
    return wait_healthy(subprocess.Popen(cmd, stderr=log, stdout=log), port, cmd)


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)


def context_text(a):
    text = open(a.haystack, encoding="utf-8", errors="replace").read()
    n = a.tokens * 4
    for _ in range(8):  # cut to just under T tokens (BOS included) with the model's own tokenizer
        ids = subprocess.run([a.kvtrim, "tokenize", "-m", a.model, "-f", "/dev/stdin", "--ids"], input=text[:n],
                             capture_output=True, text=True, check=True).stdout.split()
        if a.tokens - 40 <= len(ids) <= a.tokens:
            return text[:n], len(ids)
        n = int(n * (a.tokens - 20) / len(ids))
    return text[:n], len(ids)


def question(i):
    return f"\n\nQuestion {i + 1}: what does the text above say about the voyage?\nAnswer:"


def ttft_stored(a, port, cid):
    rows = []
    for i in range(a.questions):
        r, ms = call(port, "POST", "/v1/completions",
                     {"context_id": cid, "prompt": question(i), "max_tokens": 1, "temperature": 0, "return_tokens": True})
        rows.append({"ms": ms, "server_prefill_ms": r["kvtrim"]["prefill_ms"], "token": r["choices"][0]["tokens"]})
    return rows


def ttft_reprefill(a, port, text):
    rows = []
    for i in range(a.questions):
        r, ms = call(port, "POST", "/v1/completions",
                     {"prompt": text + question(i), "max_tokens": 1, "temperature": 0, "return_tokens": True,
                      "kv": a.kv, "kv_ratio": a.ratio})
        rows.append({"ms": ms, "server_prefill_ms": r["kvtrim"]["prefill_ms"], "token": r["choices"][0]["tokens"]})
    return rows


def summary(rows):
    ms = [r["ms"] for r in rows]
    return {"n": len(ms), "first_ms": ms[0], "mean_ms": statistics.mean(ms), "median_ms": statistics.median(ms),
            "total_ms": sum(ms)}


def disk_phase(a, text, log):
    store = tempfile.mkdtemp(prefix="kvtrim-ttft-")
    port = free_port()
    out = {}
    srv = start_server(a, port, store, log)
    ctx, ms = call(port, "POST", "/v1/contexts", {"text": text, "kv": a.kv, "kv_ratio": a.ratio})
    out["context"] = {k: ctx[k] for k in ("id", "tokens", "kv_bytes", "kv_bytes_full", "prefill_ms", "compress_ms")}
    out["context"]["create_ms"] = ms
    out["context"]["file_bytes"] = os.path.getsize(os.path.join(store, ctx["id"] + ".kvc"))
    out["stored_before_restart"] = ttft_stored(a, port, ctx["id"])
    out["reprefill"] = ttft_reprefill(a, port, text)
    stop(srv)
    t0 = time.perf_counter()
    srv = start_server(a, port, store, log)
    out["restart_to_health_ms"] = (time.perf_counter() - t0) * 1000
    out["stored_after_restart"] = ttft_stored(a, port, ctx["id"])
    stop(srv)
    shutil.rmtree(store)
    same = [r["token"] for r in out["stored_before_restart"]] == [r["token"] for r in out["stored_after_restart"]]
    out["same_first_tokens_after_restart"] = same
    return out


def replica_phase(a, text, log):
    rport = free_port()
    redis = subprocess.Popen([a.redis_server, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], stdout=log, stderr=log)
    time.sleep(0.5)
    url = f"redis://127.0.0.1:{rport}"
    pa, pb = free_port(), free_port()
    sa, sb = start_server(a, pa, url, log), start_server(a, pb, url, log)
    ctx, _ = call(pa, "POST", "/v1/contexts", {"text": text, "kv": a.kv, "kv_ratio": a.ratio})
    answers = {}
    times = {}
    for name, port in (("replica_b", pb), ("replica_a", pa)):
        answers[name], times[name] = [], []
        for i in range(a.questions):
            r, ms = call(port, "POST", "/v1/completions", {"context_id": ctx["id"], "prompt": question(i),
                                                           "max_tokens": 8, "temperature": 0, "return_tokens": True})
            answers[name].append(r["choices"][0]["tokens"])
            times[name].append(ms)
    stop(sa), stop(sb)
    redis.terminate(), redis.wait()
    return {"redis": url, "context": ctx["id"], "context_tokens": ctx["tokens"], "questions": a.questions,
            "same_answers": answers["replica_a"] == answers["replica_b"],
            "first_question_ms_on_b": times["replica_b"][0], "mean_question_ms_on_b": statistics.mean(times["replica_b"]),
            "mean_question_ms_on_a": statistics.mean(times["replica_a"]), "answers_b": answers["replica_b"]}


def markdown(rep):
    d = rep["disk"]
    s = [f"Context: {d['context']['tokens']} tokens, {rep['kv']} {rep['ratio']}, "
         f"file {d['context']['file_bytes'] / 1048576:.2f} MiB, created in {d['context']['create_ms']:.0f} ms "
         f"(prefill {d['context']['prefill_ms']:.0f}, compress {d['context']['compress_ms']:.0f}). "
         f"Time to first token (max_tokens 1, client wall time over loopback), {rep['questions']} questions:", "",
         "| | first ms | mean ms | median ms | total ms |", "|---|---|---|---|---|"]
    for k, label in (("stored_before_restart", "stored context (store on disk)"),
                     ("stored_after_restart", "stored context after a restart (first loads the file)"),
                     ("reprefill", "re-prefill context + question")):
        x = summary(d[k])
        s.append(f"| {label} | {x['first_ms']:.0f} | {x['mean_ms']:.0f} | {x['median_ms']:.0f} | {x['total_ms']:.0f} |")
    b, r = summary(d["stored_before_restart"]), summary(d["reprefill"])
    s += ["", f"Re-prefill / stored (mean): {r['mean_ms'] / b['mean_ms']:.1f}x. Restart to healthy: "
          f"{d['restart_to_health_ms']:.0f} ms. Same first tokens after the restart: {d['same_first_tokens_after_restart']}."]
    if "replicas" in rep:
        p = rep["replicas"]
        s += ["", f"Replicas over one Redis ({p['redis']}): context {p['context']} ({p['context_tokens']} tokens) made on A, "
              f"{p['questions']} greedy questions (8 tokens) on B and on A: same answers: {p['same_answers']}; "
              f"first question on B (loads from Redis) {p['first_question_ms_on_b']:.0f} ms, mean on B "
              f"{p['mean_question_ms_on_b']:.0f} ms, mean on A {p['mean_question_ms_on_a']:.0f} ms."]
    return "\n".join(s) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvtrim", default="build/kvtrim")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--haystack", default="../shared/data/frankenstein.txt")
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--kv", default="snapkv")
    ap.add_argument("--ratio", type=float, default=0.25)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "servers.log"), "w")
    text, n = context_text(a)
    rep = {"command": " ".join(sys.argv), "model": a.model, "kv": a.kv, "ratio": a.ratio, "questions": a.questions,
           "text_tokens": n, "threads": a.threads}
    rep["disk"] = disk_phase(a, text, log)
    if a.redis_server:
        rep["replicas"] = replica_phase(a, text, log)
    json.dump(rep, open(os.path.join(a.out, "serve-store.json"), "w"), indent=1)
    open(os.path.join(a.out, "serve-store.md"), "w").write(markdown(rep))
    print(markdown(rep))


if __name__ == "__main__":
    main()
