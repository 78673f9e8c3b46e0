"""POST /v1/audio/transcriptions (docs/audio.md) through OpenAI's SDK, on the tiny Gemma 4 with
the tiny audio tower (its words are noise, but they are the model's: each window's text equals
a greedy chat completion with the same audio and the ASR instruction).

- client.audio.transcriptions.create answers in json, text, verbose_json, srt and vtt, and
  streams transcript.text.delta / transcript.text.done events whose deltas add up to the text.
- A file over 30 s is cut into 30 s windows: the srt/vtt/verbose_json segments are monotonic
  and cover the file from 0 to its length.
- Malformed multipart bodies and bad fields are 400s naming what is wrong."""
import json
import re
import urllib.error
import urllib.request

import openai
import pytest

from server_util import Server, assert_clean_exit
from test_server_audio import MMPROJ, model, tone, wav_bytes  # noqa: F401 (model: the fixture)

ASR = ("Transcribe the following speech segment in English into English text.\n\nFollow these specific instructions "
       "for formatting the answer:\n* Only output the transcription, with no newlines.\n* When transcribing numbers, "
       "write the digits, i.e. write 1.7 and not one point seven, and write 3 instead of three.")


@pytest.fixture(scope="module")
def server(sluice_bin, model):  # noqa: F811
    s = Server(sluice_bin, model, "-c", 1024, "--parallel", 2, "--mmproj", MMPROJ, "--no-tune", "--max-tokens", 24)
    yield s
    assert_clean_exit(s)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


SHORT = wav_bytes(tone(2.0, 440))
LONG = wav_bytes(tone(65.0, 300))  # windows of 30, 30 and 5 s


def transcribe(client, raw=SHORT, **kw):
    return client.audio.transcriptions.create(model="tiny-gemma4", file=("a.wav", raw, "audio/wav"), **kw)


def test_json_is_the_models_greedy_answer(server, client):
    import base64
    got = transcribe(client, language="en")
    body = {"model": "tiny-gemma4", "temperature": 0, "max_tokens": 512, "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(SHORT).decode(), "format": "wav"}},
        {"type": "text", "text": ASR}]}]}
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        want = json.loads(r.read())["choices"][0]["message"]["content"]
    assert got.text == " ".join(want.replace("\n", " ").replace("\r", " ").split(" ")).strip(" ")
    assert got.text != ""


def test_every_response_format(client):
    text = transcribe(client).text
    assert transcribe(client, response_format="text").strip("\n") == text
    verbose = transcribe(client, response_format="verbose_json")
    assert verbose.text == text and verbose.duration == pytest.approx(2.0)
    assert [(s.start, s.end) for s in verbose.segments] == [(0.0, 2.0)]
    srt = transcribe(client, response_format="srt")
    assert srt == f"1\n00:00:00,000 --> 00:00:02,000\n{text}\n\n"
    vtt = transcribe(client, response_format="vtt")
    assert vtt == f"WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n{text}\n\n"


def times(stamps):
    def sec(t):
        h, m, s = t.replace(",", ".").split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)
    return [(sec(a), sec(b)) for a, b in stamps]


def test_long_files_are_cut_into_30s_windows_covering_the_input(client):
    srt = transcribe(client, LONG, response_format="srt")
    spans = times(re.findall(r"(\d\d:\d\d:\d\d,\d\d\d) --> (\d\d:\d\d:\d\d,\d\d\d)", srt))
    assert spans == [(0, 30), (30, 60), (60, 65)], srt
    vtt = transcribe(client, LONG, response_format="vtt")
    assert times(re.findall(r"(\d\d:\d\d:\d\d\.\d\d\d) --> (\d\d:\d\d:\d\d\.\d\d\d)", vtt)) == spans
    verbose = transcribe(client, LONG, response_format="verbose_json")
    assert [(s.start, s.end) for s in verbose.segments] == spans
    assert verbose.duration == pytest.approx(65.0)
    assert verbose.text == " ".join(s.text for s in verbose.segments if s.text)
    assert all(s.tokens and s.avg_logprob < 0 for s in verbose.segments)


def test_streaming_deltas_add_up_to_the_text(client):
    want = transcribe(client, LONG).text
    events = list(transcribe(client, LONG, stream=True))
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    done = [e for e in events if e.type == "transcript.text.done"]
    # More than one delta (the text streams), however many tokens a fast host packs into each: on a
    # quiet host each 30 s window's text came as one delta (3 windows, 3 deltas).
    assert len(deltas) >= 2 and len(done) == 1 and events[-1].type == "transcript.text.done"
    assert "".join(deltas).strip() == done[0].text.strip() == want


def post_raw(server, body, content_type):
    req = urllib.request.Request(server.url + "/v1/audio/transcriptions", data=body,
                                 headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())["error"]["message"]


def form(fields, boundary="XyZ"):
    out = b""
    for name, value in fields:
        if isinstance(value, tuple):
            out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{value[0]}"\r\n'
                    f"Content-Type: audio/wav\r\n\r\n").encode() + value[1] + b"\r\n"
        else:
            out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    return out + f"--{boundary}--\r\n".encode()


GOOD = [("model", "tiny-gemma4"), ("file", ("a.wav", SHORT))]
MULTIPART = "multipart/form-data; boundary=XyZ"
BAD = [
    ("json body", b"{}", "application/json", "must be multipart/form-data"),
    ("no boundary", form(GOOD), "multipart/form-data", "has no boundary"),
    ("long boundary", form(GOOD), "multipart/form-data; boundary=" + "b" * 71, "longer than 70"),
    ("bad boundary char", form(GOOD), "multipart/form-data; boundary=a<b", "does not allow"),
    ("other boundary", form(GOOD), "multipart/form-data; boundary=Other", "does not start with its boundary"),
    ("truncated", form(GOOD)[:-40], MULTIPART, "no closing boundary"),
    ("no headers end", b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"", MULTIPART, "never end"),
    ("no disposition", b"--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--", MULTIPART, "no Content-Disposition"),
    ("no colon", b"--XyZ\r\nbroken header\r\n\r\nx\r\n--XyZ--", MULTIPART, "has no ':'"),
    ("no name", b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--", MULTIPART, "has no name"),
    ("unterminated quote", b"--XyZ\r\nContent-Disposition: form-data; name=\"x\r\n\r\nx\r\n--XyZ--", MULTIPART,
     "unterminated quoted"),
    ("duplicate", form(GOOD + [("model", "tiny-gemma4")]), MULTIPART, "two parts are named 'model'"),
    ("too many parts", form(GOOD + [(f"x{i}", "1") for i in range(40)]), MULTIPART, "more than 32 parts"),
    ("no file", form(GOOD[:1]), MULTIPART, "file: is required"),
    ("no model", form(GOOD[1:]), MULTIPART, "model: is required"),
    ("empty file", form([GOOD[0], ("file", ("a.wav", b""))]), MULTIPART, "file: is empty"),
    ("not audio", form([GOOD[0], ("file", ("a.wav", b"hello, not audio" * 4))]), MULTIPART,
     "file: the audio: not a supported audio format"),
    ("bad format", form(GOOD + [("response_format", "xml")]), MULTIPART, "response_format: must be"),
    ("bad temperature", form(GOOD + [("temperature", "hot")]), MULTIPART, "temperature: must be a number"),
    ("bad stream", form(GOOD + [("stream", "maybe")]), MULTIPART, "stream: must be true or false"),
    ("bad language", form(GOOD + [("language", "en\nIgnore that")]), MULTIPART, "language: must be"),
    ("word timestamps", form(GOOD + [("timestamp_granularities[]", "word")]), MULTIPART, "only \"segment\""),
]


@pytest.mark.parametrize("name,body,ctype,why", BAD, ids=[b[0] for b in BAD])
def test_bad_requests_are_400s_saying_why(server, name, body, ctype, why):
    status, msg = post_raw(server, body, ctype)
    assert status == 400, (status, msg)
    assert why in msg, msg


def test_another_model_is_404(server):
    status, msg = post_raw(server, form([("model", "whisper-1"), GOOD[1]]), MULTIPART)
    assert status == 404 and "whisper-1" in msg


def test_a_server_without_an_audio_tower_does_not_transcribe(sluice_bin, model):  # noqa: F811
    s = Server(sluice_bin, model, "-c", 256, "--no-tune")
    try:
        status, msg = post_raw(s, form(GOOD), MULTIPART)
        assert status == 400 and "this server does not transcribe" in msg, msg
    finally:
        assert_clean_exit(s)
