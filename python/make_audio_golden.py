#!/usr/bin/env python3
"""Golden data for sluice's audio path (src/media/audio_*, docs/spec/gemma4.md §10), from
implementations we did not write: transformers' Gemma4AudioFeatureExtractor and Gemma4Processor
(features, frame masks, <|audio|> counts), and soundfile + python-soxr, which is what
librosa.load(path, sr=16000) runs (decoding, downmix, resampling).

    .venv-golden/bin/python python/make_audio_golden.py features
    <venv with numpy, soundfile==0.14.0, soxr==1.1.0>/bin/python python/make_audio_golden.py decode

(transformers 5.24.0 and numpy 2.4 made the committed features; soundfile 0.14.0 with its bundled
libsndfile 1.2.2 and python-soxr 1.1.0 with libsoxr 0.1.3-14 the decode cases. The features are
reproducible bit for bit; soundfile's Ogg writer picks a random stream serial number, so the .ogg
files change on every run while what they decode to does not.)

Writes tests/data/golden/audio/:
  features.json        per signal: its formula (the C++ test regenerates the samples from it,
                       bit for bit: every sample is an integer code / 32768), the frame count,
                       valid frames and token count, which frames are stored, and how far
                       transformers' default float32 call is from its float64 evaluation;
  <signal>.f32         the stored frames' 128 log-mel values, [k][128] float32 — every frame of
                       a clip up to 0.5 s, up to ~40 evenly spaced frames (and the last valid one)
                       of a longer one;
  <signal>.rowsum.f32  each frame's sum over the 128 bins (summed in float64), every frame;
  tokens.json          for ~90 clip lengths (0 to 45 s, the frame and stride edges among them):
                       frames, valid frames and the processor's <|audio|> count;
  decode/<case>.<ext>  short clips written by soundfile (WAV in PCM 8/16/24/32 and float, FLAC,
                       Ogg Vorbis, Ogg Opus, MP3) at several rates and channel counts;
  decode/<case>.16k.f32  what librosa.load(f, sr=16000) returns for it (soundfile's float32
                       read, the mean over channels, soxr.resample(quality="soxr_hq"), the length
                       fixed to ceil(n·16000/rate));
  decode.json          the decode cases.

The features are transformers' _extract_spectrogram evaluated on the float64 waveform (its
default __call__ casts the waveform to float32 first, so numpy's rfft runs in float32, whose
rounding moves log-mel values near the 1e-3 floor by up to ~3e-4 — recorded per signal as
`default_call_max_abs_diff`); the frame mask is the default call's.
"""
from __future__ import annotations

import json
import math
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "golden" / "audio"
SR = 16000
FULL_FRAMES = 50  # clips of at most 0.5 s store every frame; longer ones up to ~40 frames


# ---- signals: integer codes / 32768, made the same way by tests/unit/media/audio_golden_test.cpp

def signal(spec: dict) -> np.ndarray:
    """float32 samples of a signal spec (see SIGNALS); every value is code/32768 exactly."""
    n, kind = spec["samples"], spec["kind"]
    codes = np.zeros(n, dtype=np.int64)
    if kind == "tone":  # sum of sines, amplitude `amp` each: rint(amp·32767·sin(2π f i / 16000))
        for f in spec["freqs"]:
            codes += np.array([round_half_even(spec["amp"] * 32767.0 * math.sin(2.0 * math.pi * f * i / 16000.0))
                               for i in range(n)], dtype=np.int64)
    elif kind == "chirp":  # linear sweep f0 → f1 over the clip
        f0, f1 = spec["f0"], spec["f1"]
        k = (f1 - f0) / (2.0 * (n / 16000.0))
        codes = np.array([round_half_even(spec["amp"] * 32767.0 * math.sin(2.0 * math.pi * (f0 * t + k * t * t)))
                          for t in (i / 16000.0 for i in range(n))], dtype=np.int64)
    elif kind == "noise":  # xorshift32 from `seed`, 14-bit codes centred on 0 (±0.25)
        s = spec["seed"]
        out = []
        for _ in range(n):
            s ^= (s << 13) & 0xFFFFFFFF
            s ^= s >> 17
            s ^= (s << 5) & 0xFFFFFFFF
            out.append(((s >> 18) & 0x3FFF) - 8192)
        codes = np.array(out, dtype=np.int64)
    elif kind != "silence":
        raise ValueError(kind)
    return (codes.astype(np.float64) / 32768.0).astype(np.float32)


def round_half_even(x: float) -> int:
    return int(np.rint(x))


SIGNALS = [
    {"name": "silence_0s1", "kind": "silence", "samples": 1600},
    {"name": "silence_1s", "kind": "silence", "samples": 16000},
    {"name": "tone440_0s1", "kind": "tone", "freqs": [440.0], "amp": 0.5, "samples": 1600},
    {"name": "tone440_1s", "kind": "tone", "freqs": [440.0], "amp": 0.5, "samples": 16000},
    {"name": "tones_2s5", "kind": "tone", "freqs": [1000.0, 3000.0, 7500.0], "amp": 0.3, "samples": 40017},
    {"name": "chirp_3s", "kind": "chirp", "f0": 50.0, "f1": 7950.0, "amp": 0.5, "samples": 48000},
    {"name": "noise_0s5", "kind": "noise", "seed": 12345, "samples": 8000},
    {"name": "noise_161", "kind": "noise", "seed": 7, "samples": 161},
    {"name": "noise_12s", "kind": "noise", "seed": 99, "samples": 192123},
    {"name": "chirp_45s", "kind": "chirp", "f0": 20.0, "f1": 7990.0, "amp": 0.5, "samples": 720000},
    {"name": "noise_45s", "kind": "noise", "seed": 4242, "samples": 720000},
]


def token_lengths() -> list[int]:
    edges = [0, 1, 100, 127, 128, 129, 160, 161, 162, 288, 289, 320, 321, 322, 480, 481, 482, 639, 640, 641,
             800, 801, 1120, 1121, 1600, 1601, 16000, 16001, 24000, 31999, 32000, 32001, 48000, 160000,
             479839, 479840, 479841, 479999, 480000, 480001, 480128, 500000, 720000]
    rng = np.random.default_rng(2026)
    return sorted(set(edges + [int(v) for v in rng.integers(1, 720001, 45)]))


def features_part() -> None:
    import transformers
    from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor
    from transformers.models.gemma4.processing_gemma4 import Gemma4Processor

    fe = Gemma4AudioFeatureExtractor()
    OUT.mkdir(parents=True, exist_ok=True)
    cases = []
    for spec in SIGNALS:
        x = signal(spec)
        cases.append(write_signal(fe, spec["name"], spec, x))
        if len(x) > 480000:  # the second 30 s segment on its own (AudioLayout::kChunk30s)
            cases.append(write_signal(fe, spec["name"] + ".chunk1", dict(spec, segment=[480000, len(x)]), x[480000:]))
    (OUT / "features.json").write_text(json.dumps(
        {"transformers": transformers.__version__, "numpy": np.__version__, "signals": cases}, indent=1) + "\n")

    class Stub:  # what Gemma4Processor's token arithmetic reads from self
        boa_token, eoa_token, audio_token, audio_seq_length = "<a>", "</a>", "@", 750
        feature_extractor = fe

    rows = []
    for n in token_lengths():
        out = fe([np.zeros(n, dtype=np.float32)], return_tensors="np")
        mask = out["input_features_mask"][0]
        placeholder = Gemma4Processor.replace_audio_token(Stub(), {"input_features_mask": [mask]}, 0)
        tokens = placeholder.count("@")
        formula = Gemma4Processor._compute_audio_num_tokens(Stub(), np.zeros(n), SR)
        if formula != tokens:
            print(f"note: n={n}: replace_audio_token {tokens}, _compute_audio_num_tokens {formula}")
        rows.append({"samples": n, "frames": int(mask.shape[0]), "valid_frames": int(mask.sum()), "tokens": tokens,
                     "tokens_formula": int(formula)})
    (OUT / "tokens.json").write_text(json.dumps({"transformers": transformers.__version__, "lengths": rows}) + "\n")


def write_signal(fe, name: str, spec: dict, x: np.ndarray) -> dict:
    """Features of one clip: the default call (mask, and its float32 deviation) and the float64
    evaluation (the values stored)."""
    out = fe([x], return_tensors="np")
    default, mask = out["input_features"][0], out["input_features_mask"][0]
    n = min(len(x), 480000)
    padded = -(-n // 128) * 128
    wave = np.zeros(padded, dtype=np.float64)
    wave[:n] = x[:n]
    attn = np.zeros(padded, dtype=np.int32)
    attn[:n] = 1
    exact, mask64 = fe._extract_spectrogram(wave, attn)
    assert (mask64 == mask).all()
    exact = (exact.astype(np.float32) * mask[:, None]).astype(np.float32)
    frames = exact.shape[0]
    valid = int(mask.sum())
    stride = max(20, frames // 40)
    stored = list(range(frames)) if frames <= FULL_FRAMES else sorted(set(range(0, frames, stride)) | {valid - 1})
    exact[stored].astype("<f4").tofile(OUT / f"{name}.f32")
    exact.astype(np.float64).sum(axis=1).astype("<f4").tofile(OUT / f"{name}.rowsum.f32")
    tokens = ((valid + 1) // 2 + 1) // 2
    print(f"{name}: {frames} frames, {valid} valid, default call within {np.abs(default - exact).max():.2e}")
    return {"name": name, "signal": {k: v for k, v in spec.items() if k != "name"}, "frames": frames,
            "valid_frames": valid, "tokens": tokens, "stored_frames": stored,
            "default_call_max_abs_diff": float(np.abs(default - exact).max())}


# ---- decoding: soundfile writes the files; librosa.load's steps give the expected samples

DECODE_CASES = [
    # name, container, subtype, rate, channels, seconds
    ("wav_u8_8k_mono", "WAV", "PCM_U8", 8000, 1, 0.2),
    ("wav_s16_16k_mono", "WAV", "PCM_16", 16000, 1, 0.2),
    ("wav_s16_44k1_stereo", "WAV", "PCM_16", 44100, 2, 0.1),
    ("wav_s24_48k_stereo", "WAV", "PCM_24", 48000, 2, 0.1),
    ("wav_s32_22k05_mono", "WAV", "PCM_32", 22050, 1, 0.15),
    ("wav_f32_32k_3ch", "WAVEX", "FLOAT", 32000, 3, 0.1),
    ("flac_s16_44k1_stereo", "FLAC", "PCM_16", 44100, 2, 0.2),
    ("flac_s24_96k_mono", "FLAC", "PCM_24", 96000, 1, 0.1),
    ("ogg_vorbis_48k_mono", "OGG", "VORBIS", 48000, 1, 0.3),
    ("ogg_opus_48k_stereo", "OGG", "OPUS", 48000, 2, 0.3),
    ("mp3_44k1_stereo", "MP3", "MPEG_LAYER_III", 44100, 2, 0.3),
    ("mp3_16k_mono", "MP3", "MPEG_LAYER_III", 16000, 1, 0.3),
]
EXT = {"WAV": "wav", "WAVEX": "wav", "FLAC": "flac", "OGG": "ogg", "MP3": "mp3"}


def decode_signal(rate: int, channels: int, seconds: float) -> np.ndarray:
    """[n, channels]: a different tone per channel (300 Hz · (c+1)) plus a 5 kHz tone, ±0.45."""
    t = np.arange(int(round(rate * seconds))) / rate
    cols = [0.3 * np.sin(2 * np.pi * 300.0 * (c + 1) * t) + 0.15 * np.sin(2 * np.pi * 5000.0 * t)
            for c in range(channels)]
    return np.stack(cols, axis=1).astype(np.float32)


def librosa_load_16k(path: pathlib.Path) -> np.ndarray:
    """librosa 0.11's load(path, sr=16000, mono=True), step by step (librosa/core/audio.py)."""
    import soundfile as sf
    import soxr
    with sf.SoundFile(path) as f:
        sr = f.samplerate
        y = f.read(dtype="float32", always_2d=False).T
    if y.ndim > 1:
        y = np.mean(y, axis=tuple(range(y.ndim - 1)))
    if sr == SR:
        return y
    n = int(np.ceil(y.shape[-1] * (float(SR) / sr)))
    y = soxr.resample(y, sr, SR, quality="soxr_hq")
    return y[:n] if len(y) >= n else np.pad(y, (0, n - len(y)))


def decode_part() -> None:
    import soundfile as sf
    import soxr
    d = OUT / "decode"
    d.mkdir(parents=True, exist_ok=True)
    cases = []
    for name, container, subtype, rate, channels, seconds in DECODE_CASES:
        path = d / f"{name}.{EXT[container]}"
        sf.write(path, decode_signal(rate, channels, seconds), rate, format=container, subtype=subtype)
        y = librosa_load_16k(path)
        y.astype("<f4").tofile(d / f"{name}.16k.f32")
        cases.append({"name": name, "file": path.name, "format": EXT[container], "subtype": subtype, "rate": rate,
                      "channels": channels, "samples_16k": int(len(y))})
        print(f"{name}: {path.stat().st_size} bytes, {len(y)} samples at 16 kHz")
    (OUT / "decode.json").write_text(json.dumps(
        {"soundfile": sf.__version__, "libsndfile": sf.__libsndfile_version__, "soxr": soxr.__version__,
         "libsoxr": getattr(soxr, "__libsoxr_version__", "?"), "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    part = sys.argv[1] if len(sys.argv) > 1 else ""
    if part == "features":
        features_part()
    elif part == "decode":
        decode_part()
    else:
        sys.exit("usage: make_audio_golden.py features|decode")
