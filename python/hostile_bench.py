"""Benchmark (not a test): does `sluice serve` stay responsive under hostile clients while it
serves a normal load? Starts the server on loopback, runs 4 streaming clients for the whole
run, and measures /health latency (a fresh connection per probe, as a load balancer does),
the server's RssAnon growth and the normal load's failures in five windows:

  baseline          the normal load alone
  idle-1000         1,000 connections open that send nothing
  slowloris-200     200 connections trickling one header line a second
  upload-100MB      one unauthenticated client uploading 100 MB (Content-Length), again and again
  chunked-100MB     the same as a chunked body with the API key (the server reads the body up
                    to --max-body, 8 MiB, then answers 413)

The server runs with --keep-alive and --timeout longer than a window, so the idle and
trickling connections really stay open throughout (with the defaults they would be closed
after 5 s and 30 s). Only loopback.

  python python/hostile_bench.py [--sluice build/apps/sluice/sluice] [--model models/gemma-3-270m-q4_k_m.gguf]
      [--window 10] [--json out.json]
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

KEY = "bench-key"


def rss_anon_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"RssAnon:\s+(\d+) kB", f.read()).group(1))


def start_server(args):
    log = open(f"/tmp/hostile-bench-{os.getpid()}.log", "w+")
    cmd = [args.sluice, "serve", "-m", args.model, "--port", "0", "-P", "4", "--max-queue", "8",
           "--api-key", KEY, "--alias", "bench",
           "--keep-alive", str(args.window * 6), "--timeout", str(args.window * 6), "-c", "1024"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        log.seek(0)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read())
        if m:
            return proc, int(m.group(1)), log
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    log.seek(0)
    sys.exit("sluice serve did not start:\n" + log.read())


class NormalLoad:
    """4 clients streaming completions back to back; counts finished and failed requests."""

    def __init__(self, port, streams=4, max_tokens=32):
        self.port, self.max_tokens = port, max_tokens
        self.ok = self.failed = 0
        self.errors = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.loop, args=(i,)) for i in range(streams)]

    def one(self, i):
        body = json.dumps({"model": "bench", "prompt": f"Stream {i}: the river", "max_tokens": self.max_tokens,
                           "stream": True, "ignore_eos": True, "temperature": 0})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
            c.request("POST", "/v1/completions", body, headers)
            r = c.getresponse()
            data = r.read()
            if r.status != 200 or not data.endswith(b"data: [DONE]\n\n"):
                raise RuntimeError(f"status {r.status}: {data[-200:]!r}")
        finally:
            c.close()

    def loop(self, i):
        n = 0
        while not self.stop.is_set():
            try:
                self.one(i * 100000 + n)
                with self.lock:
                    self.ok += 1
            except Exception as e:   # noqa: BLE001 - every failure counts, whatever it is
                with self.lock:
                    self.failed += 1
                    if len(self.errors) < 20:
                        self.errors.append(repr(e))
            n += 1

    def counts(self):
        with self.lock:
            return self.ok, self.failed


def health_latencies(port, seconds, interval=0.05):
    """GET /health on a new connection every `interval`; latencies in ms (a failure counts as 10 s)."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/health")
            r = c.getresponse()
            ok = r.status == 200 and r.read() == b'{"status":"ok"}'
            c.close()
        except OSError:
            ok = False
        out.append((time.perf_counter() - t0) * 1000 if ok else 10000.0)
        time.sleep(interval)
    return out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def in_background(step, period=0.0):
    """Calls step(stop) in a thread every `period` seconds until the returned function is called;
    that call sets `stop` (a threading.Event step may watch) and joins the thread."""
    stop = threading.Event()

    def run():
        while not stop.wait(period):
            step(stop)
    t = threading.Thread(target=run)
    t.start()

    def halt():
        stop.set()
        t.join()
    return halt


# ---- hostile clients: each returns a stop function ------------------------------------------

def idle(port, n=1000):
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    return lambda: [s.close() for s in socks]


def slowloris(port, n=200):
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    for s in socks:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")

    def trickle(_stop):
        for s in socks:
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                pass
    halt = in_background(trickle, 1.0)

    def done():
        halt()
        for s in socks:
            s.close()
    return done


def upload(port, chunked, total=100 << 20):
    """Content-Length: unauthenticated (413 from the headers). Chunked: with the key, so the
    server reads the body up to --max-body before its 413."""
    stats = {"uploads": 0, "bytes": 0, "statuses": {}}
    block = b"x" * (1 << 16)

    def one(stop):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            framing = f"Content-Length: {total}"
            if chunked:
                framing = f"Authorization: Bearer {KEY}\r\nTransfer-Encoding: chunked"
            s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n".encode())
            piece = (b"10000\r\n" + block + b"\r\n") if chunked else block
            sent = 0
            while sent < total and not stop.is_set():
                try:
                    s.sendall(piece)
                except OSError:
                    break
                sent += len(block)
                stats["bytes"] += len(block)
            try:
                head = s.recv(4096).split(b" ")
                status = int(head[1]) if len(head) > 1 else 0
            except (OSError, ValueError):
                status = 0
            stats["statuses"][status] = stats["statuses"].get(status, 0) + 1
            stats["uploads"] += 1
        finally:
            s.close()

    def loop(stop):
        try:
            one(stop)
        except OSError:
            pass
    halt = in_background(loop)

    def done():
        halt()
        return stats
    return done


def window(name, port, pid, load, seconds, start=None):
    ok0, failed0 = load.counts()
    rss0 = rss_anon_kib(pid)
    peak = [rss0]

    def sample(_stop):
        peak[0] = max(peak[0], rss_anon_kib(pid))
    halt_sampler = in_background(sample, 0.05)
    finish = start(port) if start else None
    lat = health_latencies(port, seconds)
    extra = finish() if finish else None
    halt_sampler()
    ok1, failed1 = load.counts()
    r = {"window": name, "health_p50_ms": round(pct(lat, 50), 2), "health_p99_ms": round(pct(lat, 99), 2),
         "health_max_ms": round(max(lat), 2), "probes": len(lat),
         "rss_anon_growth_mib": round((peak[0] - rss0) / 1024, 1),
         "normal_ok": ok1 - ok0, "normal_failed": failed1 - failed0}
    if isinstance(extra, dict):
        r["upload"] = {"uploads": extra["uploads"], "mib_sent": round(extra["bytes"] / 2**20),
                       "statuses": {str(k): v for k, v in extra["statuses"].items()}}
    print(f"{name:15s} /health p50 {r['health_p50_ms']:7.2f} ms  p99 {r['health_p99_ms']:7.2f} ms  "
          f"max {r['health_max_ms']:8.2f} ms  RssAnon +{r['rss_anon_growth_mib']:5.1f} MiB  "
          f"normal ok {r['normal_ok']:3d} failed {r['normal_failed']}" + (f"  {r['upload']}" if "upload" in r else ""),
          flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default="build/apps/sluice/sluice")
    ap.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--window", type=int, default=10, help="seconds per window")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    proc, port, log = start_server(args)
    load = NormalLoad(port)
    results = []
    try:
        for t in load.threads:
            t.start()
        time.sleep(2)   # warm-up: the streams are running, the allocator has its working set
        results.append(window("baseline", port, proc.pid, load, args.window))
        results.append(window("idle-1000", port, proc.pid, load, args.window, idle))
        results.append(window("slowloris-200", port, proc.pid, load, args.window, slowloris))
        results.append(window("upload-100MB", port, proc.pid, load, args.window, lambda p: upload(p, False)))
        results.append(window("chunked-100MB", port, proc.pid, load, args.window, lambda p: upload(p, True)))
    finally:
        load.stop.set()
        for t in load.threads:
            t.join()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "killed"
        log.close()
        os.unlink(log.name)
    print(f"server exit: {rc}; normal load errors: {load.errors[:5]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "server_exit": rc, "errors": load.errors[:20]}, f, indent=1)


if __name__ == "__main__":
    main()
