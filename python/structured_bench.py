"""End-to-end cost of constrained decoding: `sluice serve` on a real model, the same prompts
decoded with a JSON Schema (response_format) and without, at 1 and at 8 concurrent streams.
The schemas (LONG) fix their item counts, so a constrained value runs for most of max_tokens.

Per-token cost = the decode time of a request (first streamed text to the end of the stream)
divided by its tokens after the first, summed over the requests of a round. The constrained
round runs first; each unconstrained request then asks for exactly as many tokens as its
constrained twin produced (ignore_eos), so both modes decode the same number of tokens at the
same positions. Rounds are interleaved (C, U, C, U, ...) so a machine that speeds up or slows
down moves both alike; one warm-up constrained round fills the grammar cache (the deferred
mask analyses a grammar pays once) and is not counted. Medians of the rounds are reported.

  python python/structured_bench.py --sluice build/apps/sluice/sluice -m models/gemma-3-270m-q4_k_m.gguf
"""
import argparse
import http.client
import json
import pathlib
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Schemas whose values cannot close early (fixed item counts), so both modes decode long runs.
LONG = [
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 999}, "minItems": 40, "maxItems": 40},
    {"type": "array", "minItems": 12, "maxItems": 12, "items": {
        "type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                         "age": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["name", "age"], "additionalProperties": False}},
    {"type": "array", "items": {"type": "string", "format": "date"}, "minItems": 20, "maxItems": 20},
    {"type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 8, "maxItems": 8},
]
PROMPT = "Reply with one short JSON value (short strings, few array items) that follows this JSON Schema:\n"


def stream(port, body):
    """(decode seconds, tokens) of one streamed chat request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    first = last = None
    tokens = 0
    for line in resp:
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
        if ev.get("choices") and ev["choices"][0]["delta"].get("content"):
            last = time.monotonic()
            first = first or last
    conn.close()
    return (last - first if first else 0.0), tokens


def body(schema, seed, max_tokens, constrained):
    b = {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "temperature": 1.0, "seed": seed,
         "max_tokens": max_tokens,
         "messages": [{"role": "user", "content": PROMPT + json.dumps(schema)}]}
    if constrained:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}}
    else:
        b["ignore_eos"] = True
    return b


def run_round(port, bodies, streams):
    with ThreadPoolExecutor(streams) as pool:
        return list(pool.map(lambda b: stream(port, b), bodies))


def per_token_ms(results):
    secs = sum(s for s, _ in results)
    toks = sum(max(n - 1, 0) for _, n in results)
    return 1000 * secs / toks, toks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice", default=str(ROOT / "build/apps/sluice/sluice"))
    ap.add_argument("-m", "--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--schemas", type=int, default=8, help="requests per round (LONG's schemas, each twice)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", default="1,8")
    args = ap.parse_args()
    schemas = [s for s in LONG for _ in range(2)][:args.schemas]
    log = open("/tmp/structured_bench_serve.log", "w+")
    srv = subprocess.Popen([args.sluice, "serve", "-m", args.model, "--port", "0", "-c", "2048", "-P", "8",
                            "--alias", "m"], stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(600):
            log.seek(0)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.1)
        if port is None:
            raise RuntimeError("server did not start")
        report = {}
        for streams in map(int, args.streams.split(",")):
            cons = [body(s, 100 + i, args.max_tokens, True) for i, s in enumerate(schemas)]
            warm = run_round(port, cons, streams)
            plain = [body(s, 100 + i, max(n, 2), False) for i, (s, (_, n)) in enumerate(zip(schemas, warm))]
            c_ms, u_ms = [], []
            for _ in range(args.rounds):
                c_res = run_round(port, cons, streams)
                u_res = run_round(port, plain, streams)
                c_ms.append(per_token_ms(c_res)[0])
                u_ms.append(per_token_ms(u_res)[0])
            c, u = statistics.median(c_ms), statistics.median(u_ms)
            report[streams] = {"constrained_ms": c, "unconstrained_ms": u, "overhead_pct": 100 * (c / u - 1),
                               "tokens": per_token_ms(c_res)[1], "rounds_c": c_ms, "rounds_u": u_ms}
            print(f"{streams} stream(s): unconstrained {u:.2f} ms/token, constrained {c:.2f} ms/token "
                  f"({100 * (c / u - 1):+.1f}%), rounds C {['%.2f' % x for x in c_ms]} U {['%.2f' % x for x in u_ms]}",
                  flush=True)
        print(json.dumps(report))
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    sys.exit(main())
