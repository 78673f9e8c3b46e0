"""KV-cache events (--kv-events) read as llm-d's KV indexer reads vLLM's: a pyzmq SUB socket and
the msgpack package (peers we did not write) decode the 3-frame messages, and the index rebuilt
from BlockStored / BlockRemoved / AllBlocksCleared must match the server's own prefix cache
after mixed requests that evict; plus the render endpoints' token ids."""
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


class Indexer:
    """A subscriber that keeps {block hash: (parent hash, token ids)} from the event stream and
    checks every message's framing on the way."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.index, self.topics, self.seqs, self.removed, self.problems = {}, set(), [], 0, []
        self.block_size = None
        self.last = time.monotonic()
        self.stop = False
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop:
            if not poller.poll(50):
                continue
            frames = self.sock.recv_multipart()
            self.last = time.monotonic()
            if len(frames) != 3 or len(frames[1]) != 8:
                self.problems.append(f"framing: {[len(f) for f in frames]}")
                continue
            self.topics.add(frames[0].decode())
            self.seqs.append(int.from_bytes(frames[1], "big"))
            batch = msgpack.unpackb(frames[2], raw=False, strict_map_key=False)
            if not (isinstance(batch, list) and len(batch) == 3 and isinstance(batch[0], float)):
                self.problems.append(f"batch: {batch!r:.200}")
                continue
            for ev in batch[1]:
                self.apply(ev)

    def apply(self, ev):
        tag = ev[0]
        if tag == "BlockStored":
            hashes, parent, tokens, block_size = ev[1], ev[2], ev[3], ev[4]
            self.block_size = block_size
            if len(ev) != 8 or len(tokens) != block_size * len(hashes):
                self.problems.append(f"stored: {ev!r:.200}")
            for i, h in enumerate(hashes):
                if h in self.index:
                    self.problems.append(f"stored twice: {h}")
                if parent is not None and parent not in self.index:
                    self.problems.append(f"parent unknown: {parent}")
                self.index[h] = (parent, tuple(tokens[i * block_size:(i + 1) * block_size]))
                parent = h
        elif tag == "BlockRemoved":
            for h in ev[1]:
                if self.index.pop(h, None) is None:
                    self.problems.append(f"removed unknown: {h}")
                self.removed += 1
        elif tag == "AllBlocksCleared":
            self.index.clear()
        else:
            self.problems.append(f"unknown event {tag}")

    def quiet(self, seconds=0.5, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() - self.last < seconds and time.monotonic() < deadline:
            time.sleep(0.05)

    def chain_tokens(self, h):
        """The token ids from the prompt's start to the end of block h."""
        out = []
        while h is not None:
            parent, tokens = self.index[h]
            out[:0] = tokens
            h = parent
        return out

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close(0)
        self.ctx.term()


@pytest.fixture(scope="module")
def indexed(sluice_bin):
    idx = Indexer()
    # A small KV pool (a few dozen blocks): the requests below evict.
    s = Server(sluice_bin, TINY, "-c", 256, "--parallel", 2, "--kv-memory", "1M",
               "--kv-events", f"tcp://127.0.0.1:{idx.port}", "--kv-events-pod", "10.0.0.7:8000")
    yield s, idx
    idx.close()
    assert_clean_exit(s)


def tokenize(s, text, add_special=True):
    return httpx.post(s.url + "/tokenize", json={"content": text, "add_special": add_special}).json()["tokens"]


def complete(s, prompt, n=8):
    return httpx.post(s.url + "/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": n,
                                                        "temperature": 0}, timeout=60).json()


def test_index_rebuilt_from_events_equals_the_servers(indexed):
    s, idx = indexed
    words = ["river", "mountain", "snow", "valley", "forest", "ocean", "desert", "meadow"]
    prompts = [f"The {a} and the {b} " * 5 for a in words for b in words[:3]]
    # Mixed: fresh prompts, repeats (hits), shared prefixes with new tails, several at once.
    threads = []
    for i, p in enumerate(prompts):
        body = p + (" again" * (i % 3))
        threads.append(threading.Thread(target=complete, args=(s, body)))
        threads[-1].start()
        if i % 2:
            for t in threads:
                t.join()
            threads = []
    for t in threads:
        t.join()
    complete(s, prompts[0])
    idx.quiet()
    assert not idx.problems, idx.problems[:5]
    assert idx.topics == {f"kv@10.0.0.7:8000@{MODEL}"}
    # Gap-free. A PUB socket drops what it sends before a subscription reaches it: only the
    # start-up AllBlocksCleared (seq 0) may be missed, nothing a request caused.
    assert idx.seqs[0] <= 1 and idx.seqs == list(range(idx.seqs[0], idx.seqs[0] + len(idx.seqs)))
    assert idx.removed > 0                          # the pool was too small: blocks were evicted
    m = httpx.get(s.url + "/metrics").text
    server_blocks = int(float(next(ln.split()[-1] for ln in m.splitlines()
                                   if ln.startswith("sluice_prefix_cache_blocks "))))
    assert len(idx.index) == server_blocks > 0
    # The last prompt's full blocks are findable and their chain spells the prompt.
    ids = tokenize(s, prompts[0])
    bs = idx.block_size
    ends = [h for h in idx.index if len(idx.chain_tokens(h)) == (len(ids) // bs) * bs
            and idx.chain_tokens(h) == ids[:(len(ids) // bs) * bs]]
    assert len(ends) == 1


def test_render_endpoints_match_tokenize_and_the_template(indexed):
    s, _ = indexed
    r = httpx.post(s.url + "/v1/completions/render", json={"model": "any", "prompt": "Hello there, river"})
    assert r.status_code == 200
    (one,) = r.json()
    assert one["token_ids"] == tokenize(s, "Hello there, river")
    msgs = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"},
            {"role": "user", "content": "Tell me about rivers"}]
    r = httpx.post(s.url + "/v1/chat/completions/render", json={"model": "any", "messages": msgs})
    assert r.status_code == 200
    text = httpx.post(s.url + "/apply-template", json={"messages": msgs}).json()["prompt"]
    assert r.json()["token_ids"] == tokenize(s, text, add_special=False)
    usage = httpx.post(s.url + "/v1/chat/completions",
                       json={"model": MODEL, "messages": msgs, "max_tokens": 1}).json()["usage"]
    assert usage["prompt_tokens"] == len(r.json()["token_ids"])
    bad = httpx.post(s.url + "/v1/completions/render", json={"prompt": 7})
    assert bad.status_code == 400
