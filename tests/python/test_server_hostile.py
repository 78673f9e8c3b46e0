"""`sluice serve` against hostile clients (issue 24), over raw sockets on loopback: body and
header limits before authentication, request deadlines, slowloris and idle connections,
pipelining, HTTP/1.0 streams, 405, malformed Content-Length, request counters, the connection
cap, and SIGTERM finishing within --shutdown-timeout whatever the clients do. Every loop is
bounded in count and every socket read has a timeout."""
import json
import re
import select
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
MODEL = "tiny-gemma3"
KEY = "sekrit"
AUTH = f"Authorization: Bearer {KEY}\r\n"
READ_TIMEOUT = 10   # seconds any single socket read may wait


@pytest.fixture(scope="module")
def server(sluice_bin):
    s = Server(sluice_bin, TINY, "-c", 256, "-P", 2, "--max-queue", 2, "--api-key", KEY, "--max-body", "64K",
               "--timeout", 2, "--keep-alive", 2, "--shutdown-timeout", 2)
    yield s
    assert_clean_exit(s)


def connect(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT)


class Reader:
    """HTTP/1.x responses off one socket, keeping what follows for the next (pipelining)."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def _until(self, sep):
        while sep not in self.buf:
            self._more()
        i = self.buf.index(sep)
        out, self.buf = self.buf[:i], self.buf[i + len(sep):]
        return out

    def _exactly(self, n):
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _rest(self):
        try:
            for _ in range(100000):
                self._more()
        except (EOFError, ConnectionResetError):
            pass
        out, self.buf = self.buf, b""
        return out

    def response(self):
        lines = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        version, status = lines[0].split(" ")[:2]
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            body = self._exactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            for _ in range(100000):
                n = int(self._until(b"\r\n"), 16)
                body += self._exactly(n + 2)[:n]
                if n == 0:
                    break
        else:
            body = self._rest()
        return version, int(status), headers, body

    def closed(self):
        """True once the server closed the connection (within READ_TIMEOUT)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def exchange(server, raw):
    with connect(server) as s:
        s.sendall(raw)
        return Reader(s).response()


def error_of(body):
    e = json.loads(body)["error"]
    assert isinstance(e["message"], str) and e["message"] and "type" in e
    return e


def request(method, path, body=b"", headers=""):
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {len(body)}\r\n\r\n").encode() + body


def test_d2_body_limit_is_checked_before_auth_and_before_reading(server):
    # No key and 256 MB announced: answered 413 from the headers alone, no byte of body sent.
    for method, path in [("POST", "/v1/completions"), ("GET", "/health"), ("POST", "/nowhere")]:
        _, status, headers, body = exchange(server, f"{method} {path} HTTP/1.1\r\nHost: x\r\n"
                                                    f"Content-Length: {256 << 20}\r\n\r\n".encode())
        assert status == 413, (path, body)
        assert "65536" in error_of(body)["message"]
        assert headers.get("connection") == "close"


def test_d3_chunked_bodies_have_the_same_limit(server):
    with connect(server) as s:
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\n{AUTH}Transfer-Encoding: chunked\r\n\r\n".encode())
        piece = b"4000\r\n" + b" " * 0x4000 + b"\r\n"
        for _ in range(64):   # up to 1 MiB, or until the server answers; the limit is 64 KiB
            if select.select([s], [], [], 0)[0]:
                break
            try:
                s.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
        _, status, _, body = Reader(s).response()
    assert status == 413 and "too large" in error_of(body)["message"], body


def test_d4_header_count_and_size_limits(server):
    many = "".join(f"X-H{i}: v\r\n" for i in range(150))   # ~1.5 KB: under the byte limit, over the count
    _, status, _, body = exchange(server, f"GET /health HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode())
    assert status == 431 and "header fields" in error_of(body)["message"]
    huge = "".join(f"X-H{i}: {'v' * 100}\r\n" for i in range(2000))   # ~220 KB
    _, status, _, body = exchange(server, f"GET /health HTTP/1.1\r\nHost: x\r\n{huge}\r\n".encode())
    assert status == 431, body
    _, status, _, body = exchange(server, f"GET /{'a' * 20000} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 414 and "request target" in error_of(body)["message"], body   # the URI, not the fields


def test_d26_framing_as_rfc_9112_reads_it(server):
    """Host is required on HTTP/1.1; an absolute-form target is served; a transfer coding other
    than plain chunked is refused (a decoding proxy would frame the body differently)."""
    _, status, _, body = exchange(server, b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert status == 400 and "Host" in error_of(body)["message"]
    _, status, _, _ = exchange(server, b"GET /health HTTP/1.0\r\n\r\n")   # 1.0 has no Host rule
    assert status == 200
    port = server.url.rsplit(":", 1)[1]
    _, status, _, body = exchange(server, f"GET http://127.0.0.1:{port}/health HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 200 and b"ok" in body
    raw = (f"POST /tokenize HTTP/1.1\r\nHost: x\r\n{AUTH}Transfer-Encoding: gzip, chunked\r\n\r\n"
           "5\r\nhello\r\n0\r\n\r\n").encode()
    _, status, _, body = exchange(server, raw)
    assert status == 501 and "gzip" in error_of(body)["message"]


def trickle(socks, stop, interval=0.2, max_rounds=100):
    for _ in range(max_rounds):
        if stop.wait(interval):
            return
        for s in socks:
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                pass


def test_d5_slowloris_neither_blocks_health_nor_outlives_the_request_deadline(server):
    socks = [connect(server) for _ in range(24)]   # more than the old server's 12 threads
    for s in socks:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    stop = threading.Event()
    t = threading.Thread(target=trickle, args=(socks, stop))
    t.start()
    try:
        assert json.loads(server.get("/health")) == {"status": "ok"}
        # Still trickling, they get 408 once the whole-request deadline (2 s) passes.
        for s in socks:
            _, status, _, body = Reader(s).response()
            assert status == 408 and "within 2 s" in error_of(body)["message"]
    finally:
        stop.set()
        t.join()
        for s in socks:
            s.close()


def test_d6_idle_connections_neither_block_health_nor_stay_open(server):
    socks = [connect(server) for _ in range(200)]
    try:
        assert json.loads(server.get("/health")) == {"status": "ok"}
        # Idle past --keep-alive (2 s): the server closes them without a word.
        assert all(Reader(s).closed() for s in socks[:5])
    finally:
        for s in socks:
            s.close()


def test_silent_half_request_gets_408(server):
    with connect(server) as s:
        s.sendall(f"POST /tokenize HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: 100\r\n\r\n{{\"cont".encode())
        r = Reader(s)
        _, status, headers, body = r.response()
        assert status == 408 and headers.get("connection") == "close"
        assert r.closed()


def test_d9_pipelined_requests_are_answered_in_order(server):
    tok = json.dumps({"content": "hello world"}).encode()
    raw = (request("GET", "/health") + request("GET", "/v1/models", headers=AUTH)
           + request("POST", "/tokenize", tok, headers=AUTH) + request("GET", "/nowhere")
           + request("GET", "/health"))
    with connect(server) as s:
        s.sendall(raw)
        r = Reader(s)
        got = [r.response() for _ in range(5)]
    assert [g[1] for g in got] == [200, 200, 200, 404, 200]
    assert json.loads(got[0][3]) == {"status": "ok"}
    assert json.loads(got[1][3])["data"][0]["id"] == MODEL
    assert len(json.loads(got[2][3])["tokens"]) >= 2


def test_d12_wrong_method_is_405_with_allow(server):
    for method, path, allow in [("GET", "/v1/completions", "POST"), ("POST", "/health", "GET"),
                                ("DELETE", "/v1/models", "GET"), ("PUT", "/tokenize", "POST")]:
        _, status, headers, body = exchange(server, request(method, path, headers=AUTH))
        assert status == 405, (method, path)
        assert allow in headers["allow"]
        assert method in error_of(body)["message"]
    _, status, _, body = exchange(server, request("GET", "/v2/nothing", headers=AUTH))
    assert status == 404 and "/v2/nothing" in error_of(body)["message"]


@pytest.mark.parametrize("value", ["-1", "18446744073709551616", "99999999999999999999999", "abc", "1, 2"])
def test_d13_malformed_content_length_is_400_at_once(server, value):
    _, status, _, body = exchange(server, f"POST /v1/completions HTTP/1.1\r\nHost: x\r\n{AUTH}"
                                          f"Content-Length: {value}\r\n\r\n".encode())
    assert status == 400 and "Content-Length" in error_of(body)["message"]


def stream_body(max_tokens=4):
    return json.dumps({"model": MODEL, "prompt": "Once", "max_tokens": max_tokens, "stream": True}).encode()


@pytest.mark.parametrize("version,extra", [("HTTP/1.0", ""), ("HTTP/1.1", "Connection: close\r\n")])
def test_d14_streams_to_http10_or_connection_close_are_close_delimited(server, version, extra):
    body = stream_body()
    raw = (f"POST /v1/completions {version}\r\nHost: x\r\n{AUTH}{extra}Content-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with connect(server) as s:
        s.sendall(raw)
        got_version, status, headers, data = Reader(s).response()   # read to the close
    assert status == 200 and got_version == version
    assert "transfer-encoding" not in headers and "content-length" not in headers
    assert data.endswith(b"data: [DONE]\n\n")
    # Nothing but SSE lines: events and keep-alive comments, no chunk sizes.
    lines = [l for l in data.split(b"\n") if l]
    assert all(l.startswith(b"data: ") or l.startswith(b":") for l in lines), data[:300]
    assert any(l.startswith(b"data: {") for l in lines)


def test_d17_request_counter_covers_every_answer(server):
    exchange(server, request("POST", "/v1/completions", b"{}"))                          # 401
    exchange(server, request("GET", "/nope"))                                             # 404
    exchange(server, request("GET", "/tokenize", headers=AUTH))                           # 405
    exchange(server, f"POST /tokenize HTTP/1.1\r\nContent-Length: {1 << 20}\r\n\r\n".encode())   # 413
    exchange(server, ("GET /health HTTP/1.1\r\n" + "X-A: b\r\n" * 200 + "\r\n").encode())  # 431
    exchange(server, request("POST", "/tokenize", b'{"content": "hi"}', headers=AUTH))    # 200
    exchange(server, request("POST", "/detokenize", b'{"tokens": [1, 2]}', headers=AUTH))  # 200
    text = server.get("/metrics")
    counts = {(m[0], int(m[1])): float(m[2]) for m in
              re.findall(r'^sluice_requests_total\{endpoint="([^"]*)",status="(\d+)"\} (\S+)$', text, re.M)}
    for status in (401, 404, 405, 413, 431):
        assert any(s == status for (_, s) in counts), (status, text)
    assert counts.get(("/tokenize", 200), 0) >= 1 and counts.get(("/detokenize", 200), 0) >= 1
    assert counts.get(("/v1/completions", 401), 0) >= 1 and counts.get(("/tokenize", 405), 0) >= 1


def test_keep_alive_serves_several_requests_on_one_connection(server):
    with connect(server) as s:
        r = Reader(s)
        for _ in range(3):
            s.sendall(request("POST", "/tokenize", b'{"content": "a b c"}', headers=AUTH))
            _, status, headers, body = r.response()
            assert status == 200 and headers.get("connection") != "close"


def test_expect_100_continue_and_head(server):
    body = b'{"content": "hi"}'
    with connect(server) as s:
        s.sendall(f"POST /tokenize HTTP/1.1\r\nHost: x\r\n{AUTH}Expect: 100-continue\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode())
        r = Reader(s)
        assert r._until(b"\r\n\r\n").startswith(b"HTTP/1.1 100 ")
        s.sendall(body)
        assert r.response()[1] == 200
        s.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n")
        head = r._until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and b"Content-Length: 15" in head
        s.sendall(request("GET", "/health"))   # no body came with the HEAD answer: the next one parses
        assert r.response()[3] == b'{"status":"ok"}'


def test_connection_cap_refuses_with_503(sluice_bin):
    s = Server(sluice_bin, TINY, "-c", 128, "--max-connections", 3, "--keep-alive", 30)
    try:
        held = [connect(s) for _ in range(3)]
        with connect(s) as extra:
            _, status, headers, body = Reader(extra).response()
            assert status == 503 and headers.get("connection") == "close"
            assert error_of(body)["type"] == "server_error"
        for h in held:
            h.close()
        for _ in range(100):   # the cap frees as the server notices the closes
            try:
                if json.loads(s.get("/health")) == {"status": "ok"}:
                    break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("/health never answered after the held connections closed")
    finally:
        assert_clean_exit(s)


# ---- SIGTERM ends within --shutdown-timeout whatever the clients do ----------------------

def long_stream_body():
    body = {"model": MODEL, "prompt": "Once", "max_tokens": 4000, "ignore_eos": True, "stream": True}
    return json.dumps(body).encode()


def start_stream(server):
    s = connect(server)
    body = long_stream_body()
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    r = Reader(s)
    r._until(b"\r\n\r\n")
    r._until(b"data: ")   # generating
    return s, r


SCENARIOS = ["trickling headers", "silent half-request", "active stream", "queued request"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_d7_sigterm_exits_within_the_shutdown_timeout(sluice_bin, scenario):
    s = Server(sluice_bin, TINY, "-c", 4096, "-P", 1, "--max-queue", 2, "--timeout", 600, "--keep-alive", 600,
               "--shutdown-timeout", 2)
    socks, stop, t, stream = [], threading.Event(), None, None
    try:
        if scenario == "trickling headers":
            socks = [connect(s) for _ in range(4)]
            for c in socks:
                c.sendall(b"POST /v1/completions HTTP/1.1\r\n")
            t = threading.Thread(target=trickle, args=(socks, stop, 0.1))
            t.start()
        elif scenario == "silent half-request":
            socks = [connect(s)]
            socks[0].sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"mo")
        else:
            stream = start_stream(s)
            if scenario == "queued request":
                q = connect(s)
                socks = [q]
                body = long_stream_body()
                q.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                for _ in range(200):
                    if s.metric("sluice_requests_waiting") == 1:
                        break
                    time.sleep(0.02)
                assert s.metric("sluice_requests_waiting") == 1
        time.sleep(0.3)
        s.proc.send_signal(signal.SIGTERM)
        try:
            s.proc.wait(20)   # --shutdown-timeout 2, plus start-up of the sanitizer's leak check
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit within 20 s of SIGTERM ({scenario})")
        if stream is not None:
            rest = stream[1]._rest()
            # SIGTERM lets in-flight requests finish within --shutdown-timeout (the drain,
            # docs/deploy.md): the stream ends whole, or with the error event past the deadline.
            assert (b'"error"' in rest and b"server_error" in rest) or b"data: [DONE]" in rest, rest[-500:]
    finally:
        stop.set()
        if t:
            t.join()
        for c in socks + ([stream[0]] if stream else []):
            c.close()
        assert_clean_exit(s)
