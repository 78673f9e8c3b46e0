"""`sluice serve` on the tiny Gemma 3 / Gemma 4 models, driven by the official `openai` SDK
(the peer: a client we did not write) plus raw HTTP for what the SDK hides (SSE framing,
headers, malformed bodies)."""
import json
import threading
import time

import httpx2 as httpx
import openai
import pytest

from conftest import ROOT, run
from server_util import ASAN, Server, assert_clean_exit

TINY3 = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
TINY4 = ROOT / "tests/data/golden/tiny-gemma4.q8_0.gguf"
CTX = 256


# Every test of this file runs against a plain server and one with n-gram speculation: the
# answers must not change (speculation is lossless), whatever the policy picks. The ASan rerun
# (make test-server-asan) takes the plain server only: the speculative steps' memory use is
# covered there by the engine tests, and the rerun would double.
SERVER_PARAMS = [[]] if ASAN else [[], ["--spec", "ngram"]]


@pytest.fixture(scope="module", params=SERVER_PARAMS, ids=["plain", "spec-ngram"][:len(SERVER_PARAMS)])
def server(sluice_bin, request):
    s = Server(sluice_bin, TINY3, "-c", CTX, "--parallel", 4, "--max-queue", 16, *request.param)
    yield s
    assert_clean_exit(s)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=60)


MODEL = "tiny-gemma3"


def chat(client, content="Hello there", **kw):
    kw.setdefault("max_tokens", 8)
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}], **kw)


def test_models_lists_the_alias(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")


def test_completion_matches_sluice_run_greedy(client, sluice_bin):
    prompt = "The river flows"
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=10, temperature=0)
    ref = run([sluice_bin, "run", "-m", TINY3, "-p", prompt, "-n", 10, "--temp", 0])
    assert ref.returncode == 0, ref.stderr
    assert ref.stdout.endswith("\n")
    assert r.choices[0].text == ref.stdout[:-1]
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 10
    ids = httpx.post(client.base_url.copy_with(path="/tokenize"), json={"content": prompt}).json()["tokens"]
    assert r.usage.prompt_tokens == len(ids)


def test_chat_stream_and_non_stream_agree(client, sluice_bin):
    whole = chat(client, "Tell me a story", max_tokens=12, temperature=0)
    assert whole.object == "chat.completion"
    assert whole.choices[0].message.role == "assistant"
    chunks = list(chat(client, "Tell me a story", max_tokens=12, temperature=0, stream=True))
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:])
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason == "length"
    # Same text as `sluice run --chat --temp 0`.
    ref = run([sluice_bin, "run", "-m", TINY3, "--chat", "-p", "Tell me a story", "-n", 12, "--temp", 0])
    assert ref.stdout[:-1] == text


def test_completion_stream_with_usage(client):
    chunks = list(client.completions.create(model=MODEL, prompt="abc", max_tokens=6, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    assert all(c.usage is None for c in chunks[:-1])
    whole = client.completions.create(model=MODEL, prompt="abc", max_tokens=6, temperature=0)
    assert "".join(c.choices[0].text for c in chunks[:-1]) == whole.choices[0].text


def test_raw_sse_framing(server):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    with httpx.stream("POST", server.base_url + "/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [l for l in r.iter_lines() if l]
    data = [l[6:] for l in lines if l.startswith("data: ")]
    assert data[-1] == "[DONE]"
    parsed = [json.loads(d) for d in data[:-1]]
    assert len({p["id"] for p in parsed}) == 1


def test_stop_strings_spanning_tokens_are_never_emitted(client):
    full = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=24, temperature=0).choices[0].text
    # A stop string that starts inside one token's text and ends in a later one.
    mid = len(full) // 2
    stop = full[mid:mid + 4]
    assert len(stop) == 4
    expect = full[:full.find(stop)]
    r = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=24, temperature=0, stop=[stop, "\u2603never"])
    assert r.choices[0].text == expect
    assert r.choices[0].finish_reason == "stop"
    streamed = list(client.completions.create(model=MODEL, prompt="Once upon", max_tokens=24, temperature=0, stop=stop,
                                              stream=True))
    assert "".join(c.choices[0].text for c in streamed) == expect
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_same_seed_same_output_whatever_else_runs(client):
    kw = dict(max_tokens=16, temperature=1.0, top_p=1.0, seed=1234)
    alone = chat(client, "Seeded", **kw).choices[0].message.content
    results = {}

    def other(i):
        results[i] = chat(client, f"noise {i}", max_tokens=20, temperature=1.0).choices[0].message.content

    threads = [threading.Thread(target=other, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    crowded = chat(client, "Seeded", **kw).choices[0].message.content
    for t in threads:
        t.join()
    assert alone == crowded
    assert len(results) == 3


def test_logprobs_chat_and_completions(client):
    r = chat(client, "logprobs please", max_tokens=5, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == 5
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert [t.logprob for t in e.top_logprobs] == sorted([t.logprob for t in e.top_logprobs], reverse=True)
        assert e.token == e.top_logprobs[0].token   # greedy picks the most likely
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token or e.bytes
    c = client.completions.create(model=MODEL, prompt="x", max_tokens=4, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    assert all(len(t) <= 2 for t in lp.top_logprobs)


def test_n_choices(client):
    r = chat(client, "two answers", n=2, max_tokens=6, temperature=1.0, seed=5)
    assert [c.index for c in r.choices] == [0, 1]
    assert r.usage.completion_tokens == 12
    again = chat(client, "two answers", n=2, max_tokens=6, temperature=1.0, seed=5)
    assert [c.message.content for c in again.choices] == [c.message.content for c in r.choices]
    streamed = list(chat(client, "two answers", n=2, max_tokens=6, temperature=1.0, seed=5, stream=True))
    for i in (0, 1):
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices and c.choices[0].index == i)
        assert text == r.choices[i].message.content


def test_message_content_parts_and_roles(client):
    parts = client.chat.completions.create(model=MODEL, max_tokens=4, temperature=0, messages=[
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}])
    plain = client.chat.completions.create(model=MODEL, max_tokens=4, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}])
    assert parts.choices[0].message.content == plain.choices[0].message.content
    assert parts.usage.prompt_tokens == plain.usage.prompt_tokens


def test_max_tokens_defaults_to_the_context_end(client):
    r = client.completions.create(model=MODEL, prompt="a b c", temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens + r.usage.completion_tokens == CTX
    assert r.choices[0].finish_reason == "length"


def test_repeated_prefix_is_served_from_the_cache(client, server):
    system = "You are a helpful assistant who answers every question. " * 3
    first = client.chat.completions.create(model=MODEL, max_tokens=2, temperature=0, messages=[
        {"role": "system", "content": system}, {"role": "user", "content": "one"}])
    hits = server.metric("sluice_prefix_cache_hits_total")
    second = client.chat.completions.create(model=MODEL, max_tokens=2, temperature=0, messages=[
        {"role": "system", "content": system}, {"role": "user", "content": "two"}])
    assert first.usage.prompt_tokens > 64
    assert second.usage.prompt_tokens_details.cached_tokens >= 64
    assert server.metric("sluice_prefix_cache_hits_total") >= hits + 64


def expect_error(server, path, body, status, needle, raw=False):
    r = httpx.post(server.url + path, content=body if raw else json.dumps(body),
                   headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert needle in err["message"], err
    assert set(err) >= {"message", "type", "param", "code"}
    return r


def test_invalid_requests_get_the_right_errors_and_the_server_keeps_serving(server, client):
    msgs = [{"role": "user", "content": "hi"}]
    expect_error(server, "/v1/chat/completions", '{"model": "tiny-gemma3", "messages": [', 400, "not valid JSON", raw=True)
    expect_error(server, "/v1/chat/completions", "[1, 2]", 400, "JSON object", raw=True)
    expect_error(server, "/v1/chat/completions", {"model": "nope", "messages": msgs}, 404, "does not exist")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": msgs, "max_tokens": -3}, 400, "max_tokens")
    expect_error(server, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 0}, 400, "max_tokens")
    expect_error(server, "/v1/completions", {"model": MODEL, "prompt": "word " * 400}, 400, "context")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": msgs, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": {"type": "function", "function": {"name": "g"}}}, 400, "not in tools")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": msgs, "tool_choice": "auto"}, 400, "needs tools")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": msgs,
                                                  "response_format": {"type": "xml"}}, 400, "response_format")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": msgs, "temperature": "hot"}, 400, "temperature")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": msgs, "top_p": 0}, 400, "top_p")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, 400, "role")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, "not supported")
    expect_error(server, "/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]}, 400, "template")
    expect_error(server, "/v1/completions", {"model": MODEL, "prompt": [1, 2, 10 ** 7]}, 400, "token ids")
    expect_error(server, "/v1/nothing", {}, 404, "no route")
    expect_error(server, "/v1/completions", "x" * (9 << 20), 413, "too large", raw=True)
    # The SDK sees the same errors as exceptions of the right class.
    with pytest.raises(openai.BadRequestError):
        chat(client, max_tokens=-1)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=msgs)
    # ...and the server still serves.
    assert chat(client, max_tokens=3).usage.completion_tokens == 3
    assert server.wait_blocks_free()


def test_tokenize_detokenize_round_trip(server):
    text = "Hello, world! Ünïcode ✓"
    toks = httpx.post(server.url + "/tokenize", json={"content": text, "add_special": False}).json()["tokens"]
    back = httpx.post(server.url + "/detokenize", json={"tokens": toks}).json()["content"]
    assert back == text
    assert httpx.post(server.url + "/detokenize", json={"tokens": [-1]}).status_code == 400


def test_health_and_metrics(server, client):
    assert json.loads(server.get("/health"))["status"] == "ok"
    chat(client, max_tokens=3)
    m = server.get("/metrics")
    for name in ("sluice_requests_total", "sluice_requests_waiting", "sluice_requests_running", "sluice_kv_usage_ratio",
                 "sluice_time_to_first_token_seconds_bucket", "sluice_inter_token_latency_seconds_count",
                 "sluice_generation_tokens_total", "sluice_prompt_tokens_total"):
        assert name in m, name
    assert server.metric("sluice_time_to_first_token_seconds_count") >= 1
    assert server.metric("sluice_generation_tokens_total") >= 3


def test_a_client_that_disconnects_mid_stream_frees_its_blocks(server):
    body = {"model": MODEL, "prompt": "go", "max_tokens": 200, "stream": True, "extra": 1, "ignore_eos": True}
    with httpx.stream("POST", server.base_url + "/completions", json=body, timeout=60) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i > 6:
                break   # closing the response drops the connection mid-stream
    assert server.wait_blocks_free()
    # Also while the prompt is still being computed: a long prompt, gone at once.
    with httpx.stream("POST", server.base_url + "/completions", json={**body, "prompt": "word " * 200}, timeout=60) as r:
        pass
    assert server.wait_blocks_free()


def test_api_key(sluice_bin):
    s = Server(sluice_bin, TINY3, "-c", 128, "--api-key", "sekrit")
    try:
        bad = openai.OpenAI(base_url=s.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        assert httpx.get(s.base_url + "/models").status_code == 401
        good = openai.OpenAI(base_url=s.base_url, api_key="sekrit", max_retries=0)
        assert good.models.list().data[0].id == MODEL
        assert json.loads(s.get("/health"))["status"] == "ok"   # probes need no key
    finally:
        assert_clean_exit(s)


def test_full_queue_answers_429_with_retry_after(sluice_bin):
    # The first request must still run when the third arrives: the tiny model decodes ~12k
    # tokens/s, so 250 tokens (20 ms) were sometimes done before a loaded CI machine sent it;
    # 1900 tokens hold the slot for 150 ms or more.
    s = Server(sluice_bin, TINY3, "-c", 2048, "--parallel", 1, "--max-queue", 1, "--alias", "q")
    try:
        body = {"model": "q", "prompt": "hold", "max_tokens": 1900, "stream": True, "ignore_eos": True}
        streams, codes = [], []
        for _ in range(4):
            cm = httpx.stream("POST", s.base_url + "/completions", json=body, timeout=60)
            r = cm.__enter__()
            codes.append(r.status_code)
            if r.status_code == 429:
                assert r.headers["retry-after"] == "1"
                r.read()
                assert "queue" in r.json()["error"]["message"]
            streams.append(cm)
        assert 429 in codes and codes[0] == 200
        for cm in streams:
            cm.__exit__(None, None, None)
        assert s.wait_blocks_free()
    finally:
        assert_clean_exit(s)


def test_gemma4_thinking_switch_reaches_the_template(sluice_bin):
    s = Server(sluice_bin, TINY4, "-c", 256)
    try:
        c = openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0)
        msgs = [{"role": "user", "content": "Think?"}]
        off = c.chat.completions.create(model="tiny-gemma4", messages=msgs, max_tokens=3, temperature=0)
        on = c.chat.completions.create(model="tiny-gemma4", messages=msgs, max_tokens=3, temperature=0,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": True}})
        # Thinking on: a system turn with <|think|> instead of the empty thought block.
        assert on.usage.prompt_tokens != off.usage.prompt_tokens
        assert off.choices[0].message.content is not None
    finally:
        assert_clean_exit(s)


def test_loadgen_reports_throughput_and_latencies(server, sluice_bin, tmp_path):
    import subprocess
    import sys
    out = tmp_path / "load.json"
    # The plain client also probes the machine around every round (`sluice bench --machine`).
    probe = ["--probe", f"{sluice_bin} bench --machine -t 2 --json --bandwidth-gib 0.0625"]
    for client in (probe, ["--sdk"]):   # plain HTTP (the default) and the openai SDK
        r = subprocess.run([sys.executable, str(ROOT / "python/loadgen.py"), "--url", server.base_url, "--model", MODEL,
                            "--sweep", "1,4", "--repeat", "2", "-n", "8", "--max-tokens", "6", "--json", str(out)] + client,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        res = json.loads(out.read_text())
        rounds = res["rounds"]
        assert [(x["repeat"], x["concurrency"]) for x in rounds] == [(0, 1), (0, 4), (1, 1), (1, 4)]
        for x in rounds:
            assert x["failed"] == 0 and x["generated_tokens"] == 8 * 6 and x["throughput_tok_s"] > 0
            assert x["ttft_s"]["50"] > 0   # (the tiny model's random text may come in one piece: no ITL)
            # Decode time is the union of each request's decoding interval: within the wall
            # time, and 5 tokens after the first of each of the 8 requests.
            assert 0 < x["decode_s"] <= x["wall_s"] and x["decode_tokens"] == 8 * 5
        speedups = {(s["concurrency"], s["metric"]): s for s in res["speedups"]}
        assert set(speedups) == {(4, "tok/s"), (4, "decode tok/s")}
        assert all(len(s["speedups"]) == 2 for s in speedups.values())
        assert "speed-up at 4 streams (decode tok/s)" in r.stdout
        if client is probe:
            for x in rounds:
                for p in (x["probe"], x["probe_after"]):
                    assert p["bandwidth_gbs"] > 0 and p["core_round_trip_ns"] > 0
            for s in speedups.values():
                assert len(s["placements"]) == 2
                assert all(a in ("close", "far", "mixed") and b in ("close", "far", "mixed")
                           for a, b in (p.split("/") for p in s["placements"]))
        else:
            assert all(x["probe"] is None and x["probe_after"] is None for x in rounds)
    assert subprocess.run([sys.executable, str(ROOT / "python/loadgen.py"), "--url", "http://10.0.0.1:1/v1",
                           "--model", "m"], capture_output=True).returncode != 0
    # A placement to wait for needs the probe that tells it.
    r = subprocess.run([sys.executable, str(ROOT / "python/loadgen.py"), "--url", server.base_url, "--model", MODEL,
                        "--placement", "close"], capture_output=True, text=True)
    assert r.returncode != 0 and "--placement needs --probe" in r.stderr
