"""The user-facing commands: logits (whole vs chunked), run, chat (scripted REPL)."""
import json
import re

import numpy as np

from conftest import ROOT, run

GOLDEN = ROOT / "tests/data/golden"


def test_logits_whole_chunked_and_single_agree(sluice_bin, tmp_path):
    man = json.loads((GOLDEN / "manifest.json").read_text())["models"]["tiny-gemma4"]
    ids = ",".join(map(str, man["token_ids"]))
    model = GOLDEN / man["variants"]["f32"]["gguf"]
    outs = []
    for chunk in ([], ["--chunk", "7"], ["--chunk", "1"]):
        out = tmp_path / f"l{len(outs)}.bin"
        r = run([sluice_bin, "logits", "-m", model, "--ids", ids, "--out", out, *chunk])
        assert r.returncode == 0, r.stderr
        outs.append(np.fromfile(out, dtype=np.float32).reshape(len(man["token_ids"]), man["n_vocab"]))
    ref = np.fromfile(GOLDEN / man["variants"]["f32"]["logits"], dtype=np.float32).reshape(outs[0].shape)
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    assert np.abs(outs[0] - ref).max() / np.abs(ref).max() < 1e-4


def test_logits_rejects_bad_ids(sluice_bin, tmp_path):
    model = GOLDEN / "tiny-gemma4.f32.gguf"
    for ids in ("1,x,3", "", "1,99999"):
        r = run([sluice_bin, "logits", "-m", model, "--ids", ids, "--out", tmp_path / "o.bin"])
        assert r.returncode != 0 and "error" in r.stderr, (ids, r.stderr)


def test_chat_session_reuses_the_cached_prefix(sluice_bin, gemma3_path):
    script = "Hello! Who are you?\nAnd what can you do?\n/reset\nHi again.\n"
    # The 270M file is a base model without a chat template: chat needs the built-in one asked for.
    r = run([sluice_bin, "chat", "-m", gemma3_path, "--builtin-template", "--temp", "0", "-n", "8"], input=script,
            timeout=300)
    assert r.returncode == 0, r.stderr
    prompts = [int(x) for x in re.findall(r"\[prompt: (\d+) tokens", r.stderr)]
    assert len(prompts) == 3, r.stderr
    # Turn 2 evaluates only what follows the cached conversation; after /reset everything again.
    assert prompts[1] < prompts[0] + 12
    assert "(conversation cleared)" in r.stdout
    assert prompts[2] > 5


def test_chat_on_a_base_model_points_to_run(sluice_bin, gemma3_path):
    # No tokenizer.chat_template in the file: a base model would answer a turn by writing more
    # turns, so chat refuses before reading any input and names `sluice run` instead.
    r = run([sluice_bin, "chat", "-m", gemma3_path, "--temp", "0", "-n", "4"], input="Hello!\n", timeout=120)
    assert r.returncode != 0
    assert "no chat template" in r.stderr and "sluice run" in r.stderr, r.stderr
    assert "[prompt:" not in r.stderr and r.stdout == ""


def test_run_reads_stdin_and_applies_the_chat_template(sluice_bin, gemma3_path):
    r = run([sluice_bin, "run", "-m", gemma3_path, "--chat", "--temp", "0", "-n", "4"], input="Say hi.")
    assert r.returncode == 0, r.stderr
    # <bos><start_of_turn>user\nSay hi.<end_of_turn>\n<start_of_turn>model\n = 1+1+1+1+3+1+1+1+1+1 tokens
    n = int(re.search(r"\[prompt: (\d+) tokens", r.stderr).group(1))
    assert 10 <= n <= 14


def test_run_spec_draft_prints_the_plain_text_and_its_counts(sluice_bin, tmp_path):
    """--spec draft on tiny Gemma 3: the draft (its own Q4_0 file) changes no byte of the
    output, greedy or sampled, and `run` reports drafted/accepted; bad drafts are errors."""
    target, draft = GOLDEN / "tiny-gemma3.f32.gguf", GOLDEN / "tiny-gemma3.q4_0.gguf"
    base = [sluice_bin, "run", "-m", target, "-p", "the quick brown fox", "-n", "24", "-t", "1"]
    for sampling in (["--temp", "0"], ["--temp", "0.8", "--seed", "3"]):
        plain = run([*base, *sampling])
        assert plain.returncode == 0, plain.stderr
        spec = run([*base, *sampling, "--spec", "draft", "--draft", draft, "--draft-max", "3"])
        assert spec.returncode == 0, spec.stderr
        assert spec.stdout == plain.stdout
        m = re.search(r"\[spec: drafted (\d+), accepted (\d+)", spec.stderr)
        assert m and int(m.group(1)) > 0, spec.stderr
    r = run([*base, "--spec", "draft"])
    assert r.returncode != 0 and "--spec draft needs --draft" in r.stderr
    bad = bytearray(draft.read_bytes())
    at = bad.find(b"<unused0>")
    bad[at + 6:at + 7] = b"e"
    (tmp_path / "bad.gguf").write_bytes(bad)
    r = run([*base, "--spec", "draft", "--draft", tmp_path / "bad.gguf"])
    assert r.returncode != 0 and "first difference at id" in r.stderr and "'<unusee0>'" in r.stderr, r.stderr
