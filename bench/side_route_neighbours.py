#!/usr/bin/env python3
"""Does a crowd of large /tokenize calls delay a normal chat? (issue 41: "40 large `/tokenize`
calls in flight → 429s, and a normal chat answered within one decode step of its turn".)

One `sluice serve` per binary given, on the real Gemma 3 270M. In each round a short streamed
chat (greedy, `ignore_eos`) is measured: its time to first token (TTFT, from the request's last
byte sent to the first token event) and the gaps between its token events (ITL). Modes:

  alone   the chat by itself;
  tok8m   40 clients each POST an 8 MiB /tokenize body at once, the chat 20 ms later, while
          their uploads are in flight (an 8 MiB text is over the token cap: the server's work
          is the upload, the JSON parse and a 400 — or a 429 if refused);
  pieces  40 clients each POST a /tokenize with pieces that fits the cap (about a context of
          tokens: real tokenizing and a large reply), the chat 20 ms later;
  tok8m-n19, pieces-n19  the same with the neighbours' threads at nice 19: on loopback the
          kernel's TCP work for 320 MB is done mostly in the senders' system calls, on the same
          two cores as the server; at nice 19 the cores go to the server first, as they would
          with the clients on other machines.

The rounds alternate (alone, tok8m, pieces, per binary) so the shared host's load hits all
alike. Prints per binary and mode the chat's TTFT, its whole time (to its last token) and ITL
p50/p99/max, the neighbours' statuses, and the CPU seconds of a round: the server's by thread
name, and this client's (sending 320 MB on the same 2 cores is not free either). The figures of
merit are the TTFT and whole-chat excess over alone in decode steps (the alone ITL p50). Records `uptime` and `lscpu`'s model name with the figures.

  python3 bench/side_route_neighbours.py [--sluice build/apps/sluice/sluice ...]
      [--model models/gemma-3-270m-q4_k_m.gguf] [--rounds 5] [--clients 40] [--json out.json]"""
import argparse
import json
import os
import pathlib
import socket
import statistics
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
from image_neighbours import host, pct  # noqa: E402  (bench/: this script's folder)
from server_util import Server  # noqa: E402

MIB8 = 8 << 20
CHAT = "Name three rivers of Europe and say one thing about each."
MODES = ("alone", "tok8m", "pieces")   # and tok8m-n19, pieces-n19 (below)


def request_bytes(path, body):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def read_status(sock):
    """The status code of the reply on sock (reads to the end of the headers), or 0 when the
    connection ended first."""
    data = b""
    while b"\r\n" not in data:
        try:
            got = sock.recv(4096)
        except OSError:
            return 0
        if not got:
            return 0
        data += got
    return int(data.split(b" ", 2)[1])


class Neighbour(threading.Thread):
    """One client: connects first, then at `go` sends its whole request (headers and body in
    one sendall: a server that answers early may stop reading, then the send fails) and reads
    the status. `status` 0: no answer."""

    def __init__(self, port, payload, go, nice=0):
        super().__init__()
        self.port, self.payload, self.go, self.nice = port, payload, go, nice
        self.status, self.done_s = 0, None

    def run(self):
        if self.nice:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        with socket.create_connection(("127.0.0.1", self.port), timeout=300) as s:
            self.go.wait()
            t0 = time.monotonic()
            try:
                s.sendall(self.payload)
            except OSError:
                pass   # refused before the body was read: the answer may still be there
            self.status = read_status(s)
            self.done_s = time.monotonic() - t0


def chat_stream(port, model, max_tokens):
    """One streamed chat over a plain socket: (TTFT s, total s, [gaps s]); total is to the last
    token."""
    body = json.dumps({"model": model, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True, "messages": [{"role": "user", "content": CHAT}]}).encode()
    stamps, tail = [], b""
    with socket.create_connection(("127.0.0.1", port), timeout=300) as s:
        s.sendall(request_bytes("/v1/chat/completions", body))
        t0 = time.monotonic()
        while True:
            data = s.recv(65536)
            if not data:
                break
            now, buf = time.monotonic(), tail + data
            # A content delta (the first chunk, the role's, carries no token).
            stamps += [now] * (buf.count(b'"content":"') - buf.count(b'"content":"","role"'))
            if b"data: [DONE]" in buf:
                break
            tail = buf[-16:]
    if not stamps:
        raise RuntimeError("the chat produced no token")
    return stamps[0] - t0, stamps[-1] - t0, [b - a for a, b in zip(stamps, stamps[1:])]


def cpu_by_thread(pid):
    """utime + stime (seconds) per thread name (sluice-engine, sluice-pool, sluice-io, sluice-http,
    sluice-side; "exe" is the main thread, an I/O thread too, named by the re-exec through
    /proc/self/exe), summed over its threads."""
    out = {}
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue   # the thread ended
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 1:].split()
        out[name] = out.get(name, 0.0) + (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    return out


def cpu_delta(before, after):
    return {k: round(v - before.get(k, 0.0), 2) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def one_round(server, model, payload, clients, max_tokens, nice=0):
    go = threading.Event()
    ns = [Neighbour(server.port, payload, go, nice) for _ in range(clients if payload else 0)]
    for n in ns:
        n.start()
    time.sleep(0.2 if ns else 0)   # every neighbour connected
    c0, me0 = cpu_by_thread(server.proc.pid), os.times()
    go.set()
    time.sleep(0.02 if ns else 0)
    ttft, total, gaps = chat_stream(server.port, model, max_tokens)
    for n in ns:
        n.join()
    me1, cpu = os.times(), cpu_delta(c0, cpu_by_thread(server.proc.pid))
    return {"ttft": ttft, "total": total, "gaps": gaps, "statuses": [n.status for n in ns],
            "neighbours_s": max((n.done_s for n in ns), default=0.0), "cpu_s": sum(cpu.values()),
            "cpu_by_thread": cpu, "client_cpu_s": (me1.user - me0.user) + (me1.system - me0.system)}


def payloads(model, ctx):
    digits = "".join(str(i % 10) for i in range(MIB8 - 64))
    big = json.dumps({"content": digits}).encode()
    # Pieces within the cap: English words, about 1.3 bytes... a word is about one token here.
    words = ("river mountain stream valley water stone forest meadow " * ctx)[: 5 * ctx]
    fits = json.dumps({"content": words, "with_pieces": True}).encode()
    return {"tok8m": request_bytes("/tokenize", big), "pieces": request_bytes("/tokenize", fits)}


def summarise(rounds, step_ms):
    ttft = [r["ttft"] * 1e3 for r in rounds]
    total = [r["total"] * 1e3 for r in rounds]
    gaps = [g * 1e3 for r in rounds for g in r["gaps"]]
    codes = {}
    for r in rounds:
        for c in r["statuses"]:
            codes[c] = codes.get(c, 0) + 1
    out = {"ttft_ms": [round(t, 1) for t in ttft], "ttft_p50_ms": statistics.median(ttft),
           "total_ms": [round(t, 1) for t in total], "total_p50_ms": statistics.median(total),
           "itl_p50_ms": statistics.median(gaps), "itl_p99_ms": pct(gaps, 0.99), "itl_max_ms": max(gaps), "statuses": codes,
           "neighbours_done_s": statistics.median(r["neighbours_s"] for r in rounds),
           "server_cpu_s": statistics.median(r["cpu_s"] for r in rounds),
           "client_cpu_s": statistics.median(r["client_cpu_s"] for r in rounds),
           "server_cpu_by_thread": {k: statistics.median(r["cpu_by_thread"].get(k, 0.0) for r in rounds)
                                    for k in sorted({k for r in rounds for k in r["cpu_by_thread"]})}}
    if step_ms:
        out["step_ms"] = step_ms
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", action="append", help="binary (repeat to compare; default build/apps/sluice/sluice)")
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=40)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=24, help="the chat's max_tokens")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json")
    a = ap.parse_args()
    bins = [pathlib.Path(b) for b in (a.sluice or [ROOT / "build/apps/sluice/sluice"])]
    modes = a.modes.split(",")
    out = {"host_before": host(), "model": a.model, "clients": a.clients, "ctx": a.ctx, "threads": a.threads,
           "binaries": {}}
    servers = [Server(b, a.model, "-c", a.ctx, "--parallel", 4, "-t", a.threads) for b in bins]
    try:
        names = [json.loads(s.get("/v1/models"))["data"][0]["id"] for s in servers]
        loads = payloads(names[0], a.ctx)
        for s, name in zip(servers, names):   # warm: a chat, and one of each neighbour request
            chat_stream(s.port, name, 4)
            for p in loads.values():
                one_round(s, name, p, 1, 2)
        rounds = {str(b): {m: [] for m in modes} for b in bins}
        for _ in range(a.rounds):
            for b, s, name in zip(bins, servers, names):
                for m in modes:
                    r = one_round(s, name, loads.get(m.removesuffix("-n19")), a.clients, a.tokens,
                                  19 if m.endswith("-n19") else 0)
                    rounds[str(b)][m].append(r)
                    time.sleep(0.3)
    finally:
        for s in servers:
            s.stop()
    out["host_after"] = host()
    for b in bins:
        per = rounds[str(b)]
        step = statistics.median(g * 1e3 for r in per["alone"] for g in r["gaps"]) if "alone" in per else None
        res = {m: summarise(per[m], step if m == "alone" else None) for m in modes}
        for m in modes:
            if m != "alone" and "alone" in res:
                for k in ("ttft", "total"):
                    base = res["alone"][f"{k}_p50_ms"]
                    res[m][f"{k}_excess_steps"] = (res[m][f"{k}_p50_ms"] - base) / step
                    res[m][f"{k}_worst_excess_steps"] = (max(res[m][f"{k}_ms"]) - base) / step
        out["binaries"][str(b)] = res
        print(f"{b}:")
        for m in modes:
            r = res[m]
            extra = ""
            if "ttft_excess_steps" in r:
                extra = (f"\n          excess over alone in steps: TTFT {r['ttft_excess_steps']:+.1f} (worst "
                         f"{r['ttft_worst_excess_steps']:+.1f}), whole chat {r['total_excess_steps']:+.1f} (worst "
                         f"{r['total_worst_excess_steps']:+.1f}); neighbours {r['statuses']} done in "
                         f"{r['neighbours_done_s']:.2f} s")
            step = f" (a step: {r['step_ms']:.1f} ms)" if "step_ms" in r else ""
            print(f"  {m:>6}: TTFT p50 {r['ttft_p50_ms']:6.1f} ms, whole chat p50 {r['total_p50_ms']:6.1f} ms, ITL p50 "
                  f"{r['itl_p50_ms']:5.1f} p99 {r['itl_p99_ms']:6.1f} max {r['itl_max_ms']:6.1f} ms{step}, server CPU "
                  f"{r['server_cpu_s']:.2f} s/round{extra}")
            threads = ", ".join(f"{k} {v:.2f}" for k, v in r["server_cpu_by_thread"].items() if v >= 0.01)
            print(f"          CPU s/round by thread: {threads}; this client {r['client_cpu_s']:.2f}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1))
    print(f"host: {out['host_before']['cpu']}; before: {out['host_before']['uptime']}; "
          f"after: {out['host_after']['uptime']}")


if __name__ == "__main__":
    main()
