"""Golden data for `sluice logits --mmproj FILE --audio PATH` (tests/python/test_cli_audio.py):
a WAV file through transformers' own feature extractor and Gemma4ForConditionalGeneration
(tiny-gemma4 + tiny-audio-e, make_audio_tower_golden.build_e2e_model), so the CLI's whole path
— decode, features, tower, placement, text model — is compared with an implementation we did
not write.

  tests/data/golden/audio/cli/clip.wav     1.3 s, 16 kHz mono 16-bit PCM: a chirp plus noise
  tests/data/golden/audio/cli/logits.f32   the model's logits [n_ids, vocab] on the prompt
  tests/data/golden/audio/cli/cli.json     versions, the prompt before and after expansion

Run with the golden venv: .venv-golden/bin/python python/make_cli_audio_golden.py
"""
from __future__ import annotations

import json
import pathlib
import sys
import wave

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "golden" / "audio" / "cli"
sys.path.insert(0, str(ROOT / "python"))

RATE = 16000
SAMPLES = 20800  # 1.3 s: 131 frames, 33 tokens
PROMPT = [2, 17, 33, 108, "audio", 45, 99, 12, 5]  # "audio": the one placeholder the CLI expands


def clip_samples() -> np.ndarray:
    """int16 samples: a 200 → 3000 Hz chirp at 0.4 plus noise at 0.05."""
    t = np.arange(SAMPLES) / RATE
    x = 0.4 * np.sin(2 * np.pi * (200 * t + 1400 * t * t)) + 0.05 * np.random.default_rng(361).standard_normal(SAMPLES)
    return np.round(np.clip(x, -1, 1) * 32767).astype("<i2")


def write_wav(path: pathlib.Path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.tobytes())


def main() -> None:
    import torch
    import transformers
    from transformers import Gemma4AudioFeatureExtractor

    import make_audio_tower_golden as g

    OUT.mkdir(parents=True, exist_ok=True)
    pcm = clip_samples()
    write_wav(OUT / "clip.wav", pcm)
    # what libsndfile (and soundfile/librosa) give for 16-bit PCM: x / 32768
    audio = pcm.astype(np.float32) / np.float32(32768.0)
    feats = Gemma4AudioFeatureExtractor()([audio], sampling_rate=RATE, return_tensors="pt")
    mel, mask = feats["input_features"].float(), feats["input_features_mask"].bool()
    n = g.n_tokens(int(mask.sum()))
    E = g.E2E
    ids = []
    for t in PROMPT:
        ids += [E["boa_token_id"]] + [E["audio_token_id"]] * n + [E["eoa_token_index"]] if t == "audio" else [t]
    model, _, _ = g.build_e2e_model(torch)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), input_features=mel, input_features_mask=mask,
                       use_cache=False).logits[0]
    (OUT / "logits.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
    meta = {"generator": "python/make_cli_audio_golden.py", "transformers_version": transformers.__version__,
            "torch_version": torch.__version__, "wav": "clip.wav", "frames": int(mel.shape[1]),
            "valid_frames": int(mask.sum()), "audio_tokens": n,
            "markers": {k: E[k] for k in ("audio_token_id", "boa_token_id", "eoa_token_index")},
            "prompt": [E["audio_token_id"] if t == "audio" else t for t in PROMPT], "expanded": ids,
            "logits": "logits.f32", "n_vocab": int(logits.shape[1])}
    (OUT / "cli.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"cli audio golden: {n} tokens, {len(ids)} ids, logits {tuple(logits.shape)}", file=sys.stderr)


if __name__ == "__main__":
    main()
