#!/usr/bin/env python3
"""The E2B-shaped mmproj: Gemma 4 E2B's vision tower (width 768, 16 layers, 12 heads, FFN 3072,
clipped linears; python/tiny_vision.py preset "e2b") and audio tower (12 conformer layers of
width 1024; python/tiny_audio.py preset "e2b") with random weights, in one GGUF as llama.cpp
writes it, for the encoder benchmarks (bench/encoder_bench.py) beside `make e2b-model`'s text
model. Not part of `make test`.

  .venv/bin/python python/make_e2b_mmproj.py OUT.gguf --vision f16|q8_0 --audio f16|bf16 [--seed 0]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import convert_vision_mmproj as cv  # noqa: E402
import tiny_audio as ta  # noqa: E402
import tiny_vision as tv  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--vision", default="f16", choices=["f16", "q8_0"])
    ap.add_argument("--audio", default="bf16", choices=["f16", "bf16"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    vopts, aopts = tv.PRESETS["e2b"], ta.PRESETS["e2b"]
    state = tv.draw_state(a.seed, vopts)
    state.update(ta.draw_state(a.seed + 1, aopts))
    out = pathlib.Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    cv.convert_vision_state(tv.hf_vision_config(vopts), vopts["text_hidden"], state, tmp, a.vision,
                            name="gemma4-e2b-shaped-mmproj", verbose=False,
                            audio_config=ta.hf_audio_config(aopts), audio_outtype=a.audio)
    tmp.replace(out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB; vision {a.vision}, audio {a.audio})")


if __name__ == "__main__":
    main()
