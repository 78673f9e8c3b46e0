"""sluice's tokenizer against implementations we did not write (conventions.md §6.1).

Golden data in tests/data/tokenizer/ (regenerate: python/make_tokenizer_golden.py):
  * Gemma 3: llama.cpp (llama-cpp-python) on the real Gemma 3 270M GGUF, which this test
    loads too (fixture gemma3_path);
  * Gemma 4: a small BPE vocabulary trained with HF `tokenizers` (gemma4_toy.gguf), with ids
    from the `tokenizers` pipeline and from llama.cpp.
Every corpus entry is checked in all four (add_special, parse_special) modes, plus
detokenization, the streaming decoder and the vocabulary's special ids, stop tokens, token
attributes and pieces. Only the main .venv is needed here.
"""
import gzip
import json

import pytest

from conftest import ROOT, _binary, run

DATA = ROOT / "tests" / "data" / "tokenizer"
MODES = ["(add_special=0, parse_special=0)", "(0, 1)", "(1, 0)", "(1, 1)"]


def read_jsonl_gz(name):
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def unpack_ids(e, bos):
    """Golden rows store ids(0,0) and only the modes that are not derivable from it."""
    a = e["a"]
    b = e.get("b", a)
    c = e.get("c", [bos] + a)
    d = e.get("d", [bos] + b)
    return [a, b, c, d]


def unpack_text(v, text):
    if v is None:
        return text.encode("utf-8")
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"])
    return v.encode("utf-8")


@pytest.fixture(scope="session")
def tokenize_tool():
    return _binary("tests/tools/sluice_tokenize_tool")


@pytest.fixture(scope="session")
def corpus():
    texts = [r["text"] for r in read_jsonl_gz("corpus.jsonl.gz")]
    assert len(texts) >= 2000
    return texts


@pytest.fixture(scope="session")
def corpus_file(corpus, tmp_path_factory):
    p = tmp_path_factory.mktemp("tok") / "corpus.jsonl"
    p.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus), encoding="utf-8")
    return p


def encode_all(tool, model, corpus_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("tok") / "out.jsonl"
    r = run([tool, "encode", model, corpus_file, out])
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        row["dec"] = [bytes.fromhex(h) for h in row["dec"]]
        row["stream"] = bytes.fromhex(row["stream"])
    return rows


def vocab_info(tool, model):
    r = run([tool, "info", model])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="session")
def gemma3_ours(tokenize_tool, gemma3_path, corpus_file, tmp_path_factory):
    return encode_all(tokenize_tool, gemma3_path, corpus_file, tmp_path_factory)


@pytest.fixture(scope="session")
def gemma4_ours(tokenize_tool, corpus_file, tmp_path_factory):
    return encode_all(tokenize_tool, DATA / "gemma4_toy.gguf", corpus_file, tmp_path_factory)


def compare_ids(corpus, ours, golden, bos, what):
    assert len(ours) == len(golden) == len(corpus)
    bad = []
    for i, (text, o, g) in enumerate(zip(corpus, ours, golden)):
        want = unpack_ids(g["ids"], bos)
        for m in range(4):
            if o["ids"][m] != want[m]:
                bad.append(f"#{i} {MODES[m]} text={text[:60]!r}\n  ours   {o['ids'][m][:30]}\n  {what} {want[m][:30]}")
    assert not bad, f"{len(bad)} of {4 * len(corpus)} mismatches vs {what}:\n" + "\n".join(bad[:8])


def compare_bytes(corpus, ours, golden, pairs, what):
    """pairs: (index in our "dec", index in the golden "dec", label)."""
    bad = []
    for i, (text, o, g) in enumerate(zip(corpus, ours, golden)):
        for oi, gi, label in pairs:
            want = unpack_text(g["dec"][gi], text)
            if o["dec"][oi] != want:
                bad.append(f"#{i} {label} text={text[:60]!r}\n  ours   {o['dec'][oi][:80]!r}\n  {what} {want[:80]!r}")
    assert not bad, f"{len(bad)} detokenization mismatches vs {what}:\n" + "\n".join(bad[:8])


# Our "dec": [decode(a,0,0), decode(d,1,1), decode(d,0,0), decode(a,0,0, clean_spaces=False)].
LLAMA_DEC_PAIRS = [(0, 0, "detok(ids00, 0, 0)"), (1, 1, "detok(ids11, 1, 1)"), (2, 2, "detok(ids11, 0, 0)")]


# ---- Gemma 3: llama.cpp on the real file

def test_gemma3_ids_match_llamacpp(corpus, gemma3_ours):
    compare_ids(corpus, gemma3_ours, read_jsonl_gz("gemma3_llamacpp.jsonl.gz"), 2, "llama.cpp")


def test_gemma3_detokenize_matches_llamacpp(corpus, gemma3_ours):
    golden = read_jsonl_gz("gemma3_llamacpp.jsonl.gz")
    compare_bytes(corpus, gemma3_ours, golden, LLAMA_DEC_PAIRS, "llama.cpp")
    # Round trip decode(encode(x)) == x wherever llama.cpp's holds (no clean-up for SPM).
    n_round_trip = 0
    for text, o, g in zip(corpus, gemma3_ours, golden):
        if g["dec"][0] is None:
            assert o["dec"][0] == text.encode("utf-8")
            n_round_trip += 1
    assert n_round_trip > 0.9 * len(corpus)


def test_gemma3_vocab_matches_llamacpp(tokenize_tool, gemma3_path):
    ours = vocab_info(tokenize_tool, gemma3_path)
    want = json.loads((DATA / "gemma3_vocab.json").read_text())
    for k in ["n_vocab", "bos", "eos", "eot", "sep", "pad", "mask", "nl", "add_bos", "add_eos", "eog",
              "attrs", "pieces_fnv_special", "pieces_fnv_plain"]:
        assert ours[k] == want[k], k
    assert ours["model"] == "llama"
    assert ours["eog"] == [1, 106, 212]   # <eos>, <end_of_turn>, and "</s>" (tokenizer.md §11)


# ---- Gemma 4: HF tokenizers and llama.cpp on the toy vocabulary

def test_gemma4_ids_match_hf_tokenizers(corpus, gemma4_ours):
    compare_ids(corpus, gemma4_ours, read_jsonl_gz("gemma4_hf.jsonl.gz"), 2, "HF")


def test_gemma4_ids_match_llamacpp(corpus, gemma4_ours):
    compare_ids(corpus, gemma4_ours, read_jsonl_gz("gemma4_llamacpp.jsonl.gz"), 2, "llama.cpp")


def test_gemma4_detokenize(corpus, gemma4_ours):
    # With llama.cpp's clean-up passes: byte-identical to llama_detokenize.
    compare_bytes(corpus, gemma4_ours, read_jsonl_gz("gemma4_llamacpp.jsonl.gz"), LLAMA_DEC_PAIRS, "llama.cpp")
    # Without them: HF's decode (Replace, ByteFallback, Fuse).
    compare_bytes(corpus, gemma4_ours, read_jsonl_gz("gemma4_hf.jsonl.gz"), [(3, 0, "decode(ids00)")], "HF")


def test_gemma4_vocab_matches_llamacpp(tokenize_tool):
    ours = vocab_info(tokenize_tool, DATA / "gemma4_toy.gguf")
    want = json.loads((DATA / "gemma4_vocab.json").read_text())
    for k in ["n_vocab", "bos", "eos", "eot", "sep", "pad", "mask", "nl", "add_bos", "add_eos", "eog",
              "attrs", "pieces_fnv_special", "pieces_fnv_plain"]:
        assert ours[k] == want[k], k
    assert ours["model"] == "gemma4"
    assert ours["eog"] == [1, 50, 106]   # <eos>, <|tool_response>, <turn|>


def test_gemma4_long_newline_runs_follow_llamacpp_not_hf(tokenize_tool, tmp_path):
    # Spec §7.3: llama.cpp emits a newline run whole only if it is one token, else merges it;
    # HF matches newline tokens leftmost-longest. sluice follows llama.cpp.
    rows = read_jsonl_gz("gemma4_divergence.jsonl.gz")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in rows))
    out = tmp_path / "o.jsonl"
    r = run([tokenize_tool, "encode", DATA / "gemma4_toy.gguf", corpus, out])
    assert r.returncode == 0, r.stderr
    for row, line in zip(rows, out.read_text().splitlines()):
        ours = json.loads(line)["ids"][0]
        assert ours == row["llamacpp"]
        assert ours != row["hf"]


# ---- invalid UTF-8 (spec §12.8): SPM keeps stray bytes, the Gemma 4 pre-split makes U+FFFD

def test_invalid_utf8_matches_llamacpp(tokenize_tool, gemma3_path, tmp_path):
    rows = read_jsonl_gz("invalid_utf8.jsonl.gz")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"hex": r["hex"]}) + "\n" for r in rows))
    checked = 0
    for name, model in (("gemma3", gemma3_path), ("gemma4", DATA / "gemma4_toy.gguf")):
        out = tmp_path / f"{name}.jsonl"
        r = run([tokenize_tool, "encode", model, corpus, out])
        assert r.returncode == 0, r.stderr
        for row, line in zip(rows, out.read_text().splitlines()):
            if name not in row:
                continue   # llama.cpp aborts on these (code points above U+10FFFF)
            ids = json.loads(line)["ids"]
            assert [ids[0], ids[3]] == row[name], (name, row["hex"])
            checked += 1
    assert checked > 400


# ---- streaming decoder, both vocabularies

@pytest.mark.parametrize("which", ["gemma3", "gemma4"])
def test_stream_decoder(which, corpus, request):
    ours = request.getfixturevalue(f"{which}_ours")
    held = 0
    for text, o in zip(corpus, ours):
        assert o["stream_utf8"], text
        # Pushing ids one by one yields decode() without clean-up, invalid bytes as U+FFFD.
        assert o["stream"] == o["dec"][3].decode("utf-8", "replace").encode("utf-8"), text
        held = max(held, o["stream_max_hold"])
    assert held >= 1   # some entries really split characters across tokens
