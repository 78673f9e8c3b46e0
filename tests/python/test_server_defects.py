"""Regression tests for the service-side defects a hostile-client probe found (issue 24):
D1 deep JSON, D8 / D11 admission of n choices, D15 NUL in messages, D16 misleading messages.
Loopback only, the tiny Gemma 3; every request and loop is bounded."""
import json
import threading
import time

import httpx2 as httpx
import pytest

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY3 = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
MODEL = "tiny-gemma3"
PARALLEL, QUEUE = 2, 2   # the server holds at most 4 requests: 2 running + 2 waiting


@pytest.fixture(scope="module")
def server(sluice_bin):
    s = Server(sluice_bin, TINY3, "-c", 16384, "--parallel", PARALLEL, "--max-queue", QUEUE)
    yield s
    assert_clean_exit(s)


def post(server, path, body, timeout=60):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx.post(server.url + path, content=data, headers={"content-type": "application/json"}, timeout=timeout)


def error_of(r, status):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    return err


def test_d1_deeply_nested_json_is_a_400_naming_the_limit(sluice_bin):
    # 150,000 levels (300 KB) used to overflow a worker's stack in a recursive copy.
    s = Server(sluice_bin, TINY3, "-c", 256)
    try:
        deep = "[" * 150000 + "]" * 150000
        msgs = '[{"role": "user", "content": "hi"}]'
        bodies = {
            "/v1/completions": f'{{"model": "{MODEL}", "prompt": {deep}}}',
            "/v1/chat/completions": f'{{"model": "{MODEL}", "messages": [{{"role": "user", "content": {deep}}}]}}',
            "/tokenize": f'{{"content": {deep}}}',
        }
        kwargs = f'{{"model": "{MODEL}", "messages": {msgs}, "chat_template_kwargs": {{"x": {deep}}}}}'
        for path, body in [*bodies.items(), ("/v1/chat/completions", kwargs)]:
            err = error_of(post(s, path, body), 400)
            assert "128" in err["message"] and "nested" in err["message"], err
        # Nesting within the limit still reaches the template.
        within = "[" * 100 + "]" * 100
        ok = f'{{"model": "{MODEL}", "messages": {msgs}, "max_tokens": 2, "chat_template_kwargs": {{"x": {within}}}}}'
        assert post(s, "/v1/chat/completions", ok).status_code == 200
        assert json.loads(s.get("/health"))["status"] == "ok"
    finally:
        assert_clean_exit(s)


def test_d11_n_that_can_never_fit_is_a_400_saying_what_fits(server):
    cap = PARALLEL + QUEUE
    for path, body in [("/v1/completions", {"prompt": "x"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})]:
        err = error_of(post(server, path, {"model": MODEL, "max_tokens": 2, "n": cap + 1, **body}), 400)
        assert err["param"] == "n" and f"n <= {cap}" in err["message"], err
    # n == capacity fits an idle server.
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 2, "n": cap})
    assert r.status_code == 200 and len(r.json()["choices"]) == cap
    assert server.wait_blocks_free()


def test_d8_refused_n_choices_take_no_room_from_other_clients(server):
    # One long stream runs; the room left is 1 slot + 2 waiting = 3. Client A keeps asking
    # for n = 4 (it fits an idle server, not this one): refused whole every time. Client B's
    # single requests must all still be admitted: A's refusals used to queue A's first
    # choices until they were cancelled, so B saw a full queue.
    # The held stream is far longer than the test (closing it at the end cancels it).
    hold = {"model": MODEL, "prompt": "hold", "max_tokens": 16000, "stream": True, "ignore_eos": True}
    stop = threading.Event()
    a_codes = []

    def client_a():
        with httpx.Client(timeout=30) as c:
            while not stop.is_set() and len(a_codes) < 2000:
                r = c.post(server.base_url + "/completions",
                           json={"model": MODEL, "prompt": "greedy", "max_tokens": 1900, "n": 4, "ignore_eos": True})
                a_codes.append(r.status_code)

    with httpx.stream("POST", server.base_url + "/completions", json=hold, timeout=60) as held:
        assert held.status_code == 200
        lines = held.iter_lines()
        next(lines)   # the stream is running
        a = threading.Thread(target=client_a)
        a.start()
        try:
            deadline = time.monotonic() + 10
            while len(a_codes) < 20 and time.monotonic() < deadline:
                time.sleep(0.01)
            b_codes = [post(server, "/v1/completions", {"model": MODEL, "prompt": "b", "max_tokens": 2}).status_code
                       for _ in range(20)]
            assert server.metric("sluice_requests_running") >= 1   # the held stream ran throughout
        finally:
            stop.set()
            a.join(30)
    assert a_codes and set(a_codes) == {429}, sorted(set(a_codes))
    assert b_codes == [200] * 20, b_codes
    assert server.wait_blocks_free()


def test_d15_messages_keep_text_after_a_nul(server):
    err = error_of(post(server, "/v1/chat/completions",
                        {"model": MODEL, "messages": [{"role": "wiz\u0000ard", "content": "x"}]}), 400)
    assert "wiz\u0000ard'" in err["message"], err
    err = error_of(post(server, "/v1/chat/completions",
                        {"model": "no\u0000such", "messages": [{"role": "user", "content": "x"}]}), 404)
    assert "no\u0000such'" in err["message"], err


def test_d16_messages_name_the_real_fault(server):
    msgs = [{"role": "user", "content": "hi"}]
    err = error_of(post(server, "/v1/chat/completions", {"model": MODEL, "messages": msgs, "temperature": 1e308}), 400)
    assert err["param"] == "temperature" and "out of range" in err["message"], err
    # 2^64 - 1 is a very large limit, not "less than 1": clamped to the context like any other.
    body = {"model": MODEL, "prompt": "x", "max_tokens": 2 ** 64 - 1, "stream": True}
    with httpx.stream("POST", server.base_url + "/completions", json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        next(r.iter_lines())   # admitted and streaming; closing cancels it
    err = error_of(post(server, "/v1/completions", {"model": MODEL, "prompt": "x", "n": 2 ** 64 - 1}), 400)
    assert err["param"] == "n" and "between 1 and" in err["message"], err
    # Float token ids are bad token ids, not "several prompts".
    err = error_of(post(server, "/v1/completions", {"model": MODEL, "prompt": [1.0, 2.5]}), 400)
    assert err["param"] == "prompt" and "token ids must be integers" in err["message"], err
    assert server.wait_blocks_free()
