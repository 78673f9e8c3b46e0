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


def test_run_with_a_json_schema_or_a_grammar_file(sluice_bin, tmp_path):
    # Random weights: the output is JSON (or GBNF text) only because the engine masks it.
    model = GOLDEN / "tiny-gemma3.q8_0.gguf"
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 99},
                                               "ok": {"type": "boolean"}},
              "required": ["n", "ok"], "additionalProperties": False}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    (tmp_path / "g.gbnf").write_text('root ::= ("yes" | "no") "!"\n')
    for seed in (1, 2, 3):
        r = run([sluice_bin, "run", "-m", model, "-p", "Hi", "-n", 60, "--seed", seed, "--json-schema", tmp_path / "s.json"])
        assert r.returncode == 0, r.stderr
        value = json.loads(r.stdout)
        assert list(value) == ["n", "ok"] and 1 <= value["n"] <= 99 and isinstance(value["ok"], bool)
        r = run([sluice_bin, "run", "-m", model, "-p", "Hi", "-n", 60, "--seed", seed, "--grammar", tmp_path / "g.gbnf"])
        assert r.returncode == 0, r.stderr
        assert r.stdout in ("yes!\n", "no!\n")
    (tmp_path / "bad.json").write_text('{"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}')
    r = run([sluice_bin, "run", "-m", model, "-p", "Hi", "--json-schema", tmp_path / "bad.json"])
    assert r.returncode != 0 and "dependentSchemas" in r.stderr
    r = run([sluice_bin, "run", "-m", model, "-p", "Hi", "--json-schema", tmp_path / "s.json", "--grammar", tmp_path / "g.gbnf"])
    assert r.returncode != 0


def test_bench_spec_verify_times_each_draft_length(sluice_bin):
    """--spec-verify: a row per (depth, K) with K = 0 the plain step, each step B·(K+1) tokens,
    its cost against the plain step, and tokens/s = B · (1 - a^(K+1)) / (1 - a) / step."""
    model = GOLDEN / "tiny-gemma4.f32.gguf"
    r = run([sluice_bin, "bench", "-m", model, "-t", "1", "-p", "8", "-n", "3", "--depths", "0,16",
             "--repeats", "1", "--batch", "2", "--spec-verify", "3,1", "--bandwidth-gib", "0.0625", "--json"])
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["spec_verify"]
    assert [(x["depth"], x["k"], x["tokens_per_step"]) for x in rows] == [
        (0, 0, 2), (0, 3, 8), (0, 1, 4), (16, 0, 2), (16, 3, 8), (16, 1, 4)]
    plain = {x["depth"]: x["ms_per_step"] for x in rows if x["k"] == 0}
    for x in rows:
        # every timed step verified K drafts per sequence (at depth 0 the first is the prompt's)
        assert x["drafts_verified"] == 2 * x["k"] * (x["steps"] - (x["depth"] == 0)), x
        assert abs(x["cost_vs_plain"] - x["ms_per_step"] / plain[x["depth"]]) < 1e-9
        at, k, ms = x["tokens_per_s_at_acceptance"], x["k"], x["ms_per_step"]
        assert abs(at["0.00"] - 2e3 / ms) < 1e-6 * at["0.00"]
        assert abs(at["0.50"] - 2 * (1 - 0.5 ** (k + 1)) / 0.5 * 1e3 / ms) < 1e-6 * at["0.50"]
        assert abs(at["1.00"] - 2 * (k + 1) * 1e3 / ms) < 1e-6 * at["1.00"]
    bad = run([sluice_bin, "bench", "-m", model, "--spec-verify", "2,0"])
    assert bad.returncode != 0 and "--spec-verify" in bad.stderr
