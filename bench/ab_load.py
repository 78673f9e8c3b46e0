#!/usr/bin/env python3
"""Two (or more) sluice binaries under the same load: one `sluice serve` each on the same
model and flags, python/loadgen.py rounds on free text (temperature 0.8, seeded per request)
at each concurrency, rounds interleaved and the order reversed in odd repeats, so a change in
the machine's load or a cost of going first hits every binary alike. Prints the median
aggregate tokens/s of each and the last one's ratio to the first. For A/B-ing a change:

  git stash; make build; cp build/apps/sluice/sluice /tmp/sluice-a; git stash pop; make build
  python3 bench/ab_load.py --sluice /tmp/sluice-a,build/apps/sluice/sluice --levels 1,4,8 [-- --spec ngram]
"""
import argparse
import json
import pathlib
import statistics
import sys
import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from spec_load import FREE, ROOT, Server, loadgen  # noqa: E402  (spec_load puts python/ and tests/python/ on the path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", required=True, help="comma-separated binaries; the first is the baseline")
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--levels", default="1,4,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("serve_args", nargs="*", help="more `sluice serve` flags for every server (after --)")
    a = ap.parse_args()
    bins = a.sluice.split(",")
    levels = [int(x) for x in a.levels.split(",")]
    common = ["-t", a.threads, "-c", 1024, "--parallel", max(levels), "--max-queue", 64, *a.serve_args]
    servers = [Server(b, a.model, *common) for b in bins]
    alias = json.loads(servers[0].get("/v1/models"))["data"][0]["id"]
    tok_s = {}
    try:
        for rep in range(a.repeats):
            for c in levels:
                order = range(len(bins)) if rep % 2 == 0 else reversed(range(len(bins)))
                for i in order:
                    args = types.SimpleNamespace(url=servers[i].base_url, model=alias, api_key="none",
                                                 max_tokens=a.max_tokens, prompts=FREE, prompt=FREE[0], chat=False,
                                                 temperature=a.temperature, ignore_eos=True, timeout=600,
                                                 requests=2 * c)
                    r = loadgen.run_round(None, args, c)
                    if r["failed"]:
                        sys.exit(f"{r['failed']} requests failed at {c} streams ({bins[i]})")
                    tok_s.setdefault((c, i), []).append(r["throughput_tok_s"])
                    print(f"repeat {rep} c={c} {bins[i]} {r['throughput_tok_s']:.1f} tok/s", file=sys.stderr, flush=True)
    finally:
        for s in servers:
            s.stop()
    for c in levels:
        med = [statistics.median(tok_s[(c, i)]) for i in range(len(bins))]
        print(f"c={c} " + " ".join(f"{b} {m:.1f}" for b, m in zip(bins, med)) + f" ratio {med[-1] / med[0]:.3f}")


if __name__ == "__main__":
    main()
