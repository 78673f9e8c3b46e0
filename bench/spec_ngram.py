#!/usr/bin/env python3
"""Decode speed with and without n-gram speculation on a grounded prompt (one whose output
copies text it was given: bench/spec_grounded_prompt.txt), via `sluice run`.

  python3 bench/spec_ngram.py [--sluice build/apps/sluice/sluice] [--model models/gemma-3-270m-q4_k_m.gguf]
                              [--repeats 3] [-n 128] [-t 2] [--ks 3,8] [--temp 0]

The settings run interleaved (none, K1, K2, none, ...) so a change in the machine's load
hits them alike; each line gives the median generated tokens/s over the repeats and the
acceptance. Outputs are compared too: a speculative run must print what --spec none prints.
With --draft FILE the speculative settings are `--spec draft --draft FILE` instead of ngram
(e.g. the model drafting for itself: every greedy draft accepted, the draft's cost visible)."""
import argparse
import pathlib
import re
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEED = re.compile(r"generated: (\d+) tokens, ([0-9.]+) tokens/s")
SPEC = re.compile(r"\[spec: drafted (\d+), accepted (\d+) ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(ROOT / "build/apps/sluice/sluice"))
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--prompt", default=str(ROOT / "bench/spec_grounded_prompt.txt"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--ks", default="3,8")
    ap.add_argument("--temp", default="0")
    ap.add_argument("--draft", help="draft model GGUF: --spec draft instead of ngram")
    a = ap.parse_args()
    method = "draft" if a.draft else "ngram"
    settings = [("none", None)] + [(method, int(k)) for k in a.ks.split(",")]
    speeds = {s: [] for s in settings}
    accept = {}
    outputs = {}
    for _ in range(a.repeats):
        for s in settings:
            cmd = [a.sluice, "run", "-m", a.model, "-f", a.prompt, "-n", str(a.n), "-t", str(a.t),
                   "--temp", a.temp, "--seed", "1", "--spec", s[0]]
            if s[1]:
                cmd += ["--draft-max", str(s[1])]
            if s[1] and a.draft:
                cmd += ["--draft", a.draft]
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            speeds[s].append(float(SPEED.search(r.stderr).group(2)))
            m = SPEC.search(r.stderr)
            if m:
                accept[s] = (int(m.group(1)), int(m.group(2)))
            outputs.setdefault(s, r.stdout)
    base = statistics.median(speeds[settings[0]])
    for s in settings:
        med = statistics.median(speeds[s])
        name = "--spec none" if s[1] is None else f"--spec {method} --draft-max {s[1]}"
        extra = ""
        if s in accept:
            d, acc = accept[s]
            extra = f" | drafted {d}, accepted {acc} ({100.0 * acc / max(d, 1):.0f}%)"
        same = "same output" if outputs[s] == outputs[settings[0]] else "OUTPUT DIFFERS"
        print(f"{name:32s} {med:7.1f} tokens/s (x{med / base:.2f}; runs {', '.join(f'{v:.1f}' for v in speeds[s])})"
              f"{extra} | {same}")


if __name__ == "__main__":
    main()
