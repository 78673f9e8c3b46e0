#!/usr/bin/env python3
"""The E2B-shaped Gemma 4 audio tower (python/tiny_audio.py preset "e2b": real shapes, random
weights) through sluice's encoder (build/bench/audio_bench) — its encode time, and its soft
tokens against transformers' on the same weights and input. Not part of `make test`.

  .venv/bin/python python/audio_bench.py write [--outtype f32|bf16|f16]   # models/gemma4-e2b-audio-shaped-<t>.mmproj.gguf
  .venv/bin/python python/audio_bench.py time --seconds 30 [--threads 2] [--outtype ...]
  .venv-golden/bin/python python/audio_bench.py check --seconds 3      # f32 file; needs torch + transformers

Mel input: N(-2, 1.5) noise (seed 7) for the frame count transformers' feature extractor gives
`seconds` of 16 kHz audio: (16000 s + 160 − 321) // 160 + 1 (30 s: 3000 frames, 750 tokens).
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
SEED = 0


def gguf_path(outtype: str) -> pathlib.Path:
    return ROOT / "models" / f"gemma4-e2b-audio-shaped-{outtype}.mmproj.gguf"


def frames_of(seconds: float) -> int:
    return (int(round(16000 * seconds)) + 160 - 321) // 160 + 1


def mel_file(seconds: float) -> tuple[pathlib.Path, int]:
    frames = frames_of(seconds)
    path = ROOT / "models" / f"audio-bench-{frames}.mel.f32"
    mel = np.random.default_rng(7).standard_normal((frames, 128), dtype=np.float32) * np.float32(1.5) - np.float32(2)
    path.write_bytes(mel.astype("<f4").tobytes())
    return path, frames


def write(outtype: str) -> None:
    import convert_audio_mmproj as ca
    import tiny_audio as ta
    opts = ta.PRESETS["e2b"]
    out = gguf_path(outtype)
    out.parent.mkdir(exist_ok=True)
    ca.convert_audio_state(ta.hf_audio_config(opts), opts["text_hidden"], ta.draw_state(SEED, opts), out, outtype,
                           name="gemma4-e2b-audio-shaped", verbose=False)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB)")


def run_sluice(outtype: str, seconds: float, threads: int, runs: int, out: pathlib.Path | None = None) -> str:
    mel, frames = mel_file(seconds)
    cmd = [str(ROOT / "build" / "bench" / "audio_bench"), str(gguf_path(outtype)), str(mel), str(frames),
           "--threads", str(threads), "--runs", str(runs)] + (["--out", str(out)] if out else [])
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def check(seconds: float) -> None:
    """Soft tokens of the f32 file against transformers' Gemma4AudioModel + embedder."""
    import torch
    import make_audio_tower_golden as mg
    tower = {"id": "e2b-shaped", "preset": "e2b", "seed": SEED}
    model, embed, opts, _ = mg.build_tower(torch, tower)
    mel, frames = mel_file(seconds)
    x = torch.from_numpy(np.fromfile(mel, dtype="<f4").reshape(1, frames, 128))
    with torch.no_grad():
        out = model(x, torch.ones(1, frames, dtype=torch.bool), return_dict=True)
        want = embed(out.last_hidden_state)[0].numpy()
    soft = ROOT / "models" / "audio-bench-soft.f32"
    print(run_sluice("f32", seconds, 2, 1, soft))
    got = np.fromfile(soft, dtype="<f4").reshape(want.shape)
    rel = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    print(f"E2B-shaped tower, {seconds} s ({frames} frames, {want.shape[0]} tokens): largest relative "
          f"difference to transformers {rel.max():.2e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["write", "time", "check"])
    ap.add_argument("--outtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.what == "write":
        write(a.outtype)
    elif a.what == "time":
        print(run_sluice(a.outtype, a.seconds, a.threads, a.runs))
    else:
        check(a.seconds)


if __name__ == "__main__":
    main()
