"""What a client receives when its generation fails, and /metrics right after a request ends,
through `sluice serve` on the tiny Gemma 3 (random weights).

A grammar whose only token is the end of text, with `min_tokens` forbidding that token, leaves
nothing to sample at the first step: the engine ends that request (and only it) with an error.
A non-streamed request then gets a 500 whose message names the cause, a stream a final SSE
`error` event with it — neither a finish_reason "abort" nor the shutdown's 503. /metrics is
published before the engine hands a finished request's last output to its handler, so a
client that reads it as soon as its answer is complete sees the request finished."""
import json
import re
import urllib.error
import urllib.request

import openai
import pytest

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY3 = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"


@pytest.fixture(scope="module")
def server(sluice_bin):
    s = Server(sluice_bin, TINY3, "-c", 512, "--parallel", 2)
    yield s
    assert_clean_exit(s)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=60)


def post(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def impossible(server):
    """A body whose grammar allows only one token, made a stop token that min_tokens bans. (A
    grammar naming an end-of-generation token itself is refused at compile time, a 400.)"""
    status, text = post(server, "/tokenize", {"content": "a", "add_special": False})
    assert status == 200, text
    [a] = json.loads(text)["tokens"]
    return {"model": "tiny-gemma3", "prompt": "Answer:", "max_tokens": 8, "min_tokens": 4,
            "stop_token_ids": [a], "grammar": f"root ::= <[{a}]>"}


def test_a_grammar_failure_is_a_500_naming_it(server, client):
    status, text = post(server, "/v1/completions", impossible(server))
    assert status == 500, text
    err = json.loads(text)["error"]
    assert err["type"] == "server_error"
    assert err["message"].startswith("generation failed: grammar: no token is allowed"), err
    body = impossible(server)
    with pytest.raises(openai.InternalServerError) as e:  # what an SDK user sees
        client.completions.create(model=body["model"], prompt=body["prompt"], max_tokens=body["max_tokens"],
                                  extra_body={k: body[k] for k in ("min_tokens", "stop_token_ids", "grammar")})
    assert e.value.status_code == 500 and "grammar" in str(e.value)
    # The server goes on: the next request is answered.
    ok = client.completions.create(model="tiny-gemma3", prompt="Answer:", max_tokens=3, temperature=0)
    assert ok.choices[0].finish_reason == "length"


def test_a_grammar_failure_ends_a_stream_with_an_error_event(server):
    status, text = post(server, "/v1/completions", {**impossible(server), "stream": True})
    assert status == 200, text  # the stream had started
    events = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert events and events[-1] != "[DONE]", events
    last = json.loads(events[-1])
    assert last["error"]["type"] == "server_error"
    assert last["error"]["message"].startswith("generation failed: grammar: no token is allowed"), last
    assert not any('"finish_reason": "abort"' in e or '"finish_reason":"abort"' in e for e in events)


def test_metrics_count_a_request_as_soon_as_it_ended(server, client):
    for i in range(12):
        steps = server.metric("sluice_engine_steps_total")
        r = client.completions.create(model="tiny-gemma3", prompt=f"Count {i}:", max_tokens=4 + i % 3, temperature=0)
        assert r.choices[0].finish_reason == "length"
        text = server.get("/metrics")  # at once: no waiting for the engine

        def value(name):
            return float(re.search(rf"^{re.escape(name)} (\S+)$", text, re.M).group(1))

        assert value("sluice_requests_running") == 0, (i, text)
        assert value("sluice_kv_blocks_used") == 0, (i, text)
        assert value("sluice_engine_steps_total") >= steps + r.usage.completion_tokens, i
