#!/usr/bin/env python3
"""Conversations under a soak, with the Redis store stopped and restarted.

A real redis-server (appendonly, appendfsync always, in a temporary
directory) and `kvtrim serve --context-store redis://...`; C client threads
each hold a conversation, turn after turn, for M minutes, and start a new
one after T turns (deleting the old one once checked). The Redis server is
stopped (SIGTERM) and restarted on the same port and directory at the given
minutes, staying down for D seconds each time. Each client counts the turns
acknowledged (answered 200) per conversation; a conversation is checked
before it is deleted (GET: its turns must equal those acknowledged, and its
last user message the last one acknowledged). At the end the server is
restarted on the same Redis and every live conversation is checked again
from the store. The server's RSS is read from /proc every 10 s.

Writes DIR/soak.json (counts of answers by status, turns acknowledged and
lost, RSS over time) and DIR/rss.csv.

  python3 bench/conversation_soak.py --kvtrim build/kvtrim --out DIR --minutes 60 --redis-restarts 20,40
"""
import argparse, json, os, random, shutil, socket, statistics, subprocess, sys, tempfile, threading, time

from serve_http import call_status as call, free_port, rss_kib








class Redis:
    def __init__(self, port, d):
        self.port, self.dir, self.p = port, d, None

    def start(self):
        self.p = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                                   "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        sys.exit("redis-server did not start")

    def stop(self):
        self.p.terminate()
        self.p.wait()


def start_server(a, port, redis_port, log):
    cmd = [a.kvtrim, "serve", "-m", a.model, "--port", str(port), "-t", "2", "--parallel", "2",
           "--context-store", f"redis://127.0.0.1:{redis_port}", "--kv", a.policy, "--kv-budget", str(a.budget)]
    p = subprocess.Popen(cmd, stdout=log, stderr=log)
    for _ in range(300):
        if call(port, "GET", "/health", timeout=2)[0] == 200:
            return p
        time.sleep(0.1)
    sys.exit("server did not start")


def client(a, port, k, stop, stats, live, lock):
    rnd = random.Random(k)
    n_conv = 0
    while not stop.is_set():
        cid = f"soak-{k}-{n_conv}"
        n_conv += 1
        acked, last_user = 0, None
        while not stop.is_set() and acked < a.turns:
            user = f"Client {k}, turn {acked + 1}: " + " ".join(rnd.choice(a.words) for _ in range(4))
            st, body = call(port, "POST", "/v1/chat/completions",
                            {"conversation": cid, "messages": [{"role": "user", "content": user}],
                             "max_tokens": 8, "temperature": 0})
            with lock:
                stats[str(st)] = stats.get(str(st), 0) + 1
                if st != 200:
                    msg = body.get("error", {}).get("message", "")[:160]
                    stats.setdefault("errors", {}).setdefault(msg, 0)
                    stats["errors"][msg] += 1
            time.sleep(a.think_s)
            if st == 200:
                acked += 1
                last_user = user
                with lock:
                    live[cid] = (acked, last_user)
            else:
                time.sleep(0.5)
        if acked == 0:
            continue
        if stop.is_set():
            return  # checked at the end, from the store
        check(port, cid, acked, last_user, stats, lock)
        call(port, "DELETE", f"/v1/conversations/{cid}")
        with lock:
            live.pop(cid, None)


def check(port, cid, acked, last_user, stats, lock, tries=120):
    for _ in range(tries):  # the store may be down: GET answers 503 until it is back
        st, body = call(port, "GET", f"/v1/conversations/{cid}")
        if st == 200:
            msgs = [m["content"] for m in body["messages"] if m["role"] == "user"]
            ok = body["turns"] == acked and msgs and msgs[-1] == last_user
            with lock:
                stats["checked"] = stats.get("checked", 0) + 1
                stats["turns_acked_checked"] = stats.get("turns_acked_checked", 0) + acked
                if not ok:
                    stats.setdefault("lost", []).append({"id": cid, "acked": acked, "stored": body["turns"]})
            return
        time.sleep(1)
    with lock:
        stats.setdefault("unreadable", []).append(cid)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvtrim", default="build/kvtrim")
    ap.add_argument("-m", "--model", default="models/needle-v1-3.7M-f32.gguf")
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--turns", type=int, default=15, help="turns per conversation before a new one")
    ap.add_argument("--policy", default="snapkv")
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--redis-restarts", default="20,40", help="minutes at which Redis is stopped and restarted")
    ap.add_argument("--redis-down-s", type=float, default=20)
    ap.add_argument("--think-s", type=float, default=0.25, help="a client's pause after each answer")
    a = ap.parse_args()
    a.words = "river mill stone bridge lantern orchard meadow harbour signal winter candle ledger".split()
    os.makedirs(a.out, exist_ok=True)
    rdir = tempfile.mkdtemp(prefix="kvtrim-soak-redis-")
    redis = Redis(free_port(), rdir)
    redis.start()
    port = free_port()
    log = open(os.path.join(a.out, "server.log"), "w")
    srv = start_server(a, port, redis.port, log)
    stats, live, lock, stop = {}, {}, threading.Lock(), threading.Event()
    threads = [threading.Thread(target=client, args=(a, port, k, stop, stats, live, lock)) for k in range(a.clients)]
    for t in threads:
        t.start()
    t0 = time.time()
    restarts = sorted(float(x) * 60 for x in a.redis_restarts.split(",") if x)
    rss, events = [], []
    while time.time() - t0 < a.minutes * 60:
        el = time.time() - t0
        if restarts and el >= restarts[0]:
            restarts.pop(0)
            redis.stop()
            events.append({"t_s": round(el), "event": "redis stopped"})
            time.sleep(a.redis_down_s)
            redis.start()
            events.append({"t_s": round(time.time() - t0), "event": "redis restarted"})
            continue
        rss.append((round(el), rss_kib(srv.pid)))
        time.sleep(10)
    stop.set()
    for t in threads:
        t.join()
    # Every live conversation from the store, through a fresh server.
    srv.terminate()
    srv.wait()
    srv = start_server(a, port, redis.port, log)
    for cid, (acked, last_user) in sorted(live.items()):
        check(port, cid, acked, last_user, stats, lock)
    srv.terminate()
    srv.wait()
    redis.stop()
    shutil.rmtree(rdir, ignore_errors=True)
    warm = [v for t, v in rss if 300 <= t < 600]
    late = [v for t, v in rss if t >= a.minutes * 60 - 300]
    out = dict(args={k: v for k, v in vars(a).items() if k != "words"}, answers=stats, events=events,
               rss_kib_median_min5_10=statistics.median(warm) if warm else None,
               rss_kib_median_last5=statistics.median(late) if late else None,
               rss_kib_max=max(v for _, v in rss), live_checked_at_end=len(live))
    with open(os.path.join(a.out, "soak.json"), "w") as f:
        json.dump(out, f, indent=2)
    with open(os.path.join(a.out, "rss.csv"), "w") as f:
        f.write("t_s,rss_kib\n" + "".join(f"{t},{v}\n" for t, v in rss))
    print(json.dumps(out, indent=2))
    sys.exit(1 if stats.get("lost") or stats.get("unreadable") else 0)


if __name__ == "__main__":
    main()
