"""What scraping /metrics every 50 ms (the inference gateway's endpoint picker default) costs a
replica under an 8-stream load (docs/deploy.md "Measured"). Two measurements on one server:

  A/B: rounds of 8 concurrent streaming completions, alternately without and with a scraper
       thread polling /metrics every 50 ms; aggregate generated tokens/s per round, medians.
  CPU: the server's own CPU time (utime + stime from /proc) for 2000 back-to-back scrapes on
       an idle server, divided by 2000: the cost of one scrape, then x 20 scrapes/s as a share
       of the cores the engine runs on. Unlike the A/B rounds this does not drown in the noise
       of a shared machine.

  python bench/metrics_scrape_cost.py --model models/gemma-3-270m-q4_k_m.gguf --rounds 3
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
from server_util import Server  # noqa: E402


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream(url, body, counts):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    n = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if line.startswith(b"data: {"):
                n += 1
    counts.append(n)


def round_tps(url, model, streams, tokens, scrape):
    stop, scrapes = threading.Event(), [0]

    def scraper():
        while not stop.is_set():
            urllib.request.urlopen(url + "/metrics", timeout=10).read()
            scrapes[0] += 1
            stop.wait(0.05)
    counts = []
    body = {"model": model, "prompt": "The river begins high in the mountains, where", "max_tokens": tokens,
            "ignore_eos": True, "stream": True, "temperature": 0}
    sc = threading.Thread(target=scraper) if scrape else None
    if sc:
        sc.start()
    t0 = time.monotonic()
    th = [threading.Thread(target=stream, args=(url, body, counts)) for _ in range(streams)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    stop.set()
    if sc:
        sc.join()
    return sum(counts) / wall, scrapes[0] / wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--binary", default=str(ROOT / "build/apps/sluice/sluice"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--streams", type=int, default=8)
    a = ap.parse_args()
    s = Server(a.binary, a.model, "-c", 1024, "--parallel", a.streams)
    try:
        model = json.load(urllib.request.urlopen(s.url + "/v1/models"))["data"][0]["id"]
        round_tps(s.url, model, a.streams, 16, False)  # warm
        off, on, rate = [], [], []
        for _ in range(a.rounds):
            off.append(round_tps(s.url, model, a.streams, a.tokens, False)[0])
            tps, r = round_tps(s.url, model, a.streams, a.tokens, True)
            on.append(tps)
            rate.append(r)
        c0 = cpu_seconds(s.proc.pid)
        t0 = time.monotonic()
        for _ in range(2000):
            urllib.request.urlopen(s.url + "/metrics", timeout=10).read()
        per_scrape = (cpu_seconds(s.proc.pid) - c0) / 2000
        latency = (time.monotonic() - t0) / 2000
        size = len(urllib.request.urlopen(s.url + "/metrics").read())
    finally:
        s.stop()
    med_off, med_on = statistics.median(off), statistics.median(on)
    print(f"A/B {a.streams} streams x {a.tokens} tokens, {a.rounds} rounds each: "
          f"without scraping {med_off:.1f} tok/s {[round(x, 1) for x in off]}, "
          f"with /metrics every 50 ms ({statistics.median(rate):.1f} scrapes/s) {med_on:.1f} tok/s "
          f"{[round(x, 1) for x in on]}: {100 * (med_on / med_off - 1):+.2f}%")
    print(f"CPU: {per_scrape * 1e6:.0f} us of server CPU per scrape ({size} bytes, {latency * 1e3:.2f} ms round trip); "
          f"20 scrapes/s = {per_scrape * 20 * 100:.3f}% of one core")


if __name__ == "__main__":
    main()
