"""The hostile-client campaign of issue 41 (shared/reviews/hostile-http-2026-12-06.md, D18-D25)
as a regression suite: JSON nested 100,000 deep in the body and in every field that carries
JSON inside a string, on every route (400, server alive); 8 MiB bodies on every route (peak
RssAnon rise bounded, read from /proc; memory back near its baseline); key counts that grew
quadratically; the connection share, the side-route queue, the hard shutdown deadline, GBNF
naming an end-of-generation token. Loopback only, the tiny Gemma 3, every wait bounded."""
import concurrent.futures
import json
import os
import re
import signal
import socket
import threading
import time

import httpx2 as httpx
import pytest

from conftest import ROOT
from server_util import ASAN, Server, assert_clean_exit

TINY = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
MODEL = "tiny-gemma3"
DEEP = 100_000
MIB8 = 8 << 20
MSGS = [{"role": "user", "content": "hi"}]
ASAN_SLACK_MIB = 256 if ASAN else 0   # the ASan build's quarantine of freed blocks (256 MiB by default)


@pytest.fixture(scope="module")
def server(sluice_bin):
    s = Server(sluice_bin, TINY, "-c", 4096, "-P", 2, "--max-queue", 2)
    yield s
    assert_clean_exit(s)


def post(server, path, body, timeout=120):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body, separators=(",", ":"))
    return httpx.post(server.url + path, content=data, headers={"content-type": "application/json"}, timeout=timeout)


def assert_alive(server):
    assert json.loads(server.get("/health"))["status"] == "ok"


def calls_with_arguments(args):
    return {"model": MODEL, "max_tokens": 1, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]}]}


# ---- D18 and D1: deep JSON, in the body and inside strings ---------------------------------

def test_deep_json_in_the_body_is_a_400_on_every_route(server):
    deep = "[" * DEEP + "]" * DEEP
    bodies = {
        "/v1/completions": f'{{"model":"{MODEL}","prompt":{deep}}}',
        "/v1/chat/completions": f'{{"model":"{MODEL}","messages":{json.dumps(MSGS)},"response_format":{{"type":"json_schema","json_schema":{{"schema":{deep}}}}}}}',
        "/tokenize": f'{{"content":{deep}}}',
        "/detokenize": f'{{"tokens":{deep}}}',
        "/apply-template": f'{{"messages":{json.dumps(MSGS)},"tools":[{{"type":"function","function":{{"name":"f","parameters":{{"x":{deep}}}}}}}]}}',
    }
    for path, body in bodies.items():
        r = post(server, path, body)
        assert r.status_code == 400 and "nested deeper than 128" in r.json()["error"]["message"], (path, r.text[:300])
    assert_alive(server)


@pytest.mark.parametrize("path", ["/apply-template", "/v1/chat/completions"])
def test_deep_tool_call_arguments_are_a_400_naming_the_field(server, path):
    # 100,000 levels inside the arguments string crashed the server (SIGSEGV in a recursive
    # json -> ordered_json conversion), a 0.2 MB body.
    args = '{"a":' + "[" * DEEP + "]" * DEEP + "}"
    r = post(server, path, calls_with_arguments(args))
    err = r.json()["error"]
    assert r.status_code == 400, r.text[:300]
    assert err["message"] == ("messages[1].tool_calls[0].function.arguments is nested deeper than 128 levels "
                              "of arrays and objects"), err
    assert err["param"] == "messages"
    # Within the limit, the same conversation renders.
    ok = post(server, "/apply-template", calls_with_arguments('{"a":' + "[" * 100 + "]" * 100 + "}"))
    assert ok.status_code == 200 and '"arguments": {"a": [[' in ok.json()["prompt"].replace('":', '": '), ok.text[:300]
    assert_alive(server)


def test_deep_text_in_the_other_string_fields_leaves_the_server_answering(server):
    deep = "[" * DEEP + "]" * DEEP
    # A GBNF grammar's groups, JSON text as a tool result, as content, as a stop string.
    grammar = "root ::= " + "(" * DEEP + '"a"' + ")" * DEEP
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1, "grammar": grammar})
    assert r.status_code == 400 and "nested deeper than 128" in r.json()["error"]["message"], r.text[:300]
    tool_result = {"messages": [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "", "tool_calls": [
                                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                                {"role": "tool", "tool_call_id": "c1", "content": deep}]}
    for path, body in [("/apply-template", tool_result),
                       ("/apply-template", {"messages": [{"role": "user", "content": deep}]}),
                       ("/tokenize", {"content": deep}),
                       ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1, "stop": [deep[:1000]]})]:
        r = post(server, path, body)
        assert r.status_code in (200, 400), (path, r.status_code, r.text[:300])
    assert_alive(server)


# ---- D24: a GBNF token terminal naming an end-of-generation token ---------------------------

def test_gbnf_naming_an_end_token_is_a_400_at_compile_time(server):
    for grammar in ['root ::= "a" <[1]>', 'root ::= <[1]> | "b"']:
        r = post(server, "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 4, "grammar": grammar})
        assert r.status_code == 400 and "end-of-generation" in r.json()["error"]["message"], r.text
        assert r.json()["error"]["param"] == "grammar"


# ---- D19 / D20: 8 MiB bodies on every route, bounded memory --------------------------------

class PeakRss:
    """The highest RssAnon of the server while a block runs (sampled every 2 ms)."""

    def __init__(self, server):
        self.server, self.peak, self._stop = server, 0, threading.Event()

    def __enter__(self):
        self.base = self.server.rss_anon_kib()
        self.peak = self.base
        self._t = threading.Thread(target=self._run)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.server.rss_anon_kib())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    @property
    def rise_mib(self):
        return (self.peak - self.base) / 1024


def many_keys(n):
    return {f"{i:x}": {} for i in range(n)}


def big_bodies():
    """One body just under 8 MiB for each route and each large-input shape."""
    digits = ("1234567890" * (MIB8 // 10 + 1))[:MIB8 - 200]
    keys = many_keys(600_000)   # ~8 MB of keys
    return [
        ("/tokenize", {"content": digits, "with_pieces": True}),
        ("/tokenize", {"content": "a" * (MIB8 - 100)}),
        ("/detokenize", {"tokens": [5] * (MIB8 // 2 - 100)}),
        ("/v1/completions", {"model": MODEL, "prompt": digits, "max_tokens": 1}),
        ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": digits}], "max_tokens": 1}),
        ("/v1/chat/completions", {"model": MODEL, "messages": MSGS, "max_tokens": 1,
                                  "response_format": {"type": "json_schema", "json_schema": {
                                      "schema": {"type": "object", "properties": keys}}}}),
        ("/apply-template", {"messages": MSGS, "tools": [{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": keys}}}]}),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1, "json_schema": {},
                             "x": keys}),
        ("/apply-template", {"messages": [{"role": "user", "content": digits}]}),
    ]


def test_8mib_bodies_on_every_route_keep_memory_bounded(server):
    # Warm: the first constrained request builds the vocabulary's grammar tables (kept).
    for path, body in [("/tokenize", {"content": "warm up"}), ("/apply-template", {"messages": MSGS}),
                       ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1, "json_schema": {}})]:
        post(server, path, body)
    baseline = server.rss_anon_kib()
    report = []
    for path, body in big_bodies():
        data = json.dumps(body, separators=(",", ":")).encode()
        assert len(data) <= MIB8, (path, len(data))
        with PeakRss(server) as m:
            r = post(server, path, data, timeout=120)
        report.append(f"{path} {len(data) >> 20} MiB -> {r.status_code}, peak RssAnon +{m.rise_mib:.0f} MiB")
        assert r.status_code in (200, 400), (path, r.status_code, r.text[:300])
        assert m.rise_mib <= 64 * len(data) / 2**20 + ASAN_SLACK_MIB, report[-1]
        assert_alive(server)
    after = server.rss_anon_kib()
    print("\n".join(report), f"\nbaseline {baseline >> 10} MiB, after {after >> 10} MiB")
    if not ASAN:  # ASan's quarantine keeps freed memory on purpose
        assert after <= baseline * 1.10 + 16 * 1024, (baseline, after, report)


def test_two_tokenize_with_pieces_at_once_stay_within_twice_the_bound(server):
    digits = ("1234567890" * (MIB8 // 10 + 1))[:MIB8 - 200]
    data = json.dumps({"content": digits, "with_pieces": True}).encode()
    with PeakRss(server) as m, concurrent.futures.ThreadPoolExecutor(2) as ex:
        codes = [r.status_code for r in ex.map(lambda _: post(server, "/tokenize", data), range(2))]
    assert set(codes) <= {200, 400, 429}, codes
    assert m.rise_mib <= 2 * 64 * 8 + ASAN_SLACK_MIB, m.rise_mib
    assert_alive(server)


# ---- D20: work linear in an object's keys ----------------------------------------------------

def timed(server, path, body):
    data = json.dumps(body, separators=(",", ":"))
    t = time.monotonic()
    r = post(server, path, data)
    return time.monotonic() - t, r.status_code


@pytest.mark.parametrize("where", ["schema", "tool parameters", "ignored field"])
def test_key_counts_cost_linear_time(server, where):
    def body(n):
        schema = {"type": "object", "properties": many_keys(n)}
        if where == "schema":
            return "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "max_tokens": 1, "json_schema": schema}
        if where == "tool parameters":
            return "/apply-template", {"messages": MSGS, "tools": [
                {"type": "function", "function": {"name": "f", "parameters": schema}}]}
        return "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "max_tokens": 1, "x": schema,
                                        "response_format": {"type": "json_object"}}
    times = {}
    for n in (10_000, 20_000, 40_000, 80_000):
        times[n], status = timed(server, *body(n))
        assert status in (200, 400), (where, n, status)
    print(where, {n: round(t, 3) for n, t in times.items()})
    # Linear: 8x the keys within ~3x of 8x the time (quadratic was 35x from 10k to 80k).
    assert times[80_000] < 24 * times[10_000] + 0.1, times
    # An over-limit schema is refused before compiling (it was refused after 30 s).
    if where != "ignored field":
        t, status = timed(server, *body(120_000))
        assert status == 400 and t < 2, (t, status)


def test_over_limit_schema_refused_before_parsing_with_the_exact_size(server):
    """The size dump() gives the schema, counted by the scan that refuses it before the body is
    parsed (schema_precheck.cpp): escapes, numbers and UTF-8 as nlohmann writes them; a repeated
    key (dump() keeps one) leaves the refusal to the full path, whose count is the same text's."""
    props = {f"k\u00e9\"{i:x}": {"maximum": 1e5, "description": "\u20ac\n/"} for i in range(20_000)}
    schema = {"type": "object", "properties": props}
    compact = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    assert len(compact.encode()) > 1 << 20
    want = len(compact.encode())   # what nlohmann's dump() writes for this schema too
    for body in ({"model": MODEL, "messages": MSGS, "json_schema": schema},
                 {"model": MODEL, "messages": MSGS, "response_format": {
                     "type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": schema}}}):
        # Written with ASCII escapes and "\/": the scan decodes them as the full path would.
        text = json.dumps(body, ensure_ascii=True).replace("/", "\\/")
        r = post(server, "/v1/chat/completions", text)
        assert r.status_code == 400, r.text[:300]
        assert f"json schema: {want} bytes, over the limit of 1048576" in r.json()["error"]["message"], r.text[:300]
    dup = json.dumps({"model": MODEL, "messages": MSGS, "json_schema": schema})[:-2] + ', "type": "object"}}'
    r = post(server, "/v1/chat/completions", dup)
    assert r.status_code == 400 and f"json schema: {want} bytes" in r.text, r.text[:300]
    # Not the model served: the 404 comes first, as when the body is parsed.
    r = post(server, "/v1/chat/completions", {"model": "other", "messages": MSGS, "json_schema": schema})
    assert r.status_code == 404, r.text[:300]


# ---- D21: work outside the engine is admitted through a bounded share ------------------------

def test_side_routes_past_their_share_get_429_and_chat_still_answers(server):
    big = json.dumps({"content": "a" * (2 << 20)}).encode()   # a few hundred ms of tokenizing each
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        futs = [ex.submit(post, server, "/tokenize", big) for _ in range(16)]
        time.sleep(0.2)
        t = time.monotonic()
        chat = post(server, "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "max_tokens": 2})
        chat_s = time.monotonic() - t
        codes = [f.result().status_code for f in futs]
    assert chat.status_code == 200, chat.text
    assert codes.count(429) > 0 and set(codes) <= {200, 400, 429}, codes
    assert chat_s < 10, chat_s
    metrics = server.get("/metrics")
    counted = re.search(r'sluice_requests_total\{endpoint="/tokenize",status="429"\} (\d+)', metrics)
    assert counted and int(counted.group(1)) >= codes.count(429)
    assert re.search(r"^sluice_side_requests_running 0$", metrics, re.M), metrics   # the load gauge, idle again


def test_past_the_side_share_the_429_comes_before_the_body(server):
    # Four side requests whose headers arrived hold the four places while their bodies are still
    # to come; a fifth is refused from its headers alone: none of its body is ever sent (40
    # large uploads at once used to be read whole, 8 MiB each, before 36 of them got a 429).
    body = json.dumps({"content": "a b c"}).encode()
    head = (f"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    holders = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(4)]
    try:
        for h in holders:
            h.sendall(head)
        deadline = time.monotonic() + 10
        while server.metric("sluice_side_requests_running") != 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.metric("sluice_side_requests_running") == 4   # the places are taken at the headers
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as fifth:
            fifth.sendall(head)
            answer = fifth.recv(4096)   # a timeout here: the server waits for the body first
            assert answer.startswith(b"HTTP/1.1 429"), answer[:200]
            assert b"Retry-After: 1" in answer and b"rate_limit_error" in answer, answer
        for h in holders:
            h.sendall(body)
            assert h.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        for h in holders:
            h.close()
    assert server.metric("sluice_side_requests_running") == 0


def task_stats(pid):
    """{tid: (name, policy, nice, cpu ticks)} of every thread of pid, from /proc/<pid>/task."""
    out = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 1:].split()
        # Fields 14/15 utime/stime, 19 nice, 41 policy (proc(5)); rest[0] is field 3.
        out[task] = (name, int(rest[38]), int(rest[16]), int(rest[11]) + int(rest[12]))
    return out


def test_side_route_work_runs_below_the_engine(server):
    # The side routes' work (reading and parsing the body, rendering, tokenizing) runs on threads
    # of their own at SCHED_IDLE, so a crowd of them takes the CPU the engine leaves (a normal
    # thread that wakes takes the core back at once); the engine's requests keep their workers at
    # normal priority.
    before = task_stats(server.proc.pid)
    side = {t: v for t, v in before.items() if v[0] == "sluice-side"}
    assert len(side) == 4, before   # HttpOptions::side_workers: one thread per place
    assert all(v[1] == 5 for v in side.values()), side   # 5: SCHED_IDLE
    http = {t: v for t, v in before.items() if v[0] == "sluice-http"}
    assert http and all(v[1] == 0 and v[2] == 0 for v in http.values()), http
    # Lingering closes (refused bodies read and discarded) run there too: server/drainer.h.
    drain = [v for v in before.values() if v[0] == "sluice-drain"]
    assert len(drain) == 1 and drain[0][1] == 5, before
    # A template render of some 70 ms of CPU (small: below everything, it waits for whatever
    # else the host runs): its ticks land on the side threads.
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "a b c " * 25} for i in range(10_000)]
    r = post(server, "/apply-template", {"messages": msgs})
    assert r.status_code == 200, r.text[:300]
    after = task_stats(server.proc.pid)
    side_ticks = sum(after[t][3] - v[3] for t, v in side.items())
    http_ticks = sum(after[t][3] - v[3] for t, v in http.items() if t in after)
    assert side_ticks >= 3 and side_ticks > 2 * http_ticks, (side_ticks, http_ticks)


def test_a_side_routes_body_is_read_on_its_side_thread(server):
    # Reading a body costs CPU by its bytes (the copies, the kernel's TCP receive, charged to the
    # reading thread). The I/O threads run at the engine's priority: a side route's body is read
    # by its side thread instead (http_server.cpp, Conn::read_body_on_side). Eight 8 MiB bodies
    # read on the I/O threads took some 25 ticks of them on the 2-core host; now about none.
    pid = server.proc.pid
    before = task_stats(pid)
    io = {t: v for t, v in before.items() if v[0] == "sluice-io" or t == str(pid)}
    side = {t: v for t, v in before.items() if v[0] == "sluice-side"}
    data = json.dumps({"content": "7" * (MIB8 - 64)}).encode()
    for _ in range(8):
        r = post(server, "/tokenize", data)
        assert r.status_code == 400, r.text[:300]   # over the token cap
    after = task_stats(pid)
    io_ticks = sum(after[t][3] - v[3] for t, v in io.items() if t in after)
    side_ticks = sum(after[t][3] - v[3] for t, v in side.items() if t in after)
    assert io_ticks <= 4 and side_ticks > 2 * io_ticks, (io_ticks, side_ticks)


def test_a_side_body_in_pieces_is_read_whole_and_what_follows_it_kept(server):
    # The side thread reads the body as it comes (pauses between pieces, a chunked body) and
    # leaves the bytes after it for the next request on the connection (pipelining).
    body = json.dumps({"content": "hello world, hello side thread"}).encode()
    head = f"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    chunked = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               + f"{len(body) - 5:x}\r\n".encode() + body[:-5] + b"\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head + body[:7])
        time.sleep(0.2)
        s.sendall(body[7:20])
        time.sleep(0.2)
        s.sendall(body[20:] + chunked)
        time.sleep(0.2)
        s.sendall(f"5\r\n".encode() + body[-5:] + b"\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        deadline = time.monotonic() + 20
        while got.count(b"HTTP/1.1 200") < 3 and time.monotonic() < deadline:
            piece = s.recv(65536)
            if not piece:
                break
            got += piece
    assert got.count(b"HTTP/1.1 200") == 3, got[:2000]
    assert got.count(b'"tokens":[') == 2 and b'{"status":"ok"}' in got, got[:2000]


def test_a_client_leaving_mid_body_frees_its_side_place(server):
    head = b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
    for _ in range(6):   # more than the four places: each is given back when its client leaves
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(head + b'{"content":"' + b"x" * 5000)
            time.sleep(0.05)
    deadline = time.monotonic() + 10
    while server.metric("sluice_side_requests_running") != 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.metric("sluice_side_requests_running") == 0
    assert post(server, "/tokenize", {"content": "still here"}).status_code == 200


# ---- D22: one client cannot take the whole connection cap ------------------------------------

def test_one_client_with_every_idle_socket_leaves_others_answered(sluice_bin):
    cap = 64
    s = Server(sluice_bin, TINY, "-c", 256, "--max-connections", cap, "--keep-alive", 30)
    held = []
    try:
        held = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(cap)]
        time.sleep(0.3)
        # Another client: another loopback source address.
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(transport=transport, timeout=30) as other:
            assert other.get(s.url + "/health").json() == {"status": "ok"}
            r = other.post(s.url + "/v1/chat/completions", json={"model": MODEL, "messages": MSGS, "max_tokens": 2})
            assert r.status_code == 200, r.text
        # The holder itself is over its share: 503, counted.
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as extra:
            assert extra.recv(64).startswith(b"HTTP/1.1 503")
        assert re.search(r'sluice_requests_total\{endpoint="unmatched",status="503"\} [1-9]',
                         httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")).get(
                             s.url + "/metrics").text)
    finally:
        for h in held:
            h.close()
        assert_clean_exit(s)


# ---- D23: SIGTERM ends busy handlers at the deadline ------------------------------------------

def test_sigterm_with_a_busy_handler_exits_within_the_shutdown_timeout(sluice_bin):
    # A 60 MiB template render (330,000 messages: parsing and rendering take seconds) is at work
    # when SIGTERM comes. The whole body is sent first: the side-route count moves at the
    # headers, before the handler runs. The deadline is the drain (0 s here), the HTTP flush
    # (0.5 s), then 0.1 s for handlers.
    s = Server(sluice_bin, TINY, "-c", 4096, "--shutdown-timeout", 0, "--max-body", "64M")
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "a b c " * 25} for i in range(330_000)]
    body = json.dumps({"messages": msgs}).encode()
    sent = threading.Event()
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)

    def send():
        sock.sendall(f"POST /apply-template HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        sent.set()

    threading.Thread(target=send, daemon=True).start()
    assert sent.wait(30)
    time.sleep(0.2)   # the last bytes leave the socket buffers; the handler is parsing
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(30)
    took = time.monotonic() - t0
    sock.close()
    rc, log = s.stop()
    assert took <= 0 + 1, (took, log[-2000:])
    assert rc == 0, log[-2000:]
    assert "handler still busy" in log, log[-2000:]   # the deadline, not the work, ended them


# ---- D25: errors before the body are counted under their route -------------------------------

def test_413_is_counted_under_its_route(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as c:
        c.sendall(f"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: {64 << 20}\r\n\r\n".encode())
        assert c.recv(64).startswith(b"HTTP/1.1 413")
    assert re.search(r'sluice_requests_total\{endpoint="/tokenize",status="413"\} [1-9]', server.get("/metrics"))
