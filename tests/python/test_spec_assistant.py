"""`--spec assistant --draft FILE` end to end on the tiny Gemma 4 fixture and its tiny
assistant (tests/data/golden, `make fixtures`): `sluice run` prints byte for byte what
`--spec none` prints, greedy and seeded-sampled, for K in {1, 3, 8}, with a prompt longer
than the sliding window (16); a mismatched or missing drafter is a clear error."""
import functools

import pytest

from conftest import ROOT, run, run_spec

GOLDEN = ROOT / "tests/data/golden"
TARGET = GOLDEN / "tiny-gemma4.f32.gguf"
ASSISTANT = GOLDEN / "tiny-gemma4-assistant.f32.gguf"
PROMPT = "the quick brown fox jumps over the lazy dog, then the dog jumps over the fox again"
SETTINGS = {"greedy": ["--temp", "0"], "sampled": ["--temp", "0.8", "--seed", "3"]}


@functools.lru_cache(maxsize=None)
def generate(sluice_bin, setting, spec, k, head="centroid"):
    args = [sluice_bin, "run", "-m", TARGET, "-t", "2", "-n", "24", "-p", PROMPT, "--spec", spec,
            *SETTINGS[setting]]
    if spec != "none":
        args += ["--draft-max", k, "--draft", ASSISTANT, "--draft-head", head]
    return run_spec(args, spec, timeout=300)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("k", [1, 3, 8])
def test_assistant_output_is_byte_identical_to_plain_decoding(sluice_bin, setting, k):
    plain, _ = generate(sluice_bin, setting, "none", 0)
    spec, (drafted, _) = generate(sluice_bin, setting, "assistant", k)
    assert drafted > 0
    assert spec == plain


def test_full_head_too(sluice_bin):
    assert generate(sluice_bin, "greedy", "assistant", 3, "full")[0] == generate(sluice_bin, "greedy", "none", 0)[0]


def test_bad_drafters_are_clear_errors(sluice_bin):
    base = [sluice_bin, "run", "-m", TARGET, "-p", "hi", "-n", "2", "--spec", "assistant"]
    r = run(base, timeout=120)
    assert r.returncode != 0 and "needs --draft FILE" in r.stderr
    r = run(base + ["--draft", TARGET], timeout=120)
    assert r.returncode != 0 and "not a Gemma 4 assistant" in r.stderr
    r = run([sluice_bin, "run", "-m", GOLDEN / "tiny-gemma3.f32.gguf", "-p", "hi", "-n", "2", "--spec", "assistant",
             "--draft", ASSISTANT], timeout=120)
    assert r.returncode != 0 and "cannot read target" in r.stderr


def test_serve_with_the_assistant_returns_the_plain_servers_text(sluice_bin):
    """Four concurrent requests (greedy and seeded-sampled, two prompts) to `serve --spec
    assistant` and to `serve --spec none`: the same texts, drafts counted, KV blocks free."""
    from server_util import Server, assert_clean_exit, completion_texts

    bodies = [{"model": "m", "prompt": p, "max_tokens": 32, "temperature": t, "seed": 3}
              for p in (PROMPT, "Count: one, two, three, four, five, six,") for t in (0, 0.8)]

    results = {}
    for spec in ("none", "assistant"):
        s = Server(sluice_bin, TARGET, "--alias", "m", "-t", "2", "-P", "4", "--spec", spec, "--draft-max", "3",
                   "--draft", ASSISTANT)
        try:
            results[spec] = completion_texts(s, bodies)
            drafted = s.metric("sluice_spec_drafted_tokens_total")
            assert s.wait_blocks_free()
        finally:
            assert_clean_exit(s)
        assert (drafted > 0) == (spec == "assistant")
    assert results["assistant"] == results["none"]


def test_bench_prints_the_draft_step_cost(sluice_bin):
    import json
    r = run([sluice_bin, "bench", "-m", TARGET, "--draft", ASSISTANT, "-p", "16", "--depths", "32", "-n", "3",
             "--repeats", "1", "--bandwidth-gib", "0.0625", "--json"], timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["draft_step"]
    assert d["depth"] == 32 and all(d[k] > 0 for k in ("target_ms", "centroid_ms", "full_ms", "centroid_1t_ms"))
