#!/usr/bin/env python3
"""Does an image request slow down everyone else's tokens? (issue 34: "one image request does
not raise other streams' inter-token latency by more than one step's time".)

One `sluice serve --mmproj` per binary given. A measured stream (a plain greedy completion,
streamed, `ignore_eos`) runs in rounds; its inter-token gaps (between two streamed token events)
are recorded inside a window: in "images" rounds the window runs from sending N chat requests
with a different image each (a fresh 672x960 PNG, 280 soft tokens, `max_tokens` 1; no encode
is ever repeated) to their last answer; in "alone" rounds the window is as long, without them.
The rounds alternate (alone, images, per binary) so the shared host's load hits all alike.

  python3 bench/image_neighbours.py [--sluice build/apps/sluice/sluice ...] [--model M --mmproj P]
      [--images 3] [--rounds 3] [--threads 2] [--json out.json]

Without --model: the tiny Gemma 4 and tiny E-variant tower of the fixtures (`make fixtures`),
with image markers added to a copy of its vocabulary. Prints per binary and mode the gap's p50
(≈ one step), p99 and max. A third mode is the control: neighbours with text prompts as long as
the image requests' (their prefill, no encode), so "images" minus "text" is the encoders' share;
the acceptance wants it within about one step (the alone p50). Records `uptime` and `lscpu`'s
model name with the figures."""
import argparse
import base64
import http.client
import json
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
from image_util import noise_png, with_image_markers  # noqa: E402
from server_util import Server  # noqa: E402

PROMPT = "The river begins high in the mountains, where snow melts into streams that"
GOLDEN = ROOT / "tests/data/golden"


class Stream:
    """Streamed completions read on a thread from a plain socket, one after another until
    stop() (a fast model finishes one long before the window ends): the monotonic time of every
    token event ("data: {" in the bytes as they arrive), one list per completion."""

    def __init__(self, url, model, max_tokens):
        u = urllib.parse.urlparse(url)
        self.addr = (u.hostname, u.port)
        self.body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "ignore_eos": True,
                                "temperature": 0, "stream": True, "logprobs": 1}).encode()
        self.segments, self.done, self.sock = [], threading.Event(), None
        self.thread = threading.Thread(target=self._read)
        self.thread.start()

    def _one(self):
        stamps, tail = [], b""
        self.segments.append(stamps)
        self.sock = socket.create_connection(self.addr, timeout=600)
        self.sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(self.body) + self.body)
        while not self.done.is_set():
            data = self.sock.recv(65536)
            if not data:
                if self.done.is_set():
                    return
                raise RuntimeError("the server closed the measured stream")
            now, buf = time.monotonic(), tail + data
            stamps += [now] * buf.count(b"data: {")
            if b"data: [DONE]" in buf:
                break
            tail = buf[-8:]
        self.sock.close()

    def _read(self):
        try:
            while not self.done.is_set():
                self._one()
        except OSError:
            pass

    def stop(self):
        self.done.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join()
        self.sock.close()

    def gaps(self, t0, t1):
        """Gaps between consecutive token events of one completion that end inside [t0, t1] (seconds)."""
        return [b - a for st in self.segments for a, b in zip(st, st[1:]) if t0 <= b <= t1]


def image_body(model, png):
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    return json.dumps({"model": model, "max_tokens": 1, "temperature": 0, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}]}]})


def text_body(model, n_tokens):
    """A completion whose prompt is n_tokens ids (an image request's length without the image)."""
    return json.dumps({"model": model, "max_tokens": 1, "temperature": 0, "prompt": [2] + [100 + i % 97 for i in
                                                                                         range(n_tokens - 1)]})


def post(url, body, out, path="/v1/chat/completions"):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("POST", path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    out.append((r.status, r.read()))
    c.close()


def round_images(url, model, bodies, max_tokens, path="/v1/chat/completions"):
    """The stream with the neighbours' requests sent at once, 0.5 s in: (gaps in the window,
    window, the first answer)."""
    s = Stream(url, model, max_tokens)
    try:
        time.sleep(0.5)
        results = []
        threads = [threading.Thread(target=post, args=(url, b, results, path)) for b in bodies]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t1 = time.monotonic()
    finally:
        s.stop()
    bad = [r for r in results if r[0] != 200]
    if bad:
        raise RuntimeError(f"neighbour request failed: {bad[0][0]} {bad[0][1][:300]!r}")
    return s.gaps(t0, t1), t1 - t0, json.loads(results[0][1])


def round_alone(url, model, window, max_tokens):
    s = Stream(url, model, max_tokens)
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        time.sleep(window)
        t1 = time.monotonic()
    finally:
        s.stop()
    return s.gaps(t0, t1)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def host():
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ln.startswith("Model name")), "?")
    return {"uptime": uptime, "cpu": name}


def summary(gaps):
    return {"n": len(gaps), "p50_ms": 1e3 * statistics.median(gaps) if gaps else float("nan"),
            "p99_ms": 1e3 * pct(gaps, 0.99), "max_ms": 1e3 * max(gaps, default=float("nan"))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", action="append", help="binary (repeat to compare; default build/apps/sluice/sluice)")
    ap.add_argument("--model")
    ap.add_argument("--mmproj")
    ap.add_argument("--images", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--batch-tokens", type=int, help="serve --batch-tokens: the prefill chunk (default: the server's)")
    ap.add_argument("--stream-tokens", type=int, default=1900, help="the measured stream's max_tokens")
    ap.add_argument("--json")
    a = ap.parse_args()
    bins = [pathlib.Path(b) for b in (a.sluice or [ROOT / "build/apps/sluice/sluice"])]
    tmp = tempfile.TemporaryDirectory()
    model = pathlib.Path(a.model) if a.model else with_image_markers(GOLDEN / "tiny-gemma4.f32.gguf",
                                                                   pathlib.Path(tmp.name) / "tiny-markers.gguf")
    mmproj = a.mmproj or GOLDEN / "tiny-vision-e.mmproj.f32.gguf"
    before = host()
    extra = ["--batch-tokens", a.batch_tokens] if a.batch_tokens else []
    servers = [Server(b, model, "-c", a.ctx, "--parallel", a.images + 1, "-t", a.threads, "--mmproj", mmproj,
                      "--image-tokens", 280, *extra) for b in bins]
    out = {"host_before": before, "model": str(model if a.model else "tiny-gemma4 + tiny-vision-e"),
           "images": a.images, "threads": a.threads, "binaries": {}}
    try:
        names = [json.loads(s.get("/v1/models"))["data"][0]["id"] for s in servers]
        gaps = {str(b): {"alone": [], "text": [], "images": []} for b in bins}
        seed, n_prompt = 0, {}
        for b, s, name in zip(bins, servers, names):  # warm: the first image and stream of each server
            r = round_images(s.url, name, [image_body(name, noise_png(672, 960, seed := seed + 1))], a.stream_tokens)
            n_prompt[str(b)] = r[2]["usage"]["prompt_tokens"]
        for _ in range(a.rounds):
            for b, s, name in zip(bins, servers, names):
                bodies = [image_body(name, noise_png(672, 960, seed := seed + 1)) for _ in range(a.images)]
                g, window, _ = round_images(s.url, name, bodies, a.stream_tokens)
                gaps[str(b)]["images"] += g
                # The control: neighbours with prompts as long, no image (their prefill, no encode).
                texts = [text_body(name, n_prompt[str(b)]) for _ in range(a.images)]
                g, text_window, _ = round_images(s.url, name, texts, a.stream_tokens, "/v1/completions")
                gaps[str(b)]["text"] += g
                gaps[str(b)]["alone"] += round_alone(s.url, name, window, a.stream_tokens)
                print(f"{b}: images window {window:.2f} s, text {text_window:.2f} s", file=sys.stderr)
    finally:
        for s in servers:
            s.stop()
    out["host_after"] = host()
    for b in bins:
        r = {mode: summary(g) for mode, g in gaps[str(b)].items()}
        r["images_max_minus_text_max_ms"] = r["images"]["max_ms"] - r["text"]["max_ms"]
        out["binaries"][str(b)] = r
        for mode in ("alone", "text", "images"):
            m = r[mode]
            print(f"{b} {mode:>6}: gaps {m['n']:5d}  p50 {m['p50_ms']:7.2f} ms  p99 {m['p99_ms']:7.2f} ms  "
                  f"max {m['max_ms']:7.2f} ms")
    print(f"host: {before['cpu']}; before: {before['uptime']}; after: {out['host_after']['uptime']}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
