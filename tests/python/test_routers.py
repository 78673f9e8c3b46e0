"""The recipes in deploy/ run with the real routers (Debian's haproxy and nginx), on loopback,
in front of tiny-model replicas: session affinity, a replica killed under load (only its
in-flight requests fail, cleanly), a replica drained by SIGTERM under load (no request fails),
and SSE through nginx arriving as it is generated."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import httpx2 as httpx
import pytest

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
MODEL = "tiny-gemma3"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent_port(server):
    return int(re.search(r"agent-check on 127\.0\.0\.1:(\d+)", server.text()).group(1))


def replica(sluice_bin):
    return Server(sluice_bin, TINY, "-c", 512, "--parallel", 4, "--max-queue", 16, "--agent-port", 0,
                  "--drain-delay", 1, "--shutdown-timeout", 30)


def served(server):
    """/v1/completions requests this replica answered 200 (0 once it is gone)."""
    try:
        m = httpx.get(server.url + "/metrics", timeout=5).text
    except httpx.HTTPError:
        return 0
    hit = re.search(r'^sluice_requests_total\{endpoint="/v1/completions",status="200"\} (\S+)$', m, re.M)
    return int(float(hit.group(1))) if hit else 0


class HAProxy:
    def __init__(self, replicas):
        self.port = free_port()
        env = dict(os.environ, SLUICE_LB_BIND=f"127.0.0.1:{self.port}")
        for i, r in enumerate(replicas, 1):
            env[f"SLUICE_R{i}"] = f"127.0.0.1:{r.port}"
            env[f"SLUICE_R{i}_AGENT"] = str(agent_port(r))
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", str(ROOT / "deploy/haproxy/haproxy.cfg")], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        time.sleep(1.5)  # the first health and agent checks of every server

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def farm(sluice_bin):
    replicas = [replica(sluice_bin) for _ in range(3)]
    lb = HAProxy(replicas)
    yield lb, replicas
    lb.stop()
    for r in replicas:
        if r.proc.poll() is None:
            assert_clean_exit(r)
        else:
            r.stop()


def ask(url, session, results, stream, n=48):
    body = {"model": MODEL, "prompt": f"Session {session} tells a story about rivers.", "max_tokens": n,
            "ignore_eos": True, "stream": stream}
    t0 = time.monotonic()
    try:
        with httpx.stream("POST", url + "/v1/completions", json=body, headers={"X-Session-ID": session},
                          timeout=60) as r:
            text = "".join(r.iter_text())
            ok = r.status_code == 200 and (not stream or text.rstrip().endswith("data: [DONE]"))
            results.append((t0, time.monotonic(), ok, f"{r.status_code} {text[-120:]!r}"))
    except httpx.TimeoutException as e:
        results.append((t0, time.monotonic(), False, f"TIMEOUT {e!r}"))
    except httpx.HTTPError as e:
        results.append((t0, time.monotonic(), False, repr(e)))


def load(url, seconds, results, clients=6):
    """`clients` threads sending streamed and whole completions, each with its own sessions."""
    stop = time.monotonic() + seconds

    def client(c):
        i = 0
        while time.monotonic() < stop:
            ask(url, f"c{c}-{i % 5}", results, stream=(i % 2 == 0))
            i += 1
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    return threads


def test_same_session_lands_on_one_replica(farm):
    lb, replicas = farm
    before = [served(r) for r in replicas]
    results = []
    for _ in range(8):
        ask(lb.url, "alpha-session", results, stream=False, n=4)
    assert all(ok for _, _, ok, _ in results), results
    got = [served(r) - b for r, b in zip(replicas, before)]
    assert sorted(got) == [0, 0, 8], got
    # Other sessions spread over the replicas (consistent hashing, not one replica for all).
    for i in range(24):
        ask(lb.url, f"spread-{i}", results, stream=False, n=2)
    spread = [served(r) - b for r, b in zip(replicas, before)]
    assert sum(1 for x in spread if x > 0) >= 2, spread


def under_load(lb, seconds, action):
    """Runs the mixed load for `seconds`, calling action() 2 s in; returns (results, when)."""
    results = []
    threads = load(lb.url, seconds, results)
    time.sleep(2)
    when = time.monotonic()
    action()
    for t in threads:
        t.join()
    return results, when


def test_sigkill_fails_only_the_requests_in_flight_on_the_killed_replica(farm):
    lb, replicas = farm
    results, killed_at = under_load(lb, 6, replicas[1].proc.kill)
    failed = [r for r in results if not r[2]]
    # A request sent in the instant of the kill may still go out on a kept-alive connection to
    # the dying replica (a clean-clone run met one 11 ms after it: a 502, "incomplete
    # response"); HAProxy resends only what never reached a replica. From 0.1 s on, none.
    grace = 0.1
    started_after = [r for r in results if r[0] > killed_at + grace]
    assert started_after and all(ok for _, _, ok, _ in started_after), [r for r in started_after if not r[2]]
    for t0, t1, _, why in failed:   # in flight when the replica died, ended with a clean error
        assert t0 < killed_at + grace and killed_at < t1 and "TIMEOUT" not in why, why
    assert len(failed) <= 4 + 16  # at most what the victim held (--parallel + --max-queue)
    assert sum(1 for r in results if r[2]) > len(failed)


def test_sigterm_under_load_loses_no_request(farm):
    lb, replicas = farm
    victim = replicas[2]
    results, _ = under_load(lb, 7, lambda: victim.proc.send_signal(signal.SIGTERM))
    failed = [r for r in results if not r[2]]
    assert not failed, failed[:5]
    assert len(results) > 20
    assert victim.proc.wait(30) == 0
    assert "requests in flight finished" in victim.text() or "request(s) in flight finished" in victim.text()


NGINX_MAIN = """
daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/sluice.conf;
}}
"""


@pytest.fixture
def nginx(sluice_bin, gemma3_path):
    # The real 270M: tens of tokens a second on two cores, so a streamed token is an event of its
    # own (the tiny model's ~5,000 tokens/s lets the server coalesce 200 tokens into 3 writes).
    r = Server(sluice_bin, gemma3_path, "-c", 512, "--parallel", 2, "--alias", MODEL, "--shutdown-timeout", 30)
    tmp = tempfile.mkdtemp(prefix="sluice-nginx-")
    port = free_port()
    conf = (ROOT / "deploy/nginx/sluice.conf").read_text()
    conf = re.sub(r"127\.0\.0\.1:808[123]", f"127.0.0.1:{r.port}", conf)
    conf = conf.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{port};")
    with open(f"{tmp}/sluice.conf", "w") as f:
        f.write(conf)
    with open(f"{tmp}/nginx.conf", "w") as f:
        f.write(NGINX_MAIN.format(tmp=tmp))
    proc = subprocess.Popen([NGINX, "-c", f"{tmp}/nginx.conf", "-p", tmp], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)
    shutil.rmtree(tmp, ignore_errors=True)
    assert_clean_exit(r)


def arrivals(url, max_tokens=60):
    """Arrival times of the SSE data lines of one streamed completion through `url`."""
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
            "temperature": 0}
    times = []
    with httpx.stream("POST", url + "/v1/completions", json=body, headers={"X-Session-ID": uuid.uuid4().hex},
                      timeout=60) as r:
        assert r.status_code == 200   # (nginx consumes X-Accel-Buffering: the client never sees it)
        for line in r.iter_lines():
            if line.startswith("data: "):
                times.append(time.monotonic())
    assert len(times) > 10, len(times)   # events as tokens are made, then [DONE]
    return times


def distinct_reads(times):
    return len({round(t, 4) for t in times})


def test_nginx_passes_sse_as_it_is_generated(nginx):
    times = arrivals(nginx)
    # The client sees the stream as it is generated: many separate arrivals spread over the
    # generation, the first half of the events well before the last.
    assert times[-1] - times[0] > 0
    assert distinct_reads(times) > 20, distinct_reads(times)
    assert times[len(times) // 2] - times[0] > 0.1 * (times[-1] - times[0])
