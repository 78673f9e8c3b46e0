"""Speculative decoding end to end on the real Gemma 3 270M: `sluice run --spec ngram` must
print byte for byte what `--spec none` prints, greedy and seeded-sampled, for several draft
lengths, on a prompt whose continuation copies text (so drafts are accepted and rejected)."""
import functools
import re

import pytest

from conftest import ROOT, run, run_spec

PROMPT = ROOT / "bench/spec_grounded_prompt.txt"
# "untruncated" samples the whole distribution at T = 1: its tokens depend on the random
# number at nearly every position, so a verification keyed at the wrong position shows there.
SETTINGS = {"greedy": ["--temp", "0"], "sampled": ["--temp", "0.8", "--seed", "3"],
            "untruncated": ["--temp", "1", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", "3"]}


@functools.lru_cache(maxsize=None)
def generate(sluice_bin, model, setting, spec, k):
    args = [sluice_bin, "run", "-m", model, "-t", "2", "-n", "96", "-f", PROMPT, "--spec", spec,
            *SETTINGS[setting]]
    if spec != "none":
        args += ["--draft-max", k]
    return run_spec(args, spec, timeout=600)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("k", [1, 3, 8])
def test_ngram_output_is_byte_identical_to_plain_decoding(sluice_bin, gemma3_path, setting, k):
    plain, _ = generate(sluice_bin, gemma3_path, setting, "none", 0)
    spec, (drafted, accepted) = generate(sluice_bin, gemma3_path, setting, "ngram", k)
    print(f"{setting} K={k}: drafted {drafted}, accepted {accepted}")
    assert len(plain) > 200
    assert accepted > 0, "the prompt is copied: some drafts must be accepted"
    assert spec == plain


def test_run_splits_acceptance_into_prompt_copies_and_self_repetition(sluice_bin, gemma3_path):
    # Every n-gram draft is a copy: from the prompt (this prompt's output copies a paragraph)
    # or from the output itself; the two parts add up to the totals.
    r = run([sluice_bin, "run", "-m", gemma3_path, "-t", "2", "-n", "96", "-f", PROMPT, "--spec", "ngram",
             *SETTINGS["greedy"]], timeout=600)
    assert r.returncode == 0, r.stderr
    m = re.search(r"\[spec: drafted (\d+), accepted (\d+) \([\d.]+%\); copied from the prompt (\d+)/(\d+), "
                  r"from the output (\d+)/(\d+)\]", r.stderr)
    assert m, r.stderr
    drafted, accepted, acc_p, dr_p, acc_o, dr_o = map(int, m.groups())
    print(f"prompt copies {acc_p}/{dr_p}, self-repetition {acc_o}/{dr_o}")
    assert dr_p + dr_o == drafted and acc_p + acc_o == accepted
    assert acc_p > 0, "the output copies the prompt's paragraph"


def test_spec_flags_reject_bad_values(sluice_bin, gemma3_path):
    r = run([sluice_bin, "run", "-m", gemma3_path, "-p", "hi", "--spec", "magic"], timeout=120)
    assert r.returncode != 0 and "--spec 'magic'" in r.stderr
    r = run([sluice_bin, "run", "-m", gemma3_path, "-p", "hi", "--spec", "ngram", "--draft-max", "0"], timeout=120)
    assert r.returncode != 0 and "--draft-max" in r.stderr


def test_serve_with_ngram_returns_the_plain_servers_text_among_concurrent_requests(sluice_bin, gemma3_path):
    """Four requests at once (greedy and seeded-sampled, two prompts) to `serve --spec ngram`
    and to `serve --spec none`: the same texts; the drafted/accepted counters move only on
    the speculative server, and its KV blocks are all free afterwards."""
    from server_util import Server, assert_clean_exit, completion_texts

    copy = PROMPT.read_text()
    bodies = [{"model": "m", "prompt": p, "max_tokens": 64, "temperature": t, "seed": 3}
              for p in (copy, "Count: one, two, three, four, five, six,") for t in (0, 0.8)]

    results = {}
    for spec in ("none", "ngram"):
        s = Server(sluice_bin, gemma3_path, "--alias", "m", "-t", "2", "-P", "4", "--spec", spec, "--draft-max", "4")
        try:
            results[spec] = completion_texts(s, bodies)
            drafted, accepted = s.metric("sluice_spec_drafted_tokens_total"), s.metric("sluice_spec_accepted_tokens_total")
            assert s.wait_blocks_free()
        finally:
            assert_clean_exit(s)
        if spec == "none":
            assert (drafted, accepted) == (0, 0)
        else:
            print(f"serve --spec ngram: drafted {drafted:.0f}, accepted {accepted:.0f}")
            assert 0 < accepted <= drafted
    assert all(len(t) > 50 for t in results["none"])
    assert results["ngram"] == results["none"]
