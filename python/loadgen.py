"""Load generator for `sluice serve`: N concurrent streaming clients on loopback, a bounded
number of requests (OpenAI streaming API: plain HTTP by default, the openai SDK with --sdk).

Reports two aggregate throughputs per round: tok/s = generated tokens / wall time (prompt
processing and connection set-up included), and decode tok/s = the tokens after each
request's first / the time during which at least one request was decoding (the union of the
[first text, end of stream] intervals: prefill-only stretches between waves are left out).
Also time to first token and inter-token latency percentiles. --sweep 1,4,8 runs one round
per concurrency — the acceptance measurement "aggregate decode tokens/s with 1, 4 and 8
streams"; --repeat R runs the sweep R times interleaved (1,4,8,1,4,8,...), so that a bus
that speeds up or slows down between rounds (shared machines) moves every level alike, and
reports medians.

  python python/loadgen.py --url http://127.0.0.1:8080/v1 --model NAME -c 8 -n 32 --max-tokens 128
  python python/loadgen.py --url ... --sweep 1,4,8 --repeat 3 --json out.json

--probe CMD runs CMD before every round (e.g. `build/apps/sluice/sluice bench --machine -t 2
--json`) and after it, and records the bus bandwidth and core-to-core round trip: our VMs move
their two cores between a close placement (~50-90 ns, ~35 GB/s) and a far one (~300 ns,
50-64 GB/s), which changes a single stream's speed far more than a batched step's
(docs/performance.md §4), so every speed-up is printed with the placements it was measured in.
--placement close (or far) measures a round again until both its probes agree on that placement.

Only loopback addresses are accepted: this tool is for local measurement.

The client shares the machine with the server, and on a 2-core machine every millisecond it
spends parsing is taken from the engine's two compute threads (a preempted thread stalls the
whole step at its next barrier). By default the streams are therefore read with http.client
and one json.loads per event: a --sweep 1,4,8 of 16 × 128 tokens cost the client 1.3 s of CPU
this way and 4.5 s through the openai SDK (--sdk: the same requests and measurements with the
SDK's objects; the aggregate at 8 streams moved by less than the run-to-run noise).
"""
import argparse
import http.client
import json
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


CLOSE_NS = 220   # the fastest core round trip below this: the cores share a cache (apps/sluice/bench_probe.h)


def probe_machine(cmd):
    """Runs the --probe command; returns its bus bandwidth (GB/s) and core round trip (ns)."""
    try:
        out = subprocess.run(shlex.split(cmd), check=True, capture_output=True, text=True, timeout=120).stdout
        j = json.loads(out)
        return {"bandwidth_gbs": j["bandwidth_gbs"], "core_round_trip_ns": j["core_round_trip_ns"]}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        sys.exit(f"--probe {cmd!r} failed: {e}")


def placement(r):
    """close / far when the probes before and after the round agree, else mixed (it moved)."""
    ps = [p for p in (r.get("probe"), r.get("probe_after")) if p]
    if not ps:
        return "?"
    close = {min(p.get("core_round_trip_samples_ns") or [p["core_round_trip_ns"]]) < CLOSE_NS for p in ps}
    return "mixed" if len(close) > 1 else "close" if close.pop() else "far"


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def prompt_of(args, i):
    """Request i's prompt: the --prompt-file texts in turn, else --prompt."""
    prompts = getattr(args, "prompts", None)
    return prompts[i % len(prompts)] if prompts else args.prompt


def request_body(args, i):
    body = {"model": args.model, "max_tokens": args.max_tokens, "temperature": args.temperature, "stream": True,
            "stream_options": {"include_usage": True}, "seed": i, "ignore_eos": args.ignore_eos}
    if args.chat:
        body["messages"] = [{"role": "user", "content": prompt_of(args, i)}]
    else:
        body["prompt"] = prompt_of(args, i)
    return body


def events_raw(args, i):
    """One streaming request over http.client: yields (completion tokens or None, text) per SSE
    event, parsed with json.loads alone."""
    u = urllib.parse.urlparse(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.timeout)
    try:
        path = u.path.rstrip("/") + ("/chat/completions" if args.chat else "/completions")
        conn.request("POST", path, body=json.dumps(request_body(args, i)),
                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {args.api_key}"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
        while True:
            line = resp.readline()
            if not line:
                raise RuntimeError("stream ended without [DONE]")
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                return
            ev = json.loads(data)
            usage = ev.get("usage")
            choices = ev.get("choices") or []
            c = choices[0] if choices else {}
            text = ((c.get("delta") or {}).get("content") if args.chat else c.get("text")) or ""
            yield (usage["completion_tokens"] if usage else None), text
    finally:
        conn.close()


def events_sdk(client, args, i):
    """The same request through the openai SDK, the same (tokens or None, text) events."""
    kw = dict(model=args.model, max_tokens=args.max_tokens, temperature=args.temperature, stream=True,
              stream_options={"include_usage": True}, seed=i, extra_body={"ignore_eos": args.ignore_eos})
    if args.chat:
        stream = client.chat.completions.create(messages=[{"role": "user", "content": prompt_of(args, i)}], **kw)
    else:
        stream = client.completions.create(prompt=prompt_of(args, i), **kw)
    for chunk in stream:
        c = chunk.choices[0] if chunk.choices else None
        text = ((c.delta.content if args.chat else c.text) if c else "") or ""
        yield (chunk.usage.completion_tokens if chunk.usage is not None else None), text


def one_stream(client, args, i, out):
    """Times one request: first text (TTFT), the gaps between texts (ITL), the usage count."""
    t0 = time.perf_counter()
    first, last, itl, n_tok, ok = None, None, [], 0, False
    end = None
    try:
        for tokens, text in (events_sdk(client, args, i) if client is not None else events_raw(args, i)):
            now = time.perf_counter()
            if tokens is not None:
                n_tok = tokens
            if text:
                if first is None:
                    first = now
                else:
                    itl.append(now - last)
                last = now
        ok = True
        end = time.perf_counter()
    except Exception as e:   # counted, reported, never fatal
        print(f"request {i}: {type(e).__name__}: {e}", file=sys.stderr)
    out.append({"ok": ok, "ttft": (first - t0) if first else None, "itl": itl, "tokens": n_tok,
                "seconds": time.perf_counter() - t0, "first": first, "end": end})


def union_seconds(intervals):
    """Length of the union of [a, b] intervals."""
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def run_round(client, args, concurrency):
    results, lock, next_i = [], threading.Lock(), [0]

    def worker():
        while True:
            with lock:
                i = next_i[0]
                if i >= args.requests:
                    return
                next_i[0] += 1
            one_stream(client, args, i, results)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r["ok"]]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    itl = [x for r in ok for x in r["itl"]]
    tokens = sum(r["tokens"] for r in ok)
    decoding = [r for r in ok if r["first"] is not None and r["tokens"] > 1]
    decode_s = union_seconds([(r["first"], r["end"]) for r in decoding])
    decode_tokens = sum(r["tokens"] - 1 for r in decoding)
    return {
        "concurrency": concurrency, "requests": len(results), "failed": len(results) - len(ok),
        "wall_s": wall, "generated_tokens": tokens, "throughput_tok_s": tokens / wall if wall > 0 else 0.0,
        "decode_s": decode_s, "decode_tokens": decode_tokens,
        "decode_tok_s": decode_tokens / decode_s if decode_s > 0 else float("nan"),
        "ttft_s": {p: percentile(ttft, p) for p in (50, 90, 99)},
        "itl_s": {p: percentile(itl, p) for p in (50, 90, 99)},
        "itl_mean_s": statistics.fmean(itl) if itl else float("nan"),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key", default="none")
    ap.add_argument("-c", "--concurrency", type=int, default=4)
    ap.add_argument("--sweep", help="comma-separated concurrencies, one round each (overrides -c)")
    ap.add_argument("--repeat", type=int, default=1, help="run the sweep this many times, interleaved")
    ap.add_argument("-n", "--requests", type=int, default=16, help="requests per round")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="Write a long story about a river that flows to the sea.")
    ap.add_argument("--prompt-file", action="append", default=[],
                    help="a prompt read from this file (repeatable: request i gets file i mod count; overrides --prompt)")
    ap.add_argument("--chat", action="store_true", help="use /v1/chat/completions")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--ignore-eos", action="store_true", default=True)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--sdk", action="store_true", help="read the streams through the openai SDK (heavier client)")
    ap.add_argument("--probe", help="command printing `sluice bench --machine --json`, run before and after every round")
    ap.add_argument("--placement", choices=("any", "close", "far"), default="any",
                    help="with --probe: measure a round again (up to 10 times) until both probes say this placement")
    args = ap.parse_args(argv)
    host = urllib.parse.urlparse(args.url).hostname
    if host not in ("127.0.0.1", "localhost", "::1") and not (host or "").startswith("127."):
        ap.error("only loopback servers may be loaded")
    args.prompts = []
    for path in args.prompt_file:
        try:
            with open(path) as f:
                args.prompts.append(f.read())
        except OSError as e:
            ap.error(f"--prompt-file {path}: {e}")
    if args.requests < 1 or args.requests > 100000:
        ap.error("--requests must be in [1, 100000]")
    if args.repeat < 1 or args.repeat > 100:
        ap.error("--repeat must be in [1, 100]")
    if args.placement != "any" and not args.probe:
        ap.error("--placement needs --probe")
    if args.sdk:
        import openai
    client = openai.OpenAI(base_url=args.url, api_key=args.api_key, max_retries=0, timeout=args.timeout) if args.sdk else None
    levels = [int(x) for x in args.sweep.split(",")] if args.sweep else [args.concurrency]
    rounds = []
    for rep in range(args.repeat):
        for c in levels:
            for attempt in range(1, 11):
                probe = probe_machine(args.probe) if args.probe else None
                r = run_round(client, args, c)
                r["probe"] = probe
                r["probe_after"] = probe_machine(args.probe) if args.probe else None
                r["attempts"] = attempt
                if args.placement == "any" or placement(r) == args.placement:
                    break
                print(f"round at {c} streams ran {placement(r)}, not {args.placement}: measuring it again", file=sys.stderr)
            else:
                sys.exit(f"no round in the {args.placement} placement after 10 tries")
            r["repeat"] = rep
            rounds.append(r)
    print(f"{'conc':>4} {'reqs':>5} {'fail':>4} {'tok':>7} {'tok/s':>8} {'decode':>8} {'ttft p50':>9} {'p90':>7} {'p99':>7} "
          f"{'itl p50':>8} {'p90':>7} {'p99':>7}" + (f" {'bus GB/s':>11} {'rt ns':>9} placement" if args.probe else ""))
    for r in rounds:
        t, l = r["ttft_s"], r["itl_s"]
        print(f"{r['concurrency']:>4} {r['requests']:>5} {r['failed']:>4} {r['generated_tokens']:>7} "
              f"{r['throughput_tok_s']:>8.1f} {r['decode_tok_s']:>8.1f} {t[50]:>9.3f} {t[90]:>7.3f} {t[99]:>7.3f} "
              f"{l[50] * 1e3:>7.1f}m {l[90] * 1e3:>6.1f}m {l[99] * 1e3:>6.1f}m" +
              (f" {r['probe']['bandwidth_gbs']:>5.1f}-{r['probe_after']['bandwidth_gbs']:<5.1f}"
               f" {r['probe']['core_round_trip_ns']:>4.0f}-{r['probe_after']['core_round_trip_ns']:<4.0f} {placement(r)}"
               if r["probe"] else ""))
    # Speed-ups over the first level, from each repeat's own rounds (the same minutes), then
    # their median.
    summary = []
    if len(levels) > 1:
        base = levels[0]
        for c in levels[1:]:
            ratios = {"tok/s": [], "decode tok/s": []}
            where = {"tok/s": [], "decode tok/s": []}   # the placements of each ratio's two rounds
            for rep in range(args.repeat):
                b = next(r for r in rounds if r["repeat"] == rep and r["concurrency"] == base)
                x = next(r for r in rounds if r["repeat"] == rep and r["concurrency"] == c)
                for what, key in (("tok/s", "throughput_tok_s"), ("decode tok/s", "decode_tok_s")):
                    if b[key] > 0:
                        ratios[what].append(x[key] / b[key])
                        where[what].append(f"{placement(b)}/{placement(x)}")
            for what, xs in ratios.items():
                if not xs:
                    continue
                med = statistics.median(xs)
                each = ", ".join(f"{v:.2f}" + (f" {w}" if args.probe else "") for v, w in zip(xs, where[what]))
                print(f"aggregate speed-up at {c} streams ({what}): {med:.2f}x" +
                      (f" (median of {len(xs)}: {each})" if len(xs) > 1 or args.probe else ""))
                summary.append({"concurrency": c, "metric": what, "median_speedup": med, "speedups": xs,
                                "placements": where[what] if args.probe else None})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rounds, "speedups": summary}, f, indent=1)
    return 0 if all(r["failed"] == 0 for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
