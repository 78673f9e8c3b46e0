"""The real Gemma 3 270M through the `sluice` CLI against llama.cpp golden data
(tests/data/llamacpp/gemma3-270m.json, python/make_llamacpp_golden.py)."""
import json
import re

from conftest import ROOT, run

GOLD = json.loads((ROOT / "tests/data/llamacpp/gemma3-270m.json").read_text())


def test_perplexity_within_one_percent_of_llamacpp(sluice_bin, gemma3_path):
    p = GOLD["perplexity"]
    r = run([sluice_bin, "perplexity", "-m", gemma3_path, "-f", ROOT / p["text"], "--ctx", p["ctx"]])
    assert r.returncode == 0, r.stderr
    m = re.search(r"perplexity ([0-9.]+) over (\d+) tokens in (\d+) windows", r.stdout)
    assert m, r.stdout
    ppl, scored, windows = float(m.group(1)), int(m.group(2)), int(m.group(3))
    assert (scored, windows) == (p["n_scored"], p["n_windows"])   # same tokens, same windows
    assert scored >= 4000
    print(f"sluice {ppl:.4f} vs llama.cpp {p['ppl']:.4f}")
    assert abs(ppl - p["ppl"]) / p["ppl"] < 0.01


def test_run_greedy_continuation_matches_llamacpp(sluice_bin, gemma3_path):
    """`sluice run --temp 0` prints llama.cpp's greedy continuation of the first prompt."""
    case = GOLD["greedy"][0]
    r = run([sluice_bin, "run", "-m", gemma3_path, "-p", case["prompt"], "--temp", "0", "-n", "16"])
    assert r.returncode == 0, r.stderr
    assert "tokens/s" in r.stderr   # the run ends with prompt and generation speed
    gaps = case["top2_gap"][:16]
    if min(gaps) >= 0.05:           # no near-tie: the text must be identical
        tok = run([sluice_bin, "inspect", "--json", gemma3_path])
        pieces = json.loads(tok.stdout)["metadata"]
        vocab = next(m["value"] for m in pieces if m["key"] == "tokenizer.ggml.tokens")
        expect = "".join(vocab[t] for t in case["tokens"][:16]).replace("\u2581", " ")
        assert r.stdout.rstrip("\n") == expect
