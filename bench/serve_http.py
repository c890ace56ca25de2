"""What the server benchmarks share (serve_store.py, conversation_turns.py,
conversation_soak.py): a free loopback port, a JSON call to `kvtrim serve`,
and a process's resident memory."""
import json, socket, sys, time, urllib.error, urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def call(port, method, path, body=None, timeout=900):
    """The JSON answer and the call's wall time in ms; raises on an HTTP error."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.loads(r.read())
    return out, (time.perf_counter() - t0) * 1000


def call_status(port, method, path, body=None, timeout=120):
    """(HTTP status, JSON answer); status 0 when the connection failed. Never raises."""
    try:
        out, _ = call(port, method, path, body, timeout)
        return 200, out
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except Exception:
            return e.code, {}
    except Exception as e:  # refused or reset
        return 0, {"error": {"message": str(e)}}


def rss_kib(pid):
    """VmRSS of a process in KiB (-1 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def wait_healthy(p, port, cmd):
    """Returns the server process `p` once GET /health answers (60 s at most);
    exits naming the command otherwise."""
    for _ in range(600):
        try:
            call(port, "GET", "/health", timeout=2)
            return p
        except Exception:
            time.sleep(0.1)
    p.kill()
    sys.exit("kvtrim serve did not start: " + " ".join(cmd))
