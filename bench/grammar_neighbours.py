#!/usr/bin/env python3
"""Does one client's grammar work slow down everyone else's tokens? (issue 41, hostile report D21.)

One `sluice serve` on the real model. A measured stream (a plain greedy completion, streamed)
runs in rounds; its inter-token latency (ITL: the gap between two streamed token events) is
recorded alone, with two neighbours looping short grammar-constrained requests whose grammar is
always the same (compiled once, then cached), and with the same neighbours sending a fresh
grammar every time — a GBNF `root ::= [^"]{0,N}` with N new each request, or a JSON Schema with
a fresh `maxLength` — so no compiled grammar is ever reused. Fresh over cached isolates the
grammar work; fresh over alone also counts the neighbours' own decoding. Fresh grammars are compiled and analysed on a
low-priority grammar thread before the request reaches the engine (docs/structured-output.md),
so neither the engine step nor the engine's cores should carry that work. The rounds alternate (alone, cached,
fresh, alone, ...) so a change in the machine's load hits all alike.

  python3 bench/grammar_neighbours.py [--sluice build/apps/sluice/sluice]
      [--model models/gemma-3-270m-q4_k_m.gguf] [--rounds 4] [--tokens 96] [--json out.json]

Prints ITL p50/p99 per mode and the p99 ratios (acceptance: fresh within 1.5x of cached).
On a 2-core host the noisy clients' compile work competes for the same cores as the engine's
threads: that CPU contention is the floor of what the ratio can show, not a stall."""
import argparse
import itertools
import json
import pathlib
import statistics
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
import httpx2 as httpx  # noqa: E402
from server_util import Server  # noqa: E402

PROMPT = "The river begins high in the mountains, where snow melts into streams that"


def measured_stream(url, model, tokens):
    """One streamed greedy completion; returns the gaps between its token events (seconds)."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True, "temperature": 0,
            "stream": True}
    stamps = []
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=300) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: {"):
                stamps.append(time.monotonic())
    return [b - a for a, b in zip(stamps[1:], stamps[2:])]   # from the second token: decode only


def noisy_client(url, model, stop, counter, kind, fresh):
    """Requests with a grammar, one after another, until stop is set: a never-seen one each
    time (fresh), or always the same one (compiled once, then taken from the cache)."""
    n = itertools.count()
    with httpx.Client(timeout=120) as c:
        while not stop.is_set():
            # Sizes under the compiler's limits (a schema's maxLength <= 10,000 and 200,000
            # positions), cycling through more values than the grammar cache holds (64).
            i = next(n) if fresh else 0
            if kind == 0:
                extra = {"grammar": f'root ::= "\\"" [^"]{{0,{1000 + i % 3000}}} "\\""'}
            else:
                extra = {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "strict": True, "schema": {
                    "type": "object", "properties": {"a": {"type": "string", "maxLength": 100 + i % 1500}}, "required": ["a"]}}}}
            body = {"model": model, "prompt": "A quote:", "max_tokens": 4, **extra}
            r = c.post(url + "/v1/completions", json=body)
            if r.status_code != 200 and not counter:
                print("noisy request:", r.status_code, r.text[:300], file=sys.stderr)
            counter.append(r.status_code)


def round_with(url, model, tokens, noisy):
    """noisy: None (alone), "cached" or "fresh" neighbours."""
    stop, codes, threads = threading.Event(), [], []
    if noisy:
        threads = [threading.Thread(target=noisy_client, args=(url, model, stop, codes, k, noisy == "fresh"))
                   for k in (0, 1)]
        for t in threads:
            t.start()
        time.sleep(0.5)   # the neighbours are busy before the measured stream starts
    try:
        gaps = measured_stream(url, model, tokens)
    finally:
        stop.set()
        for t in threads:
            t.join()
    return gaps, codes


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(ROOT / "build/apps/sluice/sluice"))
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--json")
    a = ap.parse_args()
    s = Server(pathlib.Path(a.sluice), pathlib.Path(a.model), "-c", 1024, "--parallel", 4, "-t", 2)
    try:
        model = httpx.get(s.url + "/v1/models").json()["data"][0]["id"]
        measured_stream(s.url, model, 8)   # warm
        gaps = {"alone": [], "cached": [], "fresh": []}
        codes = {"cached": [], "fresh": []}
        for _ in range(a.rounds):
            for mode in gaps:
                g, c = round_with(s.url, model, a.tokens, None if mode == "alone" else mode)
                gaps[mode] += g
                if c:
                    codes[mode] += c
    finally:
        s.stop()
    out = {mode: {"p50_ms": 1e3 * statistics.median(g), "p99_ms": 1e3 * pct(g, 0.99)} for mode, g in gaps.items()}
    for mode, c in codes.items():
        out[mode].update(requests=len(c), statuses=sorted(set(c)))
    out["p99_fresh_over_cached"] = out["fresh"]["p99_ms"] / out["cached"]["p99_ms"]
    out["p99_fresh_over_alone"] = out["fresh"]["p99_ms"] / out["alone"]["p99_ms"]
    for mode in gaps:
        extra = f", neighbours' requests {out[mode]['requests']} {out[mode]['statuses']}" if mode in codes else ""
        print(f"ITL {mode:>6}: p50 {out[mode]['p50_ms']:6.1f} ms, p99 {out[mode]['p99_ms']:6.1f} ms{extra}")
    print(f"p99 fresh / cached grammars {out['p99_fresh_over_cached']:.2f} (acceptance: <= 1.5); "
          f"fresh / alone {out['p99_fresh_over_alone']:.2f}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
