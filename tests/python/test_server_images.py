"""Images through the API: `sluice serve --mmproj FILE` takes OpenAI `image_url` content parts
(docs/images.md), on the tiny Gemma 4 with the tiny E-variant vision tower. The tiny
vocabulary has no image markers, so the tests serve a copy with three unused tokens renamed
to them (same weights).

- An image request's greedy tokens equal `sluice run --chat --mmproj --image` on the same
  prompt and image; the image changes the logprobs, the same image gives the same ones.
- Every bad input is a 400 naming the part; a model without --mmproj says so; a mismatched
  mmproj stops `serve` at start-up with a clear error."""
import base64
import http.server
import json
import re
import struct
import threading
import time
import urllib.error
import urllib.request
import zlib

import pytest

from conftest import ROOT, run
from image_util import png_chunk, with_image_markers
from server_util import Server, assert_clean_exit

GOLDEN = ROOT / "tests/data/golden"
TINY4 = GOLDEN / "tiny-gemma4.f32.gguf"
MMPROJ = GOLDEN / "tiny-vision-e.mmproj.f32.gguf"
DECODE = GOLDEN / "vision/decode"
PNG = DECODE / "png_rgb.png"
JPEG = DECODE / "jpeg_420.jpg"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """tiny-gemma4 with the three image markers in its vocabulary (control tokens)."""
    return with_image_markers(TINY4, tmp_path_factory.mktemp("images") / "tiny-gemma4-markers.gguf")


@pytest.fixture(scope="module")
def server(sluice_bin, model):
    s = Server(sluice_bin, model, "-c", 512, "--parallel", 2, "--mmproj", MMPROJ, "--no-tune")
    yield s
    assert_clean_exit(s)


def post(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())


def data_url(path_or_bytes, mime="image/png"):
    raw = path_or_bytes if isinstance(path_or_bytes, bytes) else path_or_bytes.read_bytes()
    return f"data:{mime};base64," + base64.b64encode(raw).decode()


def image_part(url, detail="low"):
    return {"type": "image_url", "image_url": {"url": url, "detail": detail}}


def chat(parts, **kw):
    body = {"model": "tiny-gemma4", "messages": [{"role": "user", "content": parts}], "max_tokens": 6,
            "temperature": 0}
    body.update(kw)
    return body


def png_header_only(width, height):
    """A PNG whose IHDR claims width×height (valid CRC), with one empty IDAT."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(b"")) +
            png_chunk(b"IEND", b""))


def test_the_model_says_it_takes_images(server):
    models = json.loads(server.get("/v1/models"))["data"][0]
    assert models["modalities"] == ["text", "image"]
    props = json.loads(server.get("/props"))
    assert props["modalities"] == {"vision": True, "audio": False, "image_tokens": 280}


def test_api_tokens_equal_sluice_run(server, sluice_bin, model):
    """The same prompt and image through the API and through `sluice run --chat`: the same
    prompt length and the same greedy tokens."""
    status, r = post(server, "/v1/chat/completions",
                     chat([{"type": "text", "text": "Look"}, image_part(data_url(PNG)),
                           {"type": "text", "text": "what?"}], max_tokens=8))
    assert status == 200, r
    cli = run([sluice_bin, "run", "-m", model, "--mmproj", MMPROJ, "--image", PNG, "--image-tokens", "70", "--chat",
               "-p", "Look\n\n<|image|>\n\nwhat?", "--temp", "0", "-n", "8", "--no-tune"], timeout=120)
    assert cli.returncode == 0, cli.stderr
    n_prompt = int(re.search(r"\[prompt: (\d+) tokens", cli.stderr).group(1))
    assert r["usage"]["prompt_tokens"] == n_prompt
    assert r["choices"][0]["message"]["content"] == cli.stdout.rstrip("\n")
    assert int(re.search(r"-> \d+x\d+, (\d+) tokens", cli.stderr).group(1)) <= 70


def test_api_logprobs_equal_sluice_logits(server, sluice_bin, model, tmp_path):
    """The first answer token's top logprobs through the API equal the log-softmax of the last
    row of `sluice logits --mmproj --image` on the same prompt ids (the placeholder's id where
    the template put the image)."""
    import numpy as np
    body = chat([{"type": "text", "text": "Look"}, image_part(data_url(JPEG, "image/jpeg")),
                 {"type": "text", "text": "what?"}], max_tokens=1, logprobs=True, top_logprobs=5)
    status, t = post(server, "/apply-template", body)
    assert status == 200, t
    status, ids = post(server, "/tokenize", {"content": t["prompt"], "add_special": False})
    assert status == 200 and ids["tokens"].count(510) == 1, ids
    out = tmp_path / "logits.f32"
    cli = run([sluice_bin, "logits", "-m", model, "--mmproj", MMPROJ, "--image", JPEG, "--image-tokens", "70",
               "--ids", ",".join(map(str, ids["tokens"])), "--out", out, "--kv-type", "f16", "--no-tune"], timeout=120)
    assert cli.returncode == 0, cli.stderr
    last = np.fromfile(out, dtype=np.float32).reshape(-1, 512)[-1].astype(np.float64)
    logp = last - np.log(np.exp(last - last.max()).sum()) - last.max()
    status, r = post(server, "/v1/chat/completions", body)
    assert status == 200, r
    assert r["usage"]["prompt_tokens"] == np.fromfile(out, dtype=np.float32).size // 512
    top = r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    want = np.argsort(-logp)[:5]
    for got, w in zip(top, want):
        assert abs(got["logprob"] - logp[w]) < 1e-4, (top, logp[want])


def first_logprobs(server, url):
    status, r = post(server, "/v1/chat/completions",
                     chat([image_part(url), {"type": "text", "text": "Describe."}], max_tokens=1, logprobs=True,
                          top_logprobs=5))
    assert status == 200, r
    return [(t["token"], round(t["logprob"], 5)) for t in r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]


def test_the_image_changes_the_answer(server):
    a = first_logprobs(server, data_url(PNG))
    assert first_logprobs(server, data_url(PNG)) == a
    assert first_logprobs(server, data_url(JPEG, "image/jpeg")) != a


def test_streaming_with_two_images(server):
    body = chat([image_part(data_url(PNG)), image_part(data_url(JPEG, "image/jpeg")),
                 {"type": "text", "text": "Compare."}], stream=True)
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        text = resp.read().decode()
    assert text.rstrip().endswith("data: [DONE]")
    assert '"finish_reason":"length"' in text.replace(" ", "")


BAD = [
    ("bad base64", image_part("data:image/png;base64,iVBOR*w0KGgo"), "invalid character at offset 5"),
    ("base64 length", image_part("data:image/png;base64,iVBORw0KG"), "bad length"),
    ("not a data URL", image_part("file:///etc/passwd"), "must be a data: URL"),
    ("remote URL", image_part("https://example.com/cat.png"), "--allow-image-urls"),
    ("not base64", image_part("data:image/png,abc"), "must be base64-encoded"),
    ("not an image type", image_part("data:text/plain;base64,aGVsbG8="), "'text/plain' is not an image type"),
    ("empty", image_part("data:image/png;base64,"), "data is empty"),
    ("truncated", image_part(data_url(PNG.read_bytes()[:200])), "corrupt PNG"),
    ("unsupported", image_part(data_url(b"BM" + bytes(60), "image/bmp")), "BMP images are not supported"),
    ("unknown bytes", image_part(data_url(b"hello world, not an image")), "not a PNG, JPEG, WebP or GIF"),
    ("zero width", image_part(data_url(png_header_only(0, 10))), "image"),
    ("huge", image_part(data_url(png_header_only(100000, 100000))), "refused before decoding"),
    ("bad detail", {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA==", "detail": "max"}},
     "detail must be"),
    ("no url", {"type": "image_url", "image_url": {"detail": "low"}}, "url must be a string"),
    ("no image_url", {"type": "image_url"}, "needs an 'image_url' object"),
]


@pytest.mark.parametrize("name,part,why", BAD, ids=[b[0] for b in BAD])
def test_bad_image_parts_are_400_naming_the_part(server, name, part, why):
    status, r = post(server, "/v1/chat/completions", chat([{"type": "text", "text": "hi"}, part]))
    assert status == 400, r
    msg = r["error"]["message"]
    assert msg.startswith("messages[0].content[1]: "), msg
    assert why in msg, msg


def test_too_many_image_tokens_for_the_context(server):
    parts = [image_part(data_url(PNG), "high")]  # 1120 tokens at most; this one 1092 > -c 512
    status, r = post(server, "/v1/chat/completions", chat(parts))
    assert status == 400, r
    assert r["error"]["code"] == "context_length_exceeded"
    assert "messages[0].content[0]" in r["error"]["message"], r


def test_images_only_in_user_messages_and_once_each(server):
    body = {"model": "tiny-gemma4", "temperature": 0, "max_tokens": 2, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [image_part(data_url(PNG))]},
        {"role": "user", "content": "and?"}]}
    status, r = post(server, "/v1/chat/completions", body)
    assert status == 400 and "messages[1].content[0]: image parts are only allowed in user messages" in \
        r["error"]["message"], r
    # A text part that spells out the placeholder: one placeholder too many for the images.
    status, r = post(server, "/v1/chat/completions",
                     chat([{"type": "text", "text": "<|image|>"}, image_part(data_url(PNG))]))
    assert status == 400 and "2 image placeholders for 1 images" in r["error"]["message"], r


def test_a_text_only_server_refuses_images(sluice_bin, model):
    s = Server(sluice_bin, model, "-c", 256, "--no-tune")
    try:
        assert json.loads(s.get("/v1/models"))["data"][0]["modalities"] == ["text"]
        assert json.loads(s.get("/props"))["modalities"]["vision"] is False
        status, r = post(s, "/v1/chat/completions", chat([image_part(data_url(PNG))]))
        assert status == 400 and "images are not supported by this model" in r["error"]["message"], r
    finally:
        assert_clean_exit(s)


@pytest.mark.parametrize("text_model,mmproj,why", [
    (GOLDEN / "tiny-gemma4-draft.f32.gguf", MMPROJ, "outputs width 64 but the model's embedding width is 32"),
    (GOLDEN / "tiny-gemma3.f32.gguf", MMPROJ, "feeds Gemma 4 models"),
    (TINY4, GOLDEN / "tiny-gemma3.f32.gguf", "not an mmproj file"),
    (TINY4, MMPROJ, "has no '<|image|>' token"),
])
def test_a_mismatched_mmproj_stops_serve_at_start(sluice_bin, text_model, mmproj, why):
    r = run([sluice_bin, "serve", "-m", text_model, "--mmproj", mmproj, "--port", "0", "--no-tune"], timeout=120)
    assert r.returncode != 0 and why in r.stderr, r.stderr


def solid_png(rgb, size=48, height=None):
    """A size×size (or size×height) PNG of one colour (8-bit RGB, no filter)."""
    height = height or size
    rows = b"".join(b"\x00" + bytes(rgb) * size for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", size, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(rows)) +
            png_chunk(b"IEND", b""))


def test_prefix_cache_keys_images_by_content(sluice_bin, model):
    """Two images of one size expand to the same placeholder ids. The prefix cache must reuse
    a repeated image's K/V (cached tokens cover it, same answer) and never hand one image's
    K/V to the other (its answer equals a fresh server's). Without the media key the third
    request below takes the first's blocks and answers as if it saw the first image."""
    red, blue = data_url(solid_png((200, 30, 30))), data_url(solid_png((20, 40, 220)))

    def ask(server, url):
        body = chat([{"type": "text", "text": "A long enough preamble so that whole blocks precede the image."},
                     image_part(url), {"type": "text", "text": "Name the colour of this picture, please."}],
                    max_tokens=1, logprobs=True, top_logprobs=5)
        status, r = post(server, "/v1/chat/completions", body)
        assert status == 200, r
        lp = [(t["token"], round(t["logprob"], 4)) for t in r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]
        return lp, r["usage"]["prompt_tokens_details"]["cached_tokens"], r["usage"]["prompt_tokens"]

    fresh = Server(sluice_bin, model, "-c", 512, "--mmproj", MMPROJ, "--no-tune", "--no-prefix-cache")
    try:
        want_blue = ask(fresh, blue)[0]
    finally:
        assert_clean_exit(fresh)
    s = Server(sluice_bin, model, "-c", 512, "--mmproj", MMPROJ, "--no-tune")
    try:
        red1, cached, n = ask(s, red)
        assert cached == 0
        red2, cached, _ = ask(s, red)
        assert red2 == red1 and cached >= n - 16, (cached, n)  # all but the last partial block
        blue1, cached, _ = ask(s, blue)
        assert blue1 == want_blue, "the blue image's answer used the red image's K/V"
        assert blue1 != red1
        assert 0 < cached < n - 16, cached  # the text before the image only
    finally:
        assert_clean_exit(s)


def test_encoder_cache_skips_a_resent_image(sluice_bin, model):
    """Each turn of a chat resends its images: the second request with the same image takes the
    encoder's rows from the cache (a hit, no encode on the engine thread) and answers with the
    same logprobs, to the bit, as a server that encodes every time; another image is a miss.
    Without the prefix cache, so the second request's prefill really reads the cached rows."""
    red, blue = data_url(solid_png((200, 30, 30))), data_url(solid_png((20, 40, 220)))

    def ask(server, url, text):
        body = chat([image_part(url), {"type": "text", "text": text}], max_tokens=1, logprobs=True, top_logprobs=5)
        status, r = post(server, "/v1/chat/completions", body)
        assert status == 200, r
        return [(t["token"], t["logprob"]) for t in r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]

    def counts(server):
        return tuple(server.metric(m) for m in ("sluice_encoder_cache_hits_total", "sluice_encoder_cache_misses_total",
                                                "sluice_between_steps_jobs_total"))

    plain = Server(sluice_bin, model, "-c", 512, "--mmproj", MMPROJ, "--no-tune", "--no-prefix-cache",
                   "--encoder-cache", "0")
    try:
        want = [ask(plain, red, "What colour?"), ask(plain, red, "And now?")]
        assert counts(plain) == (0, 2, 2)  # encoded twice
    finally:
        assert_clean_exit(plain)
    s = Server(sluice_bin, model, "-c", 512, "--mmproj", MMPROJ, "--no-tune", "--no-prefix-cache")
    try:
        assert ask(s, red, "What colour?") == want[0]
        assert counts(s) == (0, 1, 1)
        assert ask(s, red, "And now?") == want[1]
        assert counts(s) == (1, 1, 1), "the resent image was encoded again"
        assert s.metric("sluice_encoder_cache_bytes") > 0
        assert ask(s, blue, "What colour?") != want[0]
        assert counts(s) == (1, 2, 2)
    finally:
        assert_clean_exit(s)


def test_the_same_new_image_at_once_is_encoded_once(sluice_bin, model):
    """Four requests bring one new image at the same moment: one encodes it, the others wait for
    its rows (the encoder cache's hold) and answer with the same logprobs."""
    from concurrent.futures import ThreadPoolExecutor
    url = data_url(solid_png((90, 160, 40)))
    body = chat([image_part(url), {"type": "text", "text": "What colour?"}], max_tokens=1, logprobs=True,
                top_logprobs=5)
    s = Server(sluice_bin, model, "-c", 2048, "--parallel", 4, "--mmproj", MMPROJ, "--no-tune", "--no-prefix-cache")
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: post(s, "/v1/chat/completions", body), range(4)))
        assert all(status == 200 for status, _ in answers), answers
        tops = [r["choices"][0]["logprobs"]["content"][0]["top_logprobs"] for _, r in answers]
        assert all(t == tops[0] for t in tops)
        assert s.metric("sluice_between_steps_jobs_total") == 1, "the image was encoded more than once"
        assert (s.metric("sluice_encoder_cache_hits_total"), s.metric("sluice_encoder_cache_misses_total")) == (3, 1)
    finally:
        assert_clean_exit(s)


def test_a_grid_the_tower_cannot_take_is_a_400(server):
    """The tiny tower's position table has 64 places a side; a wide image at 280 tokens needs more."""
    status, r = post(server, "/v1/chat/completions",
                     chat([{"type": "text", "text": "hi"}, image_part(data_url(solid_png((9, 9, 9), 2000, 40)), "auto")]))
    assert status == 400, r
    assert r["error"]["message"].startswith("messages[0].content[1]: ") and "position table" in r["error"]["message"], r


class ImageSite(http.server.BaseHTTPRequestHandler):
    """What a remote image URL may answer: an image, errors, a slow, huge or looping answer."""
    png = b""

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", ctype="image/png", headers=(), length=True):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        routes = {
            "/red.png": lambda: self.reply(200, self.png),
            "/missing.png": lambda: self.reply(404, b"not here", "text/plain"),
            "/big.png": lambda: self.reply(200, b"\x89PNG" + b"\0" * 200000),
            "/big-unlabelled": lambda: self.reply(200, b"\x89PNG" + b"\0" * 200000, "application/octet-stream",
                                                   length=False),
            "/page.html": lambda: self.reply(200, b"<html>cat</html>", "text/html"),
            "/loop": lambda: self.reply(302, ctype="text/plain", headers=[("Location", "/loop")]),
            "/to-file": lambda: self.reply(302, ctype="text/plain", headers=[("Location", "file:///etc/passwd")]),
        }
        if self.path == "/slow.png":
            time.sleep(3)
            return self.reply(200, self.png)
        routes.get(self.path, lambda: self.reply(404, b"", "text/plain"))()


@pytest.fixture(scope="module")
def site():
    ImageSite.png = solid_png((200, 30, 30))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ImageSite)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


@pytest.fixture(scope="module")
def url_server(sluice_bin, model):
    s = Server(sluice_bin, model, "-c", 512, "--mmproj", MMPROJ, "--no-tune", "--allow-image-urls",
               "--image-url-max", "64K", "--image-url-timeout", "1")
    yield s
    assert_clean_exit(s)


def top5(server, url):
    status, r = post(server, "/v1/chat/completions",
                     chat([image_part(url), {"type": "text", "text": "Colour?"}], max_tokens=1, logprobs=True,
                          top_logprobs=5))
    assert status == 200, r
    return [(t["token"], t["logprob"]) for t in r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]


def test_a_fetched_image_answers_as_its_data_url(url_server, site):
    assert top5(url_server, site + "/red.png") == top5(url_server, data_url(solid_png((200, 30, 30))))


@pytest.mark.parametrize("path,why", [
    ("/missing.png", "HTTP status 404"),
    ("/big.png", "larger than 65536 bytes"),            # refused from Content-Length
    ("/big-unlabelled", "larger than 65536 bytes"),     # no length: cut while reading
    ("/slow.png", "timed out after 1000 ms"),
    ("/page.html", "Content-Type 'text/html' is not an image"),
    ("/loop", "more than 3 redirects"),
    ("/to-file", "scheme other than http or https"),
    ("file:///etc/passwd", "must be a data: URL or an http(s) URL"),
])
def test_bad_image_urls_are_400_naming_the_part(url_server, site, path, why):
    url = path if path.startswith("file:") else site + path
    status, r = post(url_server, "/v1/chat/completions", chat([{"type": "text", "text": "hi"}, image_part(url)]))
    assert status == 400, r
    msg = r["error"]["message"]
    assert msg.startswith("messages[0].content[1]: ") and why in msg, msg
