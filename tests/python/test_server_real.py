"""`sluice serve` on the real Gemma 3 270M: greedy output through the server equals
`sluice run --temp 0` for the same prompt, alone and while 7 other requests run in the same
batch (the forward is bitwise batch-invariant, so batching must not change a token)."""
import threading

import openai
import pytest

from conftest import run
from server_util import ASAN, Server, assert_clean_exit

pytestmark = pytest.mark.skipif(ASAN, reason="real-model tests run on the release build only")

N = 8
QUESTION = "Name three rivers in Europe."


@pytest.fixture(scope="module")
def served(sluice_bin, gemma3_path):
    s = Server(sluice_bin, gemma3_path, "-c", 512, "--parallel", 8, "--batch-tokens", 128, "--alias", "gemma3")
    yield s, openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0, timeout=600)
    assert_clean_exit(s)


def sluice_run(sluice_bin, model, *args):
    r = run([sluice_bin, "run", "-m", model, "--temp", 0, "-n", N, *args], timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout[:-1]   # run ends with a newline of its own


def test_greedy_chat_equals_sluice_run_alone_and_in_a_full_batch(served, sluice_bin, gemma3_path):
    s, client = served
    ref = sluice_run(sluice_bin, gemma3_path, "--chat", "-p", QUESTION)
    assert len(ref) > 0

    def ask(content):
        r = client.chat.completions.create(model="gemma3", messages=[{"role": "user", "content": content}],
                                           max_tokens=N, temperature=0)
        return r.choices[0].message.content

    assert ask(QUESTION) == ref
    others = {}
    threads = [threading.Thread(target=lambda i=i: others.__setitem__(i, ask(f"Write a haiku about the number {i}.")))
               for i in range(7)]
    for t in threads:
        t.start()
    crowded = ask(QUESTION)
    for t in threads:
        t.join()
    assert crowded == ref
    assert len(others) == 7 and all(others.values())
    assert s.wait_blocks_free()


def test_greedy_completion_equals_sluice_run(served, sluice_bin, gemma3_path):
    s, client = served
    prompt = "The capital of France is"
    ref = sluice_run(sluice_bin, gemma3_path, "-p", prompt)
    r = client.completions.create(model="gemma3", prompt=prompt, max_tokens=N, temperature=0)
    assert r.choices[0].text == ref
    streamed = "".join(c.choices[0].text for c in
                       client.completions.create(model="gemma3", prompt=prompt, max_tokens=N, temperature=0, stream=True))
    assert streamed == ref


def test_stop_at_end_of_turn_and_usage(served):
    s, client = served
    r = client.chat.completions.create(model="gemma3", messages=[{"role": "user", "content": "Say only: yes"}],
                                       max_tokens=24, temperature=0, stream=True, stream_options={"include_usage": True})
    chunks = list(r)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "<end_of_turn>" not in text
    assert chunks[-1].usage.prompt_tokens > 5
