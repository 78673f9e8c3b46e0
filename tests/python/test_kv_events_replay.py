"""The KV-event replay socket (--kv-events-replay), spoken as vLLM's replay_endpoint is: a
client joining late sends a start sequence number (8 bytes, big-endian) and gets every kept
batch from that number on as [seq, payload], then the end marker [-1 as 8 bytes, ""]. A live
pyzmq SUB socket (a peer we did not write) records what was published; the replayed payloads
must be the same bytes, in order, gap-free, and no older than the bounded buffer allows.
Malformed requests are ignored, as vLLM ignores them, and the server keeps serving."""
import threading
import time

import httpx2 as httpx
import msgpack
import pytest
import zmq

from conftest import ROOT
from server_util import Server, assert_clean_exit

TINY = ROOT / "tests/data/golden/tiny-gemma3.q8_0.gguf"
MODEL = "tiny-gemma3"
KEPT = 5  # --kv-events-buffer: the requests below publish more batches than this
END = b"\xff" * 8


class Live:
    """A SUB socket that records {seq: payload} as the batches are published."""

    def __init__(self, ctx):
        self.sock = ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.batches, self.last, self.stop = {}, time.monotonic(), False
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop:
            if self.sock.poll(50):
                _, seq, payload = self.sock.recv_multipart()
                self.batches[int.from_bytes(seq, "big")] = payload
                self.last = time.monotonic()

    def quiet(self, seconds=0.5, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() - self.last < seconds and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close(0)


@pytest.fixture(scope="module")
def replaying(sluice_bin, tmp_path_factory):
    ctx = zmq.Context()
    live = Live(ctx)
    replay = f"ipc://{tmp_path_factory.mktemp('kv')}/replay"
    s = Server(sluice_bin, TINY, "-c", 256, "--parallel", 2, "--kv-memory", "1M",
               "--kv-events", f"tcp://127.0.0.1:{live.port}", "--kv-events-replay", replay,
               "--kv-events-buffer", KEPT)
    # One request at a time: each publishes at least one batch of its own.
    for word in ["river", "mountain", "snow", "valley", "forest", "ocean", "desert", "meadow"]:
        r = httpx.post(s.url + "/v1/completions", json={"model": MODEL, "prompt": f"The {word} and the sky " * 6,
                                                         "max_tokens": 4, "temperature": 0}, timeout=60)
        assert r.status_code == 200
        time.sleep(0.02)
    live.quiet()
    yield s, live, replay, ctx
    live.close()
    assert_clean_exit(s)
    ctx.destroy(linger=0)  # closes what a failed test left open


def read_replay(sock, timeout_ms=5000):
    """[(seq, payload)] up to the end marker, each reply [b"", seq, payload] on a DEALER."""
    got = []
    while True:
        assert sock.poll(timeout_ms), f"no end marker after {got and got[-1][0]}"
        frames = sock.recv_multipart()
        assert len(frames) == 3 and frames[0] == b"" and len(frames[1]) == 8, frames
        frames = frames[1:]
        if frames[0] == END:
            assert frames[1] == b""
            return got
        got.append((int.from_bytes(frames[0], "big"), frames[1]))


def ask(ctx, replay, start):
    # A DEALER, not a REQ: a REQ socket takes one reply message per request and drops the rest,
    # so it would see only the first batch of a replay (vLLM's example client uses one).
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.connect(replay)
        sock.send_multipart([b"", start.to_bytes(8, "big")])
        return read_replay(sock)
    finally:
        sock.close(0)


def test_late_client_gets_batches_from_n_in_order(replaying):
    s, live, replay, ctx = replaying
    last = max(live.batches)
    assert last + 1 > KEPT + 2, "the requests published too few batches to test the bound"
    assert sorted(live.batches) == list(range(min(live.batches), last + 1))
    n = last - 2
    got = ask(ctx, replay, n)
    assert [q for q, _ in got] == [n, n + 1, n + 2]
    assert [p for _, p in got] == [live.batches[q] for q in (n, n + 1, n + 2)]  # the same bytes
    for _, p in got:
        ts, events, rank = msgpack.unpackb(p, raw=False)
        assert isinstance(ts, float) and rank == 0 and events
    # Older than the buffer: what is kept (the newest KEPT), the first seq showing the loss.
    assert [q for q, _ in ask(ctx, replay, 0)] == list(range(last + 1 - KEPT, last + 1))
    assert ask(ctx, replay, last + 1) == []  # nothing newer: the end marker alone


def test_malformed_requests_are_ignored_and_the_server_lives_on(replaying):
    s, live, replay, ctx = replaying
    last = max(live.batches)
    sock = ctx.socket(zmq.DEALER)
    sock.connect(replay)
    sock.send_multipart([b"", b"abc"])                            # seq not 8 bytes
    sock.send_multipart([b"", b"not-int!"[:7]])                   # 7 bytes
    sock.send_multipart([b"", last.to_bytes(8, "big"), b"more"])  # 4 frames at the ROUTER
    sock.send_multipart([last.to_bytes(8, "big")])                # no delimiter: 2 frames
    sock.send(b"")                                                # 1 frame after the identity
    assert not sock.poll(500), "a malformed request was answered"
    big = ctx.socket(zmq.DEALER)                                   # over the request size limit
    big.connect(replay)
    big.send_multipart([b"", b"7" * 100000])
    assert not big.poll(300)
    big.close(0)
    # The same client's next, valid request gets exactly its answer: nothing queued before it.
    sock.send_multipart([b"", last.to_bytes(8, "big")])
    assert [(q, p) for q, p in read_replay(sock)] == [(last, live.batches[last])]
    sock.close(0)
    assert httpx.get(s.url + "/health").status_code == 200
    assert "ignored a malformed request" in s.text()


def test_replay_needs_kv_events(sluice_bin, tmp_path):
    with pytest.raises(RuntimeError, match="--kv-events-replay needs --kv-events"):
        Server(sluice_bin, TINY, "--kv-events-replay", f"ipc://{tmp_path}/r", startup_timeout=30)
