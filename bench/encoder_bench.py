#!/usr/bin/env python3
"""sluice's Gemma 4 encoders against llama.cpp's llama-mtmd-cli on the same E2B-shaped mmproj
(`make e2b-mmproj`, beside `make e2b-model`), interleaved in one run, 2 threads each:
encode time of one 280-token image (672×960 pixels: a 42×60 patch grid, no resize in either
engine) and of 30 s of audio. Not part of `make test`; docs/performance.md has the figures.

  .venv/bin/python bench/encoder_bench.py [--rounds 3] [--threads 2] [--what image,audio]

Times read from each engine's own log: sluice `run --image` prints "encoded in N ms" (image
decode + preprocessing + tower + projector); for audio build/bench/audio_bench times the tower
alone on 2999 mel frames (what 30 s gives) of noise — `run --audio` adds the WAV decode and the
features, ~30 ms. llama-mtmd-cli prints "mtmd batch encoding done in N ms" (its tower +
projector; preprocessing comes before). llama.cpp's tools: `make llamacpp-tools` builds them
into .llamacpp/build/bin; LLAMA_BIN names another directory.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import struct
import subprocess
import sys
import wave
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
MODEL = MODELS / "gemma4-e2b-shaped-q4_0.gguf"
MMPROJ = {"f16": MODELS / "gemma4-e2b-shaped-mmproj-f16.gguf",     # vision F16, audio F16
          "q8_0": MODELS / "gemma4-e2b-shaped-mmproj-q8_0.gguf"}   # vision Q8_0, audio BF16
AUDIO_TYPE = {"f16": "F16", "q8_0": "BF16"}
LLAMA_BIN = pathlib.Path(os.environ.get("LLAMA_BIN", ROOT / ".llamacpp" / "build" / "bin"))
SLUICE = ROOT / "build" / "apps" / "sluice" / "sluice"
AUDIO_BENCH = ROOT / "build" / "bench" / "audio_bench"


def write_png(path: pathlib.Path, w: int, h: int) -> None:
    """An RGB noise PNG (zlib only, no imaging library)."""
    px = np.random.default_rng(3).integers(0, 256, (h, w, 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + px[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def inputs() -> tuple[pathlib.Path, pathlib.Path, pathlib.Path, int]:
    img = MODELS / "encoder-bench-672x960.png"
    if not img.exists():
        write_png(img, 672, 960)
    wav = MODELS / "encoder-bench-30s.wav"
    if not wav.exists():
        t = np.arange(30 * 16000) / 16000
        x = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * np.random.default_rng(5).standard_normal(t.size)
        with wave.open(str(wav), "wb") as f:
            f.setnchannels(1), f.setsampwidth(2), f.setframerate(16000)
            f.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
    frames = (30 * 16000 + 160 - 321) // 160 + 1
    mel = MODELS / f"encoder-bench-{frames}.mel.f32"
    if not mel.exists():
        m = np.random.default_rng(7).standard_normal((frames, 128), dtype=np.float32) * np.float32(1.5) - 2
        mel.write_bytes(m.astype("<f4").tobytes())
    return img, wav, mel, frames


def grab(cmd: list[str], pattern: str) -> float:
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(pattern, r.stdout + r.stderr)
    if not m:
        sys.exit(f"no timing in the output of {' '.join(cmd)} (rc {r.returncode}):\n{(r.stdout + r.stderr)[-2000:]}")
    return float(m.group(1))


def sluice_image(mmproj, img, threads):
    return grab([str(SLUICE), "run", "-m", str(MODEL), "--mmproj", str(mmproj), "--image", str(img), "-p", "Describe",
                 "-n", "1", "-t", str(threads)], r"280 tokens, encoded in ([0-9.]+) ms")


def sluice_audio(mmproj, mel, frames, threads):
    return grab([str(AUDIO_BENCH), str(mmproj), str(mel), str(frames), "--threads", str(threads), "--runs", "1"],
                r"-> 750 tokens, \d+ threads: median ([0-9.]+) ms")


def llama(mmproj, flag, media, threads):
    return grab([str(LLAMA_BIN / "llama-mtmd-cli"), "-m", str(MODEL), "--mmproj", str(mmproj), flag, str(media),
                 "-p", "Describe", "-n", "1", "-t", str(threads), "--chat-template", "gemma"],
                r"mtmd batch encoding done in ([0-9.]+) ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--what", default="image,audio")
    ap.add_argument("--files", default="f16,q8_0")
    a = ap.parse_args()
    for p in [MODEL, SLUICE, LLAMA_BIN / "llama-mtmd-cli"] + [MMPROJ[f] for f in a.files.split(",")]:
        if not p.exists():
            sys.exit(f"{p} is missing (make e2b-model e2b-mmproj; cmake --build build --target sluice audio_bench; "
                     "make llamacpp-tools on branch wt-bench)")
    img, wav, mel, frames = inputs()
    for what in a.what.split(","):
        for f in a.files.split(","):
            mm = MMPROJ[f]
            s, ll = [], []
            for _ in range(a.rounds):  # interleaved: sluice, llama.cpp, sluice, ...
                if what == "image":
                    s.append(sluice_image(mm, img, a.threads))
                    ll.append(llama(mm, "--image", img, a.threads))
                else:
                    s.append(sluice_audio(mm, mel, frames, a.threads))
                    ll.append(llama(mm, "--audio", wav, a.threads))
            ty = f.upper() if what == "image" else AUDIO_TYPE[f]
            ms, ml = statistics.median(s), statistics.median(ll)
            print(f"{what:5s} {ty:5s} {a.threads} threads: sluice median {ms:8.0f} ms {s}  llama-mtmd-cli median "
                  f"{ml:8.0f} ms {ll}  ratio {ml / ms:.2f}x", flush=True)


if __name__ == "__main__":
    main()
