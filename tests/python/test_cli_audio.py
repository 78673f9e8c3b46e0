"""`sluice run/chat/logits --mmproj FILE --audio PATH`: a WAV clip through the CLI gives the
logits transformers computes for it (tests/data/golden/audio/cli, python/make_cli_audio_golden.py:
the file through Gemma4AudioFeatureExtractor and Gemma4ForConditionalGeneration); every way the
files can be wrong is a clear error naming the file or the flag, never a crash."""
import json
import wave

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from conftest import ROOT, run

GOLDEN = ROOT / "tests/data/golden"
MODEL = GOLDEN / "tiny-gemma4.f32.gguf"
MMPROJ = GOLDEN / "tiny-audio-e.mmproj.f32.gguf"
VISION = GOLDEN / "tiny-vision-e.mmproj.f32.gguf"
CLI_GOLDEN = GOLDEN / "audio/cli"


def write_gguf(dst, arch, readers):
    """A GGUF at `dst` with the keys and tensors of each (reader, edit) in `readers`, in order:
    edit(field) gives the value to write or None to leave the key out. A key already written is
    not written again."""
    w = GGUFWriter(str(dst), arch)
    seen = {"general.architecture"}
    for r, edit in readers:
        for f in r.fields.values():
            if f.name.startswith("GGUF.") or f.name in seen:
                continue
            val = edit(f)
            if val is None:
                continue
            seen.add(f.name)
            sub = f.types[-1] if f.types[0] == GGUFValueType.ARRAY else None
            w.add_key_value(f.name, val, f.types[0], sub_type=sub)
    for r, _ in readers:
        for t in r.tensors:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def with_audio_markers(src, dst, markers):
    """A copy of the GGUF `src` whose tokens at the golden's marker ids are Gemma 4's audio
    markers (control tokens): the tiny vocabulary has none, and the golden prompt uses those ids."""
    r = GGUFReader(src)
    names = {markers["audio_token_id"]: "<|audio|>", markers["boa_token_id"]: "<|audio>",
             markers["eoa_token_index"]: "<audio|>"}

    def edit(f):
        val = f.contents()
        if f.name == "tokenizer.ggml.tokens":
            return [names.get(i, t) for i, t in enumerate(val)]
        if f.name == "tokenizer.ggml.token_type":
            return [3 if i in names else t for i, t in enumerate(val)]
        return val
    return write_gguf(dst, r.fields["general.architecture"].contents(), [(r, edit)])


def test_cli_logits_with_a_clip_equal_transformers(sluice_bin, tmp_path):
    meta = json.loads((CLI_GOLDEN / "cli.json").read_text())
    model = with_audio_markers(MODEL, tmp_path / "tiny-gemma4-audio-vocab.gguf", meta["markers"])
    out = tmp_path / "logits.f32"
    r = run([sluice_bin, "logits", "-m", model, "--mmproj", MMPROJ, "--audio", CLI_GOLDEN / meta["wav"], "--ids",
             ",".join(map(str, meta["prompt"])), "--out", out], timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{meta['audio_tokens']} tokens" in r.stderr, r.stderr
    want = np.fromfile(CLI_GOLDEN / meta["logits"], dtype="<f4").reshape(len(meta["expanded"]), meta["n_vocab"])
    got = np.fromfile(out, dtype="<f4")
    assert got.size == want.size, (got.size, want.shape)
    got = got.reshape(want.shape)
    err = float(np.abs(got - want).max())
    print(f"max |logit - transformers| = {err:.3g} over {want.shape}")
    assert err < 1e-4, err


def write_wav(path, n_samples, rate=16000, channels=1):
    t = np.arange(n_samples) / rate
    x = (0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(x, channels).tobytes())
    return path


def sluice_fails(sluice_bin, *args, cmd="run"):
    r = run([sluice_bin, cmd, "-p", "hi", "-n", "1", *map(str, args)], timeout=120)
    assert r.returncode != 0, r.stdout
    assert "error" in r.stderr and "Segmentation" not in r.stderr and "terminate" not in r.stderr, r.stderr
    return r.stderr


def test_audio_needs_an_mmproj_with_an_audio_tower(sluice_bin, tmp_path):
    wav = write_wav(tmp_path / "a.wav", 16000)
    assert "--audio needs --mmproj" in sluice_fails(sluice_bin, "-m", MODEL, "--audio", wav)
    err = sluice_fails(sluice_bin, "-m", MODEL, "--mmproj", VISION, "--audio", wav)
    assert f"{VISION} has no audio tower" in err, err
    assert "not an mmproj file" in sluice_fails(sluice_bin, "-m", MODEL, "--mmproj", GOLDEN / "tiny-gemma3.f32.gguf",
                                                "--audio", wav)
    err = sluice_fails(sluice_bin, "-m", GOLDEN / "tiny-gemma4-draft.f32.gguf", "--mmproj", MMPROJ, "--audio", wav)
    assert "outputs width 64 but the model's embedding width is 32" in err, err
    assert "feeds Gemma 4 models" in sluice_fails(sluice_bin, "-m", GOLDEN / "tiny-gemma3.f32.gguf", "--mmproj",
                                                  MMPROJ, "--audio", wav)


def test_run_and_chat_hear_a_clip(sluice_bin, tmp_path):
    """The same clip through `run` (markers put in front of the text) and `chat` (in the first
    turn), greedy: both finish and say how many tokens the clip gave."""
    meta = json.loads((CLI_GOLDEN / "cli.json").read_text())
    model = with_audio_markers(MODEL, tmp_path / "tiny-gemma4-audio-vocab.gguf", meta["markers"])
    clip = CLI_GOLDEN / meta["wav"]
    media = ["-m", model, "--mmproj", MMPROJ, "--audio", clip, "--temp", "0", "-n", "3"]
    r = run([sluice_bin, "run", "-p", "hi", *media], timeout=120)
    assert r.returncode == 0 and f"audio {clip}: wav, 16000 Hz, 1 channel, 1.30 s, 33 tokens" in r.stderr, r.stderr
    r = run([sluice_bin, "chat", "--builtin-template", *media], timeout=120, input="hi\nand again\n")
    assert r.returncode == 0 and r.stderr.count("33 tokens") == 1, r.stderr


def test_an_image_with_an_audio_only_mmproj_is_named(sluice_bin, tmp_path):
    png = GOLDEN / "vision/decode/png_rgb.png"
    err = sluice_fails(sluice_bin, "-m", MODEL, "--mmproj", MMPROJ, "--image", png)
    assert f"{MMPROJ} has no vision tower" in err, err


def test_bad_audio_files_are_named(sluice_bin, tmp_path):
    good = write_wav(tmp_path / "good.wav", 16000)
    cut = tmp_path / "cut.wav"
    cut.write_bytes(good.read_bytes()[:30])
    text = tmp_path / "notes.wav"
    text.write_text("these are not samples\n" * 10)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    silent = write_wav(tmp_path / "zero.wav", 0)
    short = write_wav(tmp_path / "short.wav", 100)
    cases = ((tmp_path / "none.wav", "cannot open"), (cut, "cannot read the wav audio"), (text, "not a supported audio format"),
             (empty, "empty"), (silent, "no samples"), (short, "too short to give a single audio token"))
    for path, why in cases:
        err = sluice_fails(sluice_bin, "-m", MODEL, "--mmproj", MMPROJ, "--audio", good, "--audio", path)
        assert str(path) in err and why in err, (path, err)


def test_a_vocabulary_without_audio_markers_is_named(sluice_bin, tmp_path):
    wav = write_wav(tmp_path / "a.wav", 8000, rate=8000, channels=2)
    r = run([sluice_bin, "run", "-p", "hi", "-n", "1", "-m", str(MODEL), "--mmproj", str(MMPROJ), "--audio",
             str(wav)], timeout=120)
    assert r.returncode != 0
    # the clip was decoded, resampled, featurised and encoded before the vocabulary was asked
    assert f"audio {wav}: wav, 8000 Hz, 2 channels, 1.00 s, 25 tokens" in r.stderr, r.stderr
    assert "has no '<|audio|>' token: audio needs a Gemma 4 E2B/E4B model" in r.stderr, r.stderr


def test_audio_past_the_context_names_the_clip(sluice_bin, tmp_path):
    wav = write_wav(tmp_path / "long.wav", 32000)  # 2 s: 50 tokens
    err = sluice_fails(sluice_bin, "-m", MODEL, "--mmproj", MMPROJ, "--audio", wav, "--ctx-size", "40")
    assert f"the prompt with audio {wav} (50 tokens) is" in err and "past the context of 40" in err, err


def test_chat_takes_audio_too(sluice_bin, tmp_path):
    wav = tmp_path / "missing.wav"
    r = run([sluice_bin, "chat", "-m", str(MODEL), "--builtin-template", "--mmproj", str(MMPROJ), "--audio", str(wav)],
            timeout=120, input="hello\n")
    assert r.returncode != 0 and str(wav) in r.stderr and "cannot open" in r.stderr, r.stderr


def test_audio_chunks_hear_a_long_clip_whole(sluice_bin, tmp_path):
    """--audio-chunks: a 45 s clip gives 750 + 375 tokens (two 30 s segments encoded on their own)
    where transformers' truncation gives 750. The decoder is causal and the first segment is the
    first 30 s, so every logits row up to the end of the first segment's tokens equals the
    truncated run's; after it the rows differ (the second segment is heard)."""
    meta = json.loads((CLI_GOLDEN / "cli.json").read_text())
    model = with_audio_markers(MODEL, tmp_path / "tiny-gemma4-audio-vocab.gguf", meta["markers"])
    t = np.arange(45 * 16000) / 16000
    x = 0.3 * np.sin(2 * np.pi * (200 + 20 * t) * t)
    wav = tmp_path / "long.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    ids = ",".join(map(str, meta["prompt"]))
    rows = {}
    for flag in ([], ["--audio-chunks"]):
        out = tmp_path / f"logits{len(flag)}.f32"
        r = run([sluice_bin, "logits", "-m", model, "--mmproj", MMPROJ, "--audio", wav, *flag, "--ids", ids,
                 "--out", out, "--no-tune"], timeout=300)
        assert r.returncode == 0, r.stderr
        rows[len(flag)] = np.fromfile(out, dtype="<f4").reshape(-1, meta["n_vocab"])
    assert "45.00 s (in 2 segments of 30 s), 1125 tokens" in r.stderr, r.stderr
    first, chunked = rows[0], rows[1]
    assert chunked.shape[0] == first.shape[0] + 375
    upto = meta["prompt"].index(meta["markers"]["audio_token_id"]) + 1 + 750  # <|audio> and the first segment
    assert np.array_equal(first[:upto], chunked[:upto])
    assert np.abs(first[upto:upto + 5] - chunked[upto:upto + 5]).max() > 1e-3
