"""Audio through the API: `sluice serve --mmproj FILE` with an audio tower takes OpenAI
`input_audio` content parts (docs/audio.md), on the tiny Gemma 4 with the tiny audio tower. The
tiny vocabulary has no audio markers, so the tests serve a copy with the golden's marker ids
renamed to them (test_cli_audio.with_audio_markers).

- An audio request's first-token logprobs equal `sluice logits --audio` on the rendered prompt's
  ids (the CLI's logits are golden-tested against transformers), and its greedy tokens equal
  `sluice run --chat --audio`.
- The prefix cache keys audio positions by the clip: a repeated clip reuses its K/V, another
  clip of the same length in the same place does not.
- Every bad input is a 400 naming the part; a server without an audio tower says so."""
import base64
import io
import json
import re
import struct
import wave

import numpy as np
import pytest

from conftest import ROOT, run
from image_util import with_image_markers
from server_util import Server, assert_clean_exit
from test_cli_audio import with_audio_markers, write_gguf
from test_server_images import post

GOLDEN = ROOT / "tests/data/golden"
TINY4 = GOLDEN / "tiny-gemma4.f32.gguf"
MMPROJ = GOLDEN / "tiny-audio-e.mmproj.f32.gguf"
CLI_GOLDEN = GOLDEN / "audio/cli"
META = json.loads((CLI_GOLDEN / "cli.json").read_text())
CLIP = CLI_GOLDEN / META["wav"]
PLACEHOLDER = META["markers"]["audio_token_id"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return with_audio_markers(TINY4, tmp_path_factory.mktemp("audio") / "tiny-gemma4-audio.gguf", META["markers"])


@pytest.fixture(scope="module")
def server(sluice_bin, model):
    s = Server(sluice_bin, model, "-c", 256, "--parallel", 2, "--mmproj", MMPROJ, "--no-tune", "--max-audio", "200K")
    yield s
    assert_clean_exit(s)


def wav_bytes(samples, rate=16000, channels=1):
    """16-bit PCM WAV of `samples` (floats in [-1, 1], repeated over the channels)."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat((np.asarray(samples) * 32767).astype("<i2"), channels).tobytes())
    return buf.getvalue()


def tone(seconds, hz, rate=16000):
    t = np.arange(int(seconds * rate)) / rate
    return 0.3 * np.sin(2 * np.pi * hz * t)


def audio_part(raw, fmt="wav"):
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(raw).decode(), "format": fmt}}


def chat(parts, **kw):
    body = {"model": "tiny-gemma4", "messages": [{"role": "user", "content": parts}], "max_tokens": 6, "temperature": 0}
    body.update(kw)
    return body


def test_the_model_says_it_hears(server):
    assert json.loads(server.get("/v1/models"))["data"][0]["modalities"] == ["text", "audio"]
    assert json.loads(server.get("/props"))["modalities"] == {"vision": False, "audio": True}


def test_api_logprobs_equal_sluice_logits(server, sluice_bin, model, tmp_path):
    """The first answer token's top logprobs through the API equal the log-softmax of the last
    row of `sluice logits --mmproj --audio` on the same prompt ids."""
    body = chat([{"type": "text", "text": "Listen"}, audio_part(CLIP.read_bytes()),
                 {"type": "text", "text": "what?"}], max_tokens=1, logprobs=True, top_logprobs=5)
    status, t = post(server, "/apply-template", body)
    assert status == 200, t
    status, ids = post(server, "/tokenize", {"content": t["prompt"], "add_special": False})
    assert status == 200 and ids["tokens"].count(PLACEHOLDER) == 1, ids
    out = tmp_path / "logits.f32"
    cli = run([sluice_bin, "logits", "-m", model, "--mmproj", MMPROJ, "--audio", CLIP, "--ids",
               ",".join(map(str, ids["tokens"])), "--out", out, "--kv-type", "f16", "--no-tune"], timeout=120)
    assert cli.returncode == 0, cli.stderr
    rows = np.fromfile(out, dtype=np.float32).reshape(-1, 512)
    status, r = post(server, "/v1/chat/completions", body)
    assert status == 200, r
    assert r["usage"]["prompt_tokens"] == rows.shape[0] == len(ids["tokens"]) + META["audio_tokens"] + 1
    assert_top_logprobs_match(r["choices"][0]["logprobs"]["content"][0]["top_logprobs"], rows[-1])


def test_api_tokens_equal_sluice_run(server, sluice_bin, model):
    status, r = post(server, "/v1/chat/completions",
                     chat([{"type": "text", "text": "Listen"}, audio_part(CLIP.read_bytes()),
                           {"type": "text", "text": "what?"}], max_tokens=8))
    assert status == 200, r
    cli = run([sluice_bin, "run", "-m", model, "--mmproj", MMPROJ, "--audio", CLIP, "--chat", "-p",
               "Listen<|audio|>what?", "--temp", "0", "-n", "8", "--no-tune"], timeout=120)
    assert cli.returncode == 0, cli.stderr
    n_prompt = int(re.search(r"\[prompt: (\d+) tokens", cli.stderr).group(1))
    assert r["usage"]["prompt_tokens"] == n_prompt
    assert r["choices"][0]["message"]["content"] == cli.stdout.rstrip("\n")


def first_logprobs(server, raw, preamble="A preamble long enough that whole blocks precede the clip."):
    body = chat([{"type": "text", "text": preamble}, audio_part(raw), {"type": "text", "text": "What was that?"}],
                max_tokens=1, logprobs=True, top_logprobs=5)
    status, r = post(server, "/v1/chat/completions", body)
    assert status == 200, r
    lp = [(t["token"], round(t["logprob"], 4)) for t in r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]
    return lp, r["usage"]["prompt_tokens_details"]["cached_tokens"], r["usage"]["prompt_tokens"]


def test_prefix_cache_keys_audio_by_the_clip(sluice_bin, model):
    """Two clips of one length expand to the same placeholder ids. A repeated clip reuses its
    K/V; the other clip in the same place does not (its answer equals a fresh server's)."""
    low, high = wav_bytes(tone(1.0, 220)), wav_bytes(tone(1.0, 3000))
    fresh = Server(sluice_bin, model, "-c", 256, "--mmproj", MMPROJ, "--no-tune", "--no-prefix-cache")
    try:
        want_high = first_logprobs(fresh, high)[0]
    finally:
        assert_clean_exit(fresh)
    s = Server(sluice_bin, model, "-c", 256, "--mmproj", MMPROJ, "--no-tune")
    try:
        low1, cached, n = first_logprobs(s, low)
        assert cached == 0
        low2, cached, _ = first_logprobs(s, low)
        assert low2 == low1 and cached >= n - 16, (cached, n)  # all but the last partial block
        high1, cached, n2 = first_logprobs(s, high)
        assert n2 == n
        assert high1 == want_high, "the second clip's answer used the first clip's K/V"
        assert high1 != low1
        assert 0 < cached < n - 25, (cached, n)  # the text before the clip only
    finally:
        assert_clean_exit(s)


def wav_header(rate, channels):
    """A PCM16 WAV header claiming `rate` and `channels`, with a few silent frames."""
    data = bytes(2 * channels * 10)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * 2, channels * 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


GOOD = wav_bytes(tone(0.5, 440))
BAD = [
    ("bad base64", {"type": "input_audio", "input_audio": {"data": "UklG*kYA", "format": "wav"}},
     "the audio's base64 data has an invalid character at offset 4"),
    ("base64 length", {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}}, "bad length"),
    ("unknown format", audio_part(GOOD, "aac"), "input_audio.format 'aac' is not one sluice decodes"),
    ("no format", {"type": "input_audio", "input_audio": {"data": "UklGRg=="}}, "input_audio.format must be"),
    ("no data", {"type": "input_audio", "input_audio": {"format": "wav"}}, "input_audio.data must be"),
    ("no object", {"type": "input_audio"}, "needs an 'input_audio' object"),
    ("empty", audio_part(b""), "the audio's data is empty"),
    ("truncated", audio_part(GOOD[:30]), "cannot read the wav audio"),
    ("corrupt", audio_part(b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunkjunk"), "the audio"),
    ("not audio", audio_part(b"these are not samples\n" * 10), "not a supported audio format"),
    ("wrong format", audio_part(GOOD, "mp3"), "the audio is wav data, not the declared 'mp3'"),
    ("no samples", audio_part(wav_bytes([])), "no samples"),
    ("too short", audio_part(wav_bytes(tone(0.005, 440))), "too short to give a single audio token"),
    ("absurd rate", audio_part(wav_header(10_000_000, 1)), "sample rate"),
    ("absurd channels", audio_part(wav_header(16000, 1000)), "channels"),
    ("oversized", audio_part(wav_bytes(tone(8.0, 440))), "over the limit of 204800 (serve --max-audio)"),
]


@pytest.mark.parametrize("name,part,why", BAD, ids=[b[0] for b in BAD])
def test_bad_audio_parts_are_400_naming_the_part(server, name, part, why):
    status, r = post(server, "/v1/chat/completions", chat([{"type": "text", "text": "hi"}, part]))
    assert status == 400, r
    msg = r["error"]["message"]
    assert msg.startswith("messages[0].content[1]: "), msg
    assert why in msg, msg


def test_audio_past_the_context(server):
    status, r = post(server, "/v1/chat/completions", chat([audio_part(wav_bytes(tone(6.0, 440)))]))  # 150 tokens
    assert status == 200, r
    status, r = post(server, "/v1/chat/completions",
                     chat([audio_part(wav_bytes(tone(6.0, 440))), audio_part(wav_bytes(tone(6.0, 880)))]))
    assert status == 400 and r["error"]["code"] == "context_length_exceeded", r
    assert "with messages[0].content[1]" in r["error"]["message"], r


def test_the_render_endpoint_refuses_audio(server):
    status, r = post(server, "/v1/chat/completions/render", chat([audio_part(GOOD)]))
    assert status == 400 and "audio parts are not rendered by this endpoint" in r["error"]["message"], r


def test_audio_only_in_user_messages_and_once_each(server):
    body = {"model": "tiny-gemma4", "temperature": 0, "max_tokens": 2, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": [audio_part(GOOD)]},
        {"role": "user", "content": "and?"}]}
    status, r = post(server, "/v1/chat/completions", body)
    assert status == 400 and "messages[1].content[0]: audio parts are only allowed in user messages" in \
        r["error"]["message"], r
    status, r = post(server, "/v1/chat/completions", chat([{"type": "text", "text": "<|audio|>"}, audio_part(GOOD)]))
    assert status == 400 and "2 audio placeholders for 1 clips" in r["error"]["message"], r


def test_a_server_without_an_audio_tower_refuses_audio(sluice_bin, model):
    s = Server(sluice_bin, model, "-c", 256, "--no-tune")
    try:
        assert json.loads(s.get("/v1/models"))["data"][0]["modalities"] == ["text"]
        assert json.loads(s.get("/props"))["modalities"]["audio"] is False
        status, r = post(s, "/v1/chat/completions", chat([{"type": "text", "text": "hi"}, audio_part(GOOD)]))
        assert status == 400, r
        assert r["error"]["message"].startswith("messages[0].content[1]: audio is not supported by this model"), r
    finally:
        assert_clean_exit(s)


def merged_mmproj(dst):
    """One mmproj with both tiny towers (as convert_hf_to_gguf.py --mmproj writes an E2B's): the
    vision file's keys and tensors plus the audio file's own."""
    import gguf
    v = gguf.GGUFReader(str(GOLDEN / "tiny-vision-e.mmproj.f32.gguf"))
    a = gguf.GGUFReader(str(MMPROJ))
    return write_gguf(dst, "clip", [(v, lambda f: f.contents()), (a, lambda f: f.contents())])


def assert_top_logprobs_match(top, logits_row):
    """The API's top logprobs against the log-softmax of the CLI's logits row: same order, 1e-4."""
    last = logits_row.astype(np.float64)
    logp = last - last.max() - np.log(np.exp(last - last.max()).sum())
    want = np.argsort(-logp)[:len(top)]
    for got, w in zip(top, want):
        assert abs(got["logprob"] - logp[w]) < 1e-4, (top, logp[want])


def test_images_and_audio_in_one_request_equal_sluice_logits(sluice_bin, tmp_path):
    """An image and a clip in one message, through a server whose mmproj has both towers: the
    first token's logprobs equal `sluice logits --image --audio` on the same ids (the images'
    rows first, then the clip's, each at its placeholder)."""
    audio_model = with_audio_markers(TINY4, tmp_path / "audio.gguf", META["markers"])
    both = with_image_markers(audio_model, tmp_path / "both-markers.gguf")
    mmproj = merged_mmproj(tmp_path / "both.mmproj.gguf")
    png = GOLDEN / "vision/decode/png_rgb.png"
    # The clip before the image: the image's positions move by the clip's expansion.
    body = chat([{"type": "text", "text": "Listen"}, audio_part(CLIP.read_bytes()), {"type": "text", "text": "and look"},
                 {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(
                     png.read_bytes()).decode(), "detail": "low"}},
                 {"type": "text", "text": "what?"}], max_tokens=1, logprobs=True, top_logprobs=5)
    s = Server(sluice_bin, both, "-c", 512, "--mmproj", mmproj, "--no-tune")
    try:
        assert json.loads(s.get("/props"))["modalities"]["audio"] is True
        assert json.loads(s.get("/props"))["modalities"]["vision"] is True
        status, t = post(s, "/apply-template", body)
        status, ids = post(s, "/tokenize", {"content": t["prompt"], "add_special": False})
        status, got = post(s, "/v1/chat/completions", body)
        assert status == 200, got
    finally:
        assert_clean_exit(s)
    out = tmp_path / "logits.f32"
    cli = run([sluice_bin, "logits", "-m", both, "--mmproj", mmproj, "--image", png, "--image-tokens", "70",
               "--audio", CLIP, "--ids", ",".join(map(str, ids["tokens"])), "--out", out, "--kv-type", "f16",
               "--no-tune"], timeout=120)
    assert cli.returncode == 0, cli.stderr
    rows = np.fromfile(out, dtype=np.float32).reshape(-1, 512)
    assert got["usage"]["prompt_tokens"] == rows.shape[0]
    assert_top_logprobs_match(got["choices"][0]["logprobs"]["content"][0]["top_logprobs"], rows[-1])
