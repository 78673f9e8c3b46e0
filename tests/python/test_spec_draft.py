"""`sluice serve --spec draft` on tiny Gemma 4 (and the tiny mixture of experts) with its own
Q4_0 file as the draft and one --kv-memory budget shared by both: four concurrent requests (greedy and seeded-sampled at temperature 1.5) get
the texts a `--spec none` server gives, the draft's cache is carved out of the budget, and
the drafted/accepted counters move."""
import re

import pytest

from conftest import ROOT
from server_util import Server, assert_clean_exit, completion_texts

GOLDEN = ROOT / "tests/data/golden"


# tiny-gemma4-moe: the 26B-A4B-shaped mixture of experts (gemma4.md §2.9), on 2 threads so that
# its steps run whole experts per thread; a step's tokens are grouped by expert.
@pytest.mark.parametrize("tiny,threads", [("tiny-gemma4", "1"), ("tiny-gemma4-moe", "2")])
def test_serve_spec_draft_returns_the_plain_servers_text(sluice_bin, tiny, threads):
    target, draft = GOLDEN / f"{tiny}.f32.gguf", GOLDEN / f"{tiny}.q4_0.gguf"
    bodies = [{"model": "m", "prompt": p, "max_tokens": 40, "temperature": t, "seed": 5}
              for p in ("the quick brown fox jumps over the lazy dog " * 3, "one two three") for t in (0, 1.5)]

    results, logs = {}, {}
    for spec in ("none", "draft"):
        extra = ["--draft", draft, "--draft-max", "3"] if spec == "draft" else []
        s = Server(sluice_bin, target, "--alias", "m", "-t", threads, "-P", "4", "-c", "512", "--kv-memory", "4M",
                   "--spec", spec, *extra)
        try:
            results[spec] = completion_texts(s, bodies, timeout=120)
            drafted, accepted = s.metric("sluice_spec_drafted_tokens_total"), s.metric("sluice_spec_accepted_tokens_total")
            assert s.wait_blocks_free()
            logs[spec] = s.text()
        finally:
            assert_clean_exit(s)
        assert (drafted > 0 and 0 < accepted <= drafted) if spec == "draft" else drafted == 0
    assert results["none"][0] != results["none"][1]  # the sampled text is not the greedy one
    assert results["draft"] == results["none"]
    kv = {spec: float(re.search(r"KV ([0-9.]+) MiB", logs[spec]).group(1)) for spec in logs}
    draft_kv = float(re.search(r"draft .*KV cache ([0-9.]+) MiB", logs["draft"]).group(1))
    assert kv["none"] <= 4.0 and kv["draft"] + draft_kv <= 4.0 and kv["draft"] < kv["none"], (kv, draft_kv)
