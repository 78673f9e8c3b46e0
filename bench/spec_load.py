#!/usr/bin/env python3
"""Aggregate throughput under load with and without n-gram speculation: two `sluice serve`
(--spec none, --spec ngram with the adaptive policy) on the same model, driven by
python/loadgen.py's rounds at each concurrency, on grounded prompts (bench/spec_grounded_*.txt:
copy, spelling edit, extraction, code rewrite; greedy) and on free text (story prompts,
temperature 0.8, seeded per request).

  python3 bench/spec_load.py [--sluice build/apps/sluice/sluice] [--model models/gemma-3-270m-q4_k_m.gguf]
                             [--levels 1,2,4,8] [--repeats 3] [--max-tokens 128] [--json out.json]

Rounds are interleaved — for each repeat, each concurrency, each prompt set: the plain server,
then the speculative one, the other way round in odd repeats — so a change in the machine's
load, or a cost of going first, hits both alike. The default length, 128 tokens, lets a grounded
output copy its source through (the texts are 80-120 words); much shorter rounds are mostly prefill,
which speculation does not touch. Each line gives
the median over the repeats of the aggregate tokens/s (generated tokens / wall time), the ratio
speculative / plain (median of the per-repeat ratios, and their mean ± standard deviation: a
repeat's ratio spreads ±5-10% on a shared 2-core host, so where both servers do the same work
the median falls either side of 1.0; `--repeats 10` narrows the mean), and from the speculative server's
/metrics the drafts per generated token (0: the policy switched speculation off) and the
acceptance."""
import argparse
import json
import pathlib
import re
import statistics
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests/python"))
import loadgen  # noqa: E402
from server_util import Server  # noqa: E402

FREE = ["Once upon a time, in a small village by the mountains, there lived",
        "Write a short essay about why people enjoy travelling to new places.",
        "The history of the bicycle begins in the early nineteenth century, when",
        "Here is a letter to a friend describing a summer holiday by the sea:"]


def metric(server, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", server.get("/metrics"), re.M)
    return float(m.group(1)) if m else 0.0


def round_args(model, url, prompts, temperature, max_tokens, requests):
    return types.SimpleNamespace(url=url, model=model, api_key="none", max_tokens=max_tokens, prompts=prompts,
                                 prompt=prompts[0], chat=False, temperature=temperature, ignore_eos=True,
                                 timeout=600, requests=requests)


def one_round(server, alias, prompts, temp, a, c):
    d0, a0 = metric(server, "sluice_spec_drafted_tokens_total"), metric(server, "sluice_spec_accepted_tokens_total")
    r = loadgen.run_round(None, round_args(alias, server.base_url, prompts, temp, a.max_tokens, 2 * c), c)
    r["drafted"] = metric(server, "sluice_spec_drafted_tokens_total") - d0
    r["accepted"] = metric(server, "sluice_spec_accepted_tokens_total") - a0
    if r["failed"]:
        sys.exit(f"{r['failed']} requests failed at {c} streams")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default=str(ROOT / "build/apps/sluice/sluice"))
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--levels", default="1,2,4,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--draft-max", type=int, default=4)
    ap.add_argument("--sets", default="grounded,free", help="prompt sets to run (grounded, free)")
    ap.add_argument("--spec-args", default="", help="more flags for the speculative server, e.g. '--spec-margin 0'")
    ap.add_argument("--json")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    grounded = [p.read_text() for p in sorted((ROOT / "bench").glob("spec_grounded_*.txt"))]
    sets = {name: v for name, v in {"grounded": (grounded, 0.0), "free": (FREE, 0.8)}.items()
            if name in a.sets.split(",")}
    common = ["-t", a.threads, "-c", 1024, "--parallel", max(levels), "--max-queue", 64]
    plain = Server(a.sluice, a.model, *common)
    spec = Server(a.sluice, a.model, *common, "--spec", "ngram", "--draft-max", a.draft_max, *a.spec_args.split())
    alias = json.loads(plain.get("/v1/models"))["data"][0]["id"]
    rows = []
    probe = f"{a.sluice} bench --machine -t {a.threads} --json"
    try:
        for rep in range(a.repeats):
            before = loadgen.probe_machine(probe)
            for c in levels:
                for name, (prompts, temp) in sets.items():
                    pair = (("none", plain), ("ngram", spec))
                    for label, server in (pair if rep % 2 == 0 else pair[::-1]):
                        r = one_round(server, alias, prompts, temp, a, c)
                        r.update(repeat=rep, prompts=name, spec=label)
                        rows.append(r)
                        print(f"repeat {rep} c={c} {name:8} {label:5} {r['throughput_tok_s']:7.1f} tok/s "
                              f"drafted {r['drafted']:.0f} accepted {r['accepted']:.0f}", file=sys.stderr, flush=True)
            # The VM moves its cores between placements (python/loadgen.py): one probe pair per
            # repeat says which this repeat ran in (or "mixed").
            place = {"probe": before, "probe_after": loadgen.probe_machine(probe)}
            for r in rows:
                if r["repeat"] == rep:
                    r.update(place, placement=loadgen.placement(place))
            print(f"repeat {rep}: placement {loadgen.placement(place)} (core round trip "
                  f"{before['core_round_trip_ns']:.0f} / {place['probe_after']['core_round_trip_ns']:.0f} ns, bus "
                  f"{before['bandwidth_gbs']:.1f} / {place['probe_after']['bandwidth_gbs']:.1f} GB/s)",
                  file=sys.stderr, flush=True)
    finally:
        plain.stop()
        spec.stop()
    report(rows, levels, a)


def report(rows, levels, a):
    print("placements by repeat: " + ", ".join(f"{rep}: {next(r['placement'] for r in rows if r['repeat'] == rep)}"
                                               for rep in sorted({r["repeat"] for r in rows})))
    print(f"{'prompts':9} {'conc':>4} {'none tok/s':>10} {'ngram tok/s':>11} {'ratio':>6} {'mean ± sd':>11} "
          f"{'drafts/token':>12} {'accepted':>8}  (medians of {a.repeats}; the ratio's mean and spread over them)")
    summary = []
    for name in ("grounded", "free"):
        if name not in a.sets.split(","):
            continue
        for c in levels:
            sel = [r for r in rows if r["prompts"] == name and r["concurrency"] == c]
            by = {s: [r for r in sel if r["spec"] == s] for s in ("none", "ngram")}
            ratios = [x["throughput_tok_s"] / b["throughput_tok_s"] for b, x in zip(by["none"], by["ngram"])]
            drafted = sum(r["drafted"] for r in by["ngram"])
            gen = sum(r["generated_tokens"] for r in by["ngram"])
            acc = sum(r["accepted"] for r in by["ngram"])
            s = {"prompts": name, "concurrency": c,
                 "none_tok_s": statistics.median(r["throughput_tok_s"] for r in by["none"]),
                 "ngram_tok_s": statistics.median(r["throughput_tok_s"] for r in by["ngram"]),
                 "ratio": statistics.median(ratios), "ratios": ratios, "ratio_mean": statistics.mean(ratios),
                 "ratio_sd": statistics.stdev(ratios) if len(ratios) > 1 else 0.0,
                 "drafts_per_token": drafted / gen if gen else 0.0, "acceptance": acc / drafted if drafted else 0.0}
            summary.append(s)
            print(f"{name:9} {c:>4} {s['none_tok_s']:>10.1f} {s['ngram_tok_s']:>11.1f} {s['ratio']:>5.2f}x "
                  f"{s['ratio_mean']:>5.2f} ± {s['ratio_sd']:.2f} {s['drafts_per_token']:>12.2f} "
                  f"{100 * s['acceptance']:>7.0f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rows, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
