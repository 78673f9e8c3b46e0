"""Speculation through the HTTP API on the tiny Gemma 3: the per-request override
("speculative": {"n_max": K}, off), llama-server-style `timings` (whole and streamed), and the
per-position counters in /metrics. The server drafts with --spec-policy fixed, so a request's
drafts follow its own cap exactly."""
import json
import re

import httpx2 as httpx
import pytest

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY3 = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
MODEL = "tiny-gemma3"
PROMPT = "one two three one two three one two three one two"
TIMINGS = {"prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second",
           "draft_n", "draft_n_accepted"}


@pytest.fixture(scope="module")
def server(sluice_bin):
    s = Server(sluice_bin, TINY3, "-c", 256, "--parallel", 2, "--spec", "ngram", "--draft-max", 4,
               "--spec-policy", "fixed")
    yield s
    assert_clean_exit(s)


def complete(server, **kw):
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 48, "temperature": 0, **kw}
    r = httpx.post(server.base_url + "/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def per_position(server, name, text=None):
    text = server.get("/metrics") if text is None else text
    return {int(p): float(v) for p, v in re.findall(rf'^{name}{{position="(\d+)"}} (\S+)$', text, re.M)}


def total(text, name):
    return float(re.search(rf"^{re.escape(name)} (\S+)$", text, re.M).group(1))


def test_timings_count_this_requests_drafts(server):
    r = complete(server)
    t = r["timings"]
    assert set(t) == TIMINGS
    assert t["predicted_n"] == r["usage"]["completion_tokens"] == 48
    assert t["prompt_n"] == r["usage"]["prompt_tokens"] - r["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert t["prompt_ms"] > 0 and t["predicted_ms"] > 0
    assert abs(t["predicted_per_second"] - 48e3 / t["predicted_ms"]) < 1e-6 * t["predicted_per_second"]
    # The tiny model repeats itself: drafts are made and some accepted; at most 4 a step.
    assert 0 < t["draft_n_accepted"] <= t["draft_n"] <= 4 * 48


def test_override_off_and_caps_keep_the_text(server):
    base = complete(server)
    for off in (False, {"n_max": 0}, {"enabled": False}):
        r = complete(server, speculative=off)
        assert r["choices"][0]["text"] == base["choices"][0]["text"], off
        assert r["timings"]["draft_n"] == 0, off
    r = complete(server, **{"speculative.n_max": 0})  # llama-server's flat spelling
    assert r["timings"]["draft_n"] == 0
    server.wait_blocks_free()  # /metrics is the engine's snapshot after a step: let it catch up
    before = per_position(server, "sluice_spec_drafted_position_total")
    one = complete(server, speculative={"n_max": 1})
    server.wait_blocks_free()
    after = per_position(server, "sluice_spec_drafted_position_total")
    assert one["choices"][0]["text"] == base["choices"][0]["text"]
    assert 0 < one["timings"]["draft_n"] == after[1] - before[1]
    assert after[2] == before[2], "n_max 1: nothing drafted at position 2"
    big = complete(server, speculative={"n_max": 1000})  # clamped to --draft-max
    assert big["choices"][0]["text"] == base["choices"][0]["text"]
    assert big["timings"]["draft_n"] == base["timings"]["draft_n"]


@pytest.mark.parametrize("bad", [{"n_max": -1}, {"n_max": "3"}, {"n_max": 1.5}, {"depth": 2}, "yes", 3,
                                 {"enabled": "no"}])
def test_bad_override_is_a_400_naming_it(server, bad):
    r = httpx.post(server.base_url + "/completions",
                   json={"model": MODEL, "prompt": PROMPT, "max_tokens": 2, "speculative": bad}, timeout=60)
    assert r.status_code == 400, (bad, r.text)
    assert r.json()["error"]["param"] == "speculative"


def test_an_integral_float_n_max_counts_as_an_integer(server):
    """4.0 is 4, as it is for max_tokens (hostile report D27: it was a 400)."""
    r = httpx.post(server.base_url + "/completions",
                   json={"model": MODEL, "prompt": PROMPT, "max_tokens": 2, "speculative": {"n_max": 4.0}}, timeout=60)
    assert r.status_code == 200, r.text


def stream_chunks(server, path, body):
    with httpx.stream("POST", server.base_url + path, json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(ln[6:]) for ln in lines[:-1]]


def test_streams_carry_timings_in_the_last_chunk(server):
    chat = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 24, "temperature": 0}
    chunks = stream_chunks(server, "/chat/completions", chat)
    assert all("timings" not in c for c in chunks[:-1])
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    assert set(last["timings"]) == TIMINGS and last["timings"]["predicted_n"] == 24
    whole = httpx.post(server.base_url + "/chat/completions", json=chat, timeout=60).json()
    assert whole["timings"]["predicted_n"] == 24
    assert whole["timings"]["draft_n"] == last["timings"]["draft_n"]  # same tokens, same drafts (fixed policy)
    # With include_usage the usage chunk is last, and it carries them.
    chunks = stream_chunks(server, "/completions", {"model": MODEL, "prompt": PROMPT, "max_tokens": 8,
                                                    "stream_options": {"include_usage": True}})
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8
    assert chunks[-1]["timings"]["predicted_n"] == 8
    assert all("timings" not in c for c in chunks[:-1])


def test_metrics_count_acceptance_per_position(server):
    complete(server)
    server.wait_blocks_free()  # /metrics is the engine's snapshot after a step: let it catch up
    text = server.get("/metrics")  # one snapshot for every counter compared
    drafted = per_position(server, "sluice_spec_drafted_position_total", text)
    accepted = per_position(server, "sluice_spec_accepted_position_total", text)
    assert sorted(drafted) == sorted(accepted) == [1, 2, 3, 4]
    assert sum(drafted.values()) == total(text, "sluice_spec_drafted_tokens_total")
    assert sum(accepted.values()) == total(text, "sluice_spec_accepted_tokens_total") > 0
    # Every n-gram draft is a copy, from the prompt or from the output.
    assert (total(text, "sluice_spec_prompt_copy_drafted_tokens_total")
            + total(text, "sluice_spec_output_copy_drafted_tokens_total")) == total(text, "sluice_spec_drafted_tokens_total")
    assert (total(text, "sluice_spec_prompt_copy_accepted_tokens_total")
            + total(text, "sluice_spec_output_copy_accepted_tokens_total")) == total(text, "sluice_spec_accepted_tokens_total")
    for i in range(1, 5):
        assert accepted[i] <= drafted[i]
        if i > 1:  # a draft is accepted only after every one before it was
            assert accepted[i] <= accepted[i - 1] and drafted[i] <= drafted[i - 1]


def test_a_plain_server_reports_no_drafts(sluice_bin):
    s = Server(sluice_bin, TINY3, "-c", 128)
    try:
        r = complete(s, max_tokens=8, speculative={"n_max": 4})
        assert r["timings"]["draft_n"] == 0 and r["timings"]["predicted_n"] == 8
        assert per_position(s, "sluice_spec_drafted_position_total") == {}
    finally:
        assert_clean_exit(s)
