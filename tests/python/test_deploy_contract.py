"""The contract routers and orchestrators read from one replica (docs/deploy.md): vLLM-named
/metrics parsed by prometheus_client's parser (the peer: the client library Prometheus users
run) and tracking a scripted load, liveness vs readiness, the drain on SIGTERM, SSE headers and
pings, X-Session-ID, and the HAProxy agent-check line."""
import json
import signal
import socket
import threading
import time

import httpx2 as httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
MODEL = "tiny-gemma3"


def families(server):
    """{family name: [(sample name, labels, value)]} of one /metrics scrape."""
    text = httpx.get(server.url + "/metrics", timeout=10).text
    out = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = [(s.name, s.labels, s.value) for s in fam.samples]
    return out


def value(fams, family, sample=None, **labels):
    for name, lab, v in fams[family]:
        if (sample is None or name == sample) and all(lab.get(k) == x for k, x in labels.items()):
            return v
    raise KeyError(f"{family} {sample} {labels}")


def long_body(n=300, stream=True, prompt="Once upon a time"):
    return {"model": MODEL, "prompt": prompt, "max_tokens": n, "ignore_eos": True, "stream": stream}


def run_stream(url, body, out, headers=None):
    """POSTs a streamed completion; appends (status, text, error) to out."""
    try:
        with httpx.stream("POST", url + "/v1/completions", json=body, headers=headers or {}, timeout=120) as r:
            text = "".join(r.iter_text())
            out.append((r.status_code, text, None))
    except Exception as e:  # noqa: BLE001 - a failed request is what some tests count
        out.append((None, "", repr(e)))


def stream_until(url, body, stop, out):
    """POSTs a streamed completion and hangs up once `stop` is set (or it ends); appends its status."""
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=120) as r:
        for _ in r.iter_lines():
            if stop.is_set():
                break
        out.append(r.status_code)


def start_streams(url, n, out, body=None):
    """n concurrent streamed completions, each appending its (status, text, error) to out."""
    threads = [threading.Thread(target=run_stream, args=(url, body or long_body(), out)) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


@pytest.fixture(scope="module")
def server(sluice_bin):
    s = Server(sluice_bin, TINY, "-c", 4096, "--parallel", 2, "--max-queue", 8, "--agent-port", 0)
    yield s
    assert_clean_exit(s)


def test_vllm_series_parse_and_describe_the_cache(server):
    fams = families(server)
    for fam in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                "vllm:cache_config_info", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
                "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"):
        assert fam in fams, fam
        assert all(lab.get("model_name") == MODEL for _, lab, _ in fams[fam]), fam
    (_, info, one), = fams["vllm:cache_config_info"]
    assert one == 1 and int(info["block_size"]) > 0 and int(info["num_gpu_blocks"]) > 0
    # The same snapshot feeds both names.
    assert value(fams, "vllm:kv_cache_usage_perc") == value(fams, "sluice_kv_usage_ratio")
    assert value(fams, "vllm:num_requests_running") == 0 and value(fams, "vllm:num_requests_waiting") == 0


def test_metrics_track_a_scripted_load(server):
    """Six long requests on --parallel 2: the gauges show 2 running and up to 4 waiting while the
    load lasts, a KV fraction inside (0, 1], and all zero afterwards; TTFT counts each request."""
    before = families(server)
    ttft0 = value(before, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count")
    out = []
    # 3000 tokens each: the tiny model writes ~12k tokens a second on a fast host, so 300-token
    # requests could all end between two scrapes; these keep four waiting for a few hundred ms.
    threads = start_streams(server.url, 6, out, long_body(3000))
    seen_run, seen_wait, kv, health_s = [], [], [], []
    while any(t.is_alive() for t in threads):
        fams = families(server)
        seen_run.append(value(fams, "vllm:num_requests_running"))
        seen_wait.append(value(fams, "vllm:num_requests_waiting"))
        kv.append(value(fams, "vllm:kv_cache_usage_perc"))
        t0 = time.monotonic()
        assert httpx.get(server.url + "/health", timeout=5).status_code == 200
        health_s.append(time.monotonic() - t0)
        time.sleep(0.01)
    for t in threads:
        t.join()
    assert [s for s, _, _ in out] == [200] * 6
    assert max(seen_run) == 2 and max(seen_wait) >= 3, (seen_run, seen_wait)
    assert all(0 <= k <= 1 for k in kv) and max(kv) > 0
    assert max(health_s) < 1.0   # liveness never waits on a step
    after = families(server)
    assert value(after, "vllm:num_requests_running") == 0 and value(after, "vllm:num_requests_waiting") == 0
    assert value(after, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") == ttft0 + 6


def test_prefix_cache_counters_follow_cached_tokens(server):
    prompt = "The river begins high in the mountains, where snow melts into streams. " * 6
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 2}
    httpx.post(server.url + "/v1/completions", json=body, timeout=30).raise_for_status()
    before = families(server)
    r = httpx.post(server.url + "/v1/completions", json=body, timeout=30).json()
    after = families(server)
    cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0
    hits = "vllm:prefix_cache_hits"
    queries = "vllm:prefix_cache_queries"
    assert value(after, hits) - value(before, hits) == cached
    assert value(after, queries) - value(before, queries) == r["usage"]["prompt_tokens"]


def test_ready_models_and_health_when_serving(server):
    assert httpx.get(server.url + "/ready").status_code == 200
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    assert httpx.get(server.url + "/v1/models").status_code == 200
    assert "warm-up step" in server.text()


def test_sse_headers_and_session_echo(server):
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 3, "stream": True, "user": "alice"}
    with httpx.stream("POST", server.url + "/v1/completions", json=body,
                      headers={"X-Session-ID": "sess-42"}) as r:
        assert r.headers["x-accel-buffering"] == "no"
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["x-session-id"] == "sess-42"
        assert "[DONE]" in "".join(r.iter_text())
    assert 'session="sess-42" user="alice"' in server.text()
    # A value that could forge a header or a log line is dropped, not echoed.
    r = httpx.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 1},
                   headers={"X-Session-ID": "a b"})
    assert r.status_code == 200 and "x-session-id" not in r.headers


def agent_line(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(100)
            if not chunk:
                break
            data += chunk
    return data.decode()


def agent_port(server):
    import re
    return int(re.search(r"agent-check on 127\.0\.0\.1:(\d+)", server.text()).group(1))


def test_agent_check_weight_falls_with_load(server):
    assert agent_line(agent_port(server)) == "ready 100%\n"
    out = []
    threads = start_streams(server.url, 6, out)
    lines = []
    while any(t.is_alive() for t in threads):
        lines.append(agent_line(agent_port(server)))
        time.sleep(0.01)
    for t in threads:
        t.join()
    weights = [int(line.split()[1].rstrip("%")) for line in lines if line.startswith("ready ")]
    assert len(weights) == len(lines) and min(weights) < 100, lines


def held_stream(url, body):
    """A streamed request whose client does not read (a 4 KiB receive buffer): the reply stays in
    flight until read_all() is called."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    data = json.dumps(body).encode()
    sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Connection: close\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def read_all(sock):
    sock.settimeout(120)
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    sock.close()
    return out.decode(errors="replace")


def test_drain_on_sigterm_finishes_in_flight_and_refuses_new(sluice_bin):
    """SIGTERM: /ready, /v1/models and the agent turn at once; /health stays 200; requests are
    still admitted for --drain-delay, then get 503 + Retry-After; every in-flight stream ends
    with [DONE]; exit 0."""
    s = Server(sluice_bin, TINY, "-c", 4096, "--parallel", 4, "--max-queue", 8, "--drain-delay", 1,
               "--shutdown-timeout", 120, "--agent-port", 0)
    port = agent_port(s)
    held = held_stream(s.url, long_body(3000))
    out = []
    threads = start_streams(s.url, 3, out)
    time.sleep(0.2)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert httpx.get(s.url + "/ready").status_code == 503
    m = httpx.get(s.url + "/v1/models")
    assert m.status_code == 503 and m.headers["retry-after"] == "1"
    assert httpx.get(s.url + "/health").status_code == 200
    assert agent_line(port) == "drain\n"
    during = httpx.post(s.url + "/v1/completions", json=long_body(8, stream=False), timeout=60)
    assert during.status_code == 200   # inside --drain-delay: still admitted
    time.sleep(1.2)
    # Past the delay a new request gets 503 + Retry-After while anything is still in flight. The
    # tiny model writes the held 3,000 tokens into the socket buffers in well under a second, so
    # the server may already have finished its work and exited: then the port is closed, which
    # refuses the request as surely.
    try:
        late = httpx.post(s.url + "/v1/completions", json=long_body(8, stream=False), timeout=60)
        assert late.status_code == 503 and late.headers["retry-after"] == "1"
        assert "shutting down" in late.json()["error"]["message"]
    except httpx.ConnectError:
        assert s.proc.poll() is not None or s.proc.wait(30) == 0
    held_text = read_all(held)
    for t in threads:
        t.join()
    assert len(out) == 3
    for status, text, err in out + [(200, held_text, None)]:
        assert err is None and status == 200 and text.rstrip().endswith("data: [DONE]"), (status, text[-200:], err)
        assert '"error"' not in text
    assert s.proc.wait(30) == 0
    assert_clean_exit(s)


def test_drain_past_the_shutdown_timeout_ends_streams_with_an_error_event(sluice_bin):
    s = Server(sluice_bin, TINY, "-c", 4096, "--parallel", 1, "--max-queue", 8, "--shutdown-timeout", 0)
    out = []
    # Long enough that the signal lands while they run or wait: the tiny model writes 300 tokens
    # in ~25 ms, so three of those could all be done before a fixed sleep ended.
    threads = start_streams(s.url, 3, out, long_body(4000))
    deadline = time.monotonic() + 30
    while s.metric("sluice_requests_running") != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
    assert s.proc.wait(30) == 0
    ended = [text for status, text, _ in out if status == 200 and '"error"' in text]
    assert ended, [(st, t[-200:], e) for st, t, e in out]
    for text in ended:
        last = [ln for ln in text.splitlines() if ln.startswith("data: ")][-1]
        assert json.loads(last[6:])["error"]["type"] == "server_error"
    assert_clean_exit(s)


def test_sse_pings_while_a_request_waits_in_the_queue(sluice_bin, gemma3_path):
    """The real 270M model on --parallel 1: while one long request runs, a queued stream gets
    `: ping` comments (about one a second) before its first token, so proxies see bytes."""
    s = Server(sluice_bin, gemma3_path, "-c", 1024, "--parallel", 1, "--max-queue", 4)
    try:
        alias = httpx.get(s.url + "/v1/models").json()["data"][0]["id"]
        first, pinged = [], threading.Event()
        # The running request lasts until the queued one has seen its ping (then its client hangs
        # up, which cancels it): a fixed length could end before the first ping on a fast host.
        t = threading.Thread(target=stream_until, args=(s.url, {**long_body(900), "model": alias}, pinged, first))
        t.start()
        deadline = time.monotonic() + 30
        while s.metric("sluice_requests_running") != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        lines, t0 = [], time.monotonic()
        with httpx.stream("POST", s.url + "/v1/completions", json={**long_body(2), "model": alias}, timeout=120) as r:
            for line in r.iter_lines():
                if line:
                    lines.append((time.monotonic() - t0, line))
        t.join()
        data_at = next(i for i, (_, ln) in enumerate(lines) if ln.startswith("data: "))
        pings = [at for at, ln in lines[:data_at] if ln == ": ping"]
        assert pings and pings[0] < 2.0, lines[:5]
        assert lines[-1][1] == "data: [DONE]"
    finally:
        assert_clean_exit(s)
