"""Soak: 16 concurrent clients, 400 requests mixing valid requests (chat and completions,
streaming and not), malformed ones and clients that vanish mid-stream, on the tiny model.
Zero crashes, every valid request completes, the block pool ends empty, and after a
warm-up round anonymous resident memory ends within 5% of where it started."""
import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx2 as httpx
import openai
import pytest

from conftest import ROOT
from server_util import ASAN, Server, assert_clean_exit

TINY = ROOT / "tests/data/golden/tiny-gemma4.q8_0.gguf"
MODEL = "tiny-gemma4"


def one_request(server, client, i):
    """Returns (kind, ok)."""
    rng = random.Random(i)
    kind = rng.choice(["chat", "chat_stream", "completion", "completion_stream", "completion_stream",
                       "malformed_json", "bad_param", "disconnect", "disconnect"])
    n = rng.randint(1, 12)
    prompt = " ".join(rng.choice(["river", "sea", "stone", "cloud", "light"]) for _ in range(rng.randint(1, 40)))
    msgs = [{"role": "system", "content": "Shared system prompt for every request of the soak. " * 2},
            {"role": "user", "content": prompt}]
    if kind == "chat":
        r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=n, seed=i)
        return kind, r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens <= n
    if kind == "chat_stream":
        chunks = list(client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=n, stream=True,
                                                     stream_options={"include_usage": True}))
        return kind, chunks[-1].usage is not None and chunks[-2].choices[0].finish_reason in ("stop", "length")
    if kind == "completion":
        r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0)
        return kind, r.choices[0].finish_reason in ("stop", "length")
    if kind == "completion_stream":
        chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=n, stream=True))
        return kind, chunks[-1].choices[0].finish_reason in ("stop", "length")
    if kind == "malformed_json":
        r = httpx.post(server.base_url + "/chat/completions", content=b'{"model": "tiny-gemma4", "messages": [{"ro',
                       headers={"content-type": "application/json"}, timeout=60)
        return kind, r.status_code == 400 and "error" in r.json()
    if kind == "bad_param":
        body = rng.choice([{"model": MODEL, "messages": msgs, "max_tokens": -1},
                           {"model": MODEL, "messages": msgs, "tools": [{"type": "function", "function": {"name": "f"}}],
                            "tool_choice": {"type": "function", "function": {"name": "not_a_tool"}}},
                           {"model": "missing", "messages": msgs},
                           {"model": MODEL, "prompt": "x", "n": 99}])
        path = "/completions" if "prompt" in body else "/chat/completions"
        r = httpx.post(server.base_url + path, json=body, timeout=60)
        return kind, r.status_code in (400, 404) and "error" in r.json()
    # disconnect: read a few events of a long stream, then drop the connection
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 200, "stream": True, "ignore_eos": True}
    with httpx.stream("POST", server.base_url + "/completions", json=body, timeout=60) as r:
        for k, _ in enumerate(r.iter_lines()):
            if k >= rng.randint(0, 8):
                break
    return kind, True


def round_of(server, client, first, count):
    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(lambda i: one_request(server, client, i), range(first, first + count)))


def test_soak(sluice_bin):
    # 8 running + 16 queued = 32 HTTP worker threads. The warm-up round is long enough for
    # every worker to have served requests (its stack pages stay resident once touched).
    s = Server(sluice_bin, TINY, "-c", 512, "--parallel", 8, "--max-queue", 16, "--batch-tokens", 64)
    try:
        client = openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0, timeout=120)
        # Under ASan (a leak check at exit, ~5x slower) a shorter soak keeps make test bounded.
        n_warm, n_main = (40, 120) if ASAN else (200, 400)
        warm = round_of(s, client, 10_000, n_warm)
        assert all(ok for _, ok in warm), [k for k, ok in warm if not ok]
        assert s.wait_blocks_free()
        rss0 = s.rss_anon_kib()
        results = round_of(s, client, 0, n_main)
        bad = [k for k, ok in results if not ok]
        assert not bad, bad
        assert {k for k, _ in results} >= {"chat", "chat_stream", "completion", "malformed_json", "disconnect"}
        assert s.wait_blocks_free(), s.get("/metrics")
        assert s.proc.poll() is None
        rss1 = s.rss_anon_kib()
        if not ASAN:   # (ASan's quarantine holds freed memory on purpose)
            assert rss1 <= rss0 * 1.05, f"RssAnon grew {rss0} -> {rss1} KiB ({100 * (rss1 / rss0 - 1):.1f}%)"
    finally:
        assert_clean_exit(s)
