"""How far an lm_head format moves the logits. Runs `sluice logits -f TEXT` twice on the same
model — `--lm-head packed` (the file's own type: the reference) and `--lm-head FORMAT` — and
reports over every position: mean KL(ref || other) of the softmax distributions, top-1
agreement, max |Δlogit|, and RMS(Δlogit) / RMS(logit).

    .venv/bin/python python/lm_head_drift.py MODEL.gguf [--format q4_0] [--text FILE] [--tokens 512]

Used for docs/performance.md (the opt-in `--lm-head q4_0`). Needs numpy only.
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def logits(sluice, model, text, tokens, fmt, out):
    cmd = [str(sluice), "logits", "-m", str(model), "-f", str(text), "--max-tokens", str(tokens),
           "--lm-head", fmt, "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"sluice logits failed ({' '.join(cmd)}):\n{r.stderr}")
    return np.fromfile(out, dtype=np.float32)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--format", default="q4_0")
    ap.add_argument("--text", default=str(ROOT / "tests/data/text/gpl-3.txt"))
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--sluice", default=str(ROOT / "build/apps/sluice/sluice"))
    a = ap.parse_args()
    if not pathlib.Path(a.sluice).exists():
        sys.exit(f"{a.sluice} is missing: run make build")
    with tempfile.TemporaryDirectory() as d:
        ref = logits(a.sluice, a.model, a.text, a.tokens, "packed", pathlib.Path(d) / "ref.f32")
        got = logits(a.sluice, a.model, a.text, a.tokens, a.format, pathlib.Path(d) / "got.f32")
    n = a.tokens
    ref = ref.reshape(n, -1).astype(np.float64)
    got = got.reshape(n, -1).astype(np.float64)
    lp, lq = log_softmax(ref), log_softmax(got)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    top1 = (ref.argmax(axis=1) == got.argmax(axis=1)).mean()
    diff = got - ref
    print(f"{a.model}: --lm-head {a.format} vs packed over {n} positions")
    print(f"  mean KL {kl.mean():.5f} nats (max {kl.max():.4f}), top-1 agreement {100 * top1:.1f}%")
    print(f"  max |dlogit| {np.abs(diff).max():.3f}, RMS(dlogit)/RMS(logit) {np.sqrt((diff ** 2).mean() / (ref ** 2).mean()):.4f}")


if __name__ == "__main__":
    main()
