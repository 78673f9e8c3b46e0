#!/usr/bin/env python3
"""Regenerates the tokenizer golden data in tests/data/tokenizer/ from implementations sluice
did not write (conventions.md §6.1): llama.cpp (through llama-cpp-python) and Hugging Face
`tokenizers`. tests/python/test_tokenizer.py compares sluice against these files using only
the main .venv (no llama.cpp, no tokenizers at test time).

Command (`make golden`):

    python3 -m venv .venv-golden
    CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv-golden/bin/pip install -r python/requirements-golden.txt
    .venv-golden/bin/python python/make_tokenizer_golden.py

(pip compiles llama.cpp from the llama-cpp-python sdist: about 10 minutes on 2 cores.)
Optional: --model PATH (default models/gemma-3-270m-q4_k_m.gguf), --out DIR.

Files written (all deterministic for a given set of pinned packages):
  corpus.jsonl.gz           {"text": ...} per line: tokenizer_corpus.make_corpus()
  gemma3_llamacpp.jsonl.gz  llama.cpp on the real Gemma 3 270M GGUF: ids in 4 modes and
                            detokenizations, one line per corpus entry (format below)
  gemma3_vocab.json         llama.cpp's view of that vocabulary: special ids, flags, EOG ids,
                            non-NORMAL token attributes, FNV-1a hashes of every piece
  gemma4_toy.gguf           a small Gemma 4-style BPE vocabulary trained with `tokenizers`
                            (tokenizer.ggml.model "gemma4", merges, byte fallback, Gemma 4's
                            special tokens at their real ids where the vocabulary is large
                            enough, multimodal markers at its end)
  gemma4_hf.jsonl.gz        `tokenizers` ids (4 modes) and decode on the corpus
  gemma4_llamacpp.jsonl.gz  llama.cpp on gemma4_toy.gguf, same format as gemma3's
  gemma4_vocab.json         llama.cpp's view of gemma4_toy.gguf
  gemma4_divergence.jsonl.gz  inputs where llama.cpp and HF disagree by design (spec §7.3:
                            newline runs longer than the longest newline token)
  invalid_utf8.jsonl.gz     {"hex": bytes, "gemma3": [ids(0,0), ids(1,1)], "gemma4": ...}:
                            llama.cpp on invalid UTF-8 (spec §12.8), both vocabularies

Line format of the *_llamacpp / *_hf files:
  {"ids": {"a": ids(add_special=0, parse_special=0),
           "b": ids(0, 1)   -- omitted when equal to "a",
           "c": ids(1, 0)   -- omitted when equal to [BOS] + "a",
           "d": ids(1, 1)}  -- omitted when equal to [BOS] + "b",
   "dec": [detok(a, remove_special=0, unparse_special=0), detok(d, 1, 1), detok(d, 0, 0)]}
  (HF: "dec": [decode(a, skip_special_tokens=False)].) A detokenization is null when it
  equals the input text, a string when it is other valid UTF-8, else {"hex": ...}.
"""
import argparse
import ctypes
import gzip
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import tokenizer_corpus  # noqa: E402

SP = "\u2581"
FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv_pieces(pieces):
    """FNV-1a 64 over (u32 LE length, bytes) of each piece; sluice_tokenize_tool does the same."""
    h = FNV_OFFSET
    for p in pieces:
        for c in len(p).to_bytes(4, "little") + p:
            h = ((h ^ c) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def enc_text(b, text):
    if b == text.encode("utf-8"):
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": b.hex()}


def pack_ids(a, b, c, d, bos):
    e = {"a": a}
    if b != a:
        e["b"] = b
    if c != [bos] + a:
        e["c"] = c
    if d != [bos] + b:
        e["d"] = d
    return e


def write_jsonl_gz(path, rows):
    data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    # mtime=0: identical bytes on every run.
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, compresslevel=9) as g:
        g.write(data.encode("utf-8"))
    print(f"  {path.name}: {len(rows)} lines, {path.stat().st_size} bytes")


# ---------------------------------------------------------------------------------------
# llama.cpp

_LOG_CB = None


def quiet_llama(llama_cpp):
    """Silences llama.cpp's log (e.g. one "2 BOS tokens" warning per '<bos>...' entry)."""
    global _LOG_CB
    if _LOG_CB is None:
        _LOG_CB = llama_cpp.llama_log_callback(lambda level, text, user: None)
        llama_cpp.llama_log_set(_LOG_CB, ctypes.c_void_p(0))


class LlamaVocab:
    def __init__(self, path):
        from llama_cpp import Llama
        import llama_cpp
        quiet_llama(llama_cpp)
        self.lc = llama_cpp
        self.llm = Llama(str(path), vocab_only=True, verbose=False)
        self.vocab = self.llm._model.vocab
        self.n = self.lc.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text, add_special, parse_special):
        # Llama.tokenize(text, add_bos, special) is llama_tokenize(add_special, parse_special).
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special)

    def detokenize(self, ids, remove_special, unparse_special):
        arr = (self.lc.llama_token * max(1, len(ids)))(*ids)
        cap = 64 + 16 * len(ids)
        for _ in range(2):
            buf = ctypes.create_string_buffer(cap)
            n = self.lc.llama_detokenize(self.vocab, arr, len(ids), buf, cap, remove_special, unparse_special)
            if n >= 0:
                return buf.raw[:n]
            cap = -n + 1
        raise RuntimeError("llama_detokenize failed")

    def piece(self, tid, special):
        buf = ctypes.create_string_buffer(256)
        n = self.lc.llama_token_to_piece(self.vocab, tid, buf, 256, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self.lc.llama_token_to_piece(self.vocab, tid, buf, -n, 0, special)
        return buf.raw[:n]

    def info(self):
        lc, v = self.lc, self.vocab
        nil = lambda x: -1 if x is None or x < 0 else int(x)  # noqa: E731
        attrs = [[i, int(lc.llama_vocab_get_attr(v, i))] for i in range(self.n)
                 if int(lc.llama_vocab_get_attr(v, i)) != 4]
        return {
            "n_vocab": self.n,
            "bos": nil(lc.llama_vocab_bos(v)), "eos": nil(lc.llama_vocab_eos(v)),
            "eot": nil(lc.llama_vocab_eot(v)), "sep": nil(lc.llama_vocab_sep(v)),
            "pad": nil(lc.llama_vocab_pad(v)), "mask": nil(lc.llama_vocab_mask(v)),
            "nl": nil(lc.llama_vocab_nl(v)),
            "add_bos": bool(lc.llama_vocab_get_add_bos(v)), "add_eos": bool(lc.llama_vocab_get_add_eos(v)),
            "eog": [i for i in range(self.n) if lc.llama_vocab_is_eog(v, i)],
            "attrs": attrs,
            "pieces_fnv_special": fnv_pieces(self.piece(i, True) for i in range(self.n)),
            "pieces_fnv_plain": fnv_pieces(self.piece(i, False) for i in range(self.n)),
        }


def llamacpp_rows(lv, corpus, bos):
    rows = []
    for text in corpus:
        a = lv.tokenize(text, False, False)
        b = lv.tokenize(text, False, True)
        c = lv.tokenize(text, True, False)
        d = lv.tokenize(text, True, True)
        dec = [enc_text(lv.detokenize(a, False, False), text), enc_text(lv.detokenize(d, True, True), text),
               enc_text(lv.detokenize(d, False, False), text)]
        rows.append({"ids": pack_ids(a, b, c, d, bos), "dec": dec})
    return rows


# ---------------------------------------------------------------------------------------
# Gemma 4-style toy vocabulary (HF tokenizers)

CONTROL, USER_DEFINED, NORMAL, BYTE = 3, 4, 1, 6
MAX_NEWLINE_RUN = 48   # "\n" * 1..48 are tokens; the corpus has runs of at most 40

# gemma4.md §4.3; type as the converter writes it (spec §3.2: seven forced USER_DEFINED).
GEMMA4_FIXED = {
    0: ("<pad>", CONTROL), 1: ("<eos>", CONTROL), 2: ("<bos>", CONTROL), 3: ("<unk>", CONTROL),
    4: ("<mask>", CONTROL), 46: ("<|tool>", CONTROL), 47: ("<tool|>", CONTROL),
    48: ("<|tool_call>", USER_DEFINED), 49: ("<tool_call|>", USER_DEFINED),
    50: ("<|tool_response>", USER_DEFINED), 51: ("<tool_response|>", USER_DEFINED),
    52: ('<|"|>', USER_DEFINED), 98: ("<|think|>", CONTROL), 100: ("<|channel>", USER_DEFINED),
    101: ("<channel|>", USER_DEFINED), 105: ("<|turn>", CONTROL), 106: ("<turn|>", CONTROL),
    212: ("</s>", NORMAL),
}
GEMMA4_MULTIMODAL = ["<|image>", "<|audio>", "<|image|>", "<|audio|>", "<image|>", "<audio|>", "<|video|>"]


def gemma4_toy(corpus, vocab_size=4000):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    def pipeline(tok):
        tok.normalizer = normalizers.Replace(" ", SP)                      # metaspace, no prefix
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("\n+"), "isolated")  # [^\n]+|[\n]+
        tok.decoder = decoders.Sequence([decoders.Replace(SP, " "), decoders.ByteFallback(), decoders.Fuse()])
        return tok

    # Fixed layout: special ids 0..106 (fillers "<unusedN>"), newline runs from 107 ("\n" is
    # Gemma 4's id 107), "</s>" at 212, then the 256 byte tokens, then the trained pieces.
    fixed = []
    for i in range(107):
        fixed.append(GEMMA4_FIXED.get(i, (f"<unused{i}>", CONTROL)))
    for k in range(1, MAX_NEWLINE_RUN + 1):
        fixed.append(("\n" * k, NORMAL))
    while len(fixed) < 212:
        fixed.append((f"<unused{len(fixed)}>", CONTROL))
    fixed.append(GEMMA4_FIXED[212])
    fixed += [(f"<0x{b:02X}>", BYTE) for b in range(256)]
    fixed_texts = {t for t, _ in fixed} | set(GEMMA4_MULTIMODAL)

    # Train on the corpus without newlines (they are fixed tokens, never merged, like Gemma 4
    # where newline runs are added tokens) and without special-token strings: a trained
    # "<end_of_turn>" would be made CONTROL and EOG by llama.cpp's text rules (spec §2.1).
    specials = fixed_texts | set(tokenizer_corpus.GEMMA3_SPECIAL) | set(tokenizer_corpus.GEMMA4_SPECIAL)
    strip = re.compile("|".join(re.escape(t) for t in sorted(specials, key=len, reverse=True)
                                if t.startswith("<") or t.startswith("[")))
    train_lines = [line for s in corpus for line in strip.sub("", s).split("\n") if line]
    trainer_tok = pipeline(Tokenizer(models.BPE(byte_fallback=True)))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, limit_alphabet=300,
                                  initial_alphabet=[SP], show_progress=False)
    trainer_tok.train_from_iterator(train_lines, trainer)
    model = json.loads(trainer_tok.to_str())["model"]
    trained = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    clash = [t for t, _ in trained if t in fixed_texts]
    if clash:
        raise SystemExit(f"trained tokens collide with fixed ones: {clash[:10]}")

    tokens = fixed + [(t, NORMAL) for t, _ in trained] + [(t, CONTROL) for t in GEMMA4_MULTIMODAL]
    vocab = {t: i for i, (t, _) in enumerate(tokens)}
    assert len(vocab) == len(tokens), "duplicate token text"
    for a, b in merges:
        assert " " not in a and " " not in b and "\n" not in a + b

    hf = pipeline(Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token=None)))
    # Added tokens, matched before the model. Special = what llama.cpp treats as CONTROL after
    # loading (only matched with parse_special): CONTROL tokens, and "<|tool_response>", which
    # llama.cpp's stop-token rule turns USER_DEFINED|CONTROL (spec §2.1, §11). Newline runs
    # are non-special added tokens, as in Gemma 4's tokenizer.json (spec §7.3).
    from tokenizers import AddedToken
    from tokenizers.processors import TemplateProcessing
    added = []
    for t, ty in tokens:
        if ty == CONTROL or t == "<|tool_response>":
            added.append(AddedToken(t, special=True, normalized=False))
        elif ty == USER_DEFINED or (t and set(t) == {"\n"}):
            added.append(AddedToken(t, special=False, normalized=False))
    hf.add_tokens(added)
    hf.post_processor = TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    for t in ["<bos>", "<|turn>", "\n\n", "<|tool_response>", "<|channel>"]:
        assert hf.token_to_id(t) == vocab[t], t
    return tokens, [f"{a} {b}" for a, b in merges], hf


def write_gemma4_gguf(path, tokens, merges):
    import gguf
    w = gguf.GGUFWriter(str(path), "gemma4")
    w.add_name("sluice gemma4 toy tokenizer")
    w.add_tokenizer_model("gemma4")
    w.add_token_list([t for t, _ in tokens])
    w.add_token_types([ty for _, ty in tokens])
    w.add_token_scores([-1000.0] * len(tokens))   # placeholders, as the converter writes
    w.add_token_merges(merges)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_mask_token_id(4)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"  {path.name}: {len(tokens)} tokens, {len(merges)} merges, {path.stat().st_size} bytes")


def hf_rows(hf, corpus):
    rows = []
    for text in corpus:
        out = {}
        for parse in (False, True):
            hf.encode_special_tokens = not parse   # True: special added tokens are plain text
            for add in (False, True):
                out[(add, parse)] = hf.encode(text, add_special_tokens=add).ids
        hf.encode_special_tokens = False
        a = out[(False, False)]
        dec = hf.decode(a, skip_special_tokens=False)
        rows.append({"ids": pack_ids(a, out[(False, True)], out[(True, False)], out[(True, True)], 2),
                     "dec": [enc_text(dec.encode("utf-8"), text)]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=str(ROOT / "tests/data/tokenizer"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    corpus = tokenizer_corpus.make_corpus()
    print(f"corpus: {len(corpus)} entries")
    write_jsonl_gz(out / "corpus.jsonl.gz", [{"text": t} for t in corpus])

    print("Gemma 3 (llama.cpp, real vocabulary)")
    lv = LlamaVocab(args.model)
    info = lv.info()
    write_jsonl_gz(out / "gemma3_llamacpp.jsonl.gz", llamacpp_rows(lv, corpus, info["bos"]))
    (out / "gemma3_vocab.json").write_text(json.dumps(info, separators=(",", ":")) + "\n")
    del lv

    print("Gemma 4 toy (HF tokenizers, then llama.cpp)")
    tokens, merges, hf = gemma4_toy(corpus)
    gguf_path = out / "gemma4_toy.gguf"
    write_gemma4_gguf(gguf_path, tokens, merges)
    write_jsonl_gz(out / "gemma4_hf.jsonl.gz", hf_rows(hf, corpus))
    lv4 = LlamaVocab(gguf_path)
    info4 = lv4.info()
    # The HF pipeline mirrors llama.cpp's effective attributes only if its load-time text
    # rules touched nothing but the tokens planned for: check.
    assert info4["eog"] == [1, 50, 106], info4["eog"]
    assert all(i < 469 or i >= len(tokens) - len(GEMMA4_MULTIMODAL) for i, _ in info4["attrs"])
    write_jsonl_gz(out / "gemma4_llamacpp.jsonl.gz", llamacpp_rows(lv4, corpus, info4["bos"]))
    (out / "gemma4_vocab.json").write_text(json.dumps(info4, separators=(",", ":")) + "\n")

    probes = ["\n" * (MAX_NEWLINE_RUN + 1), "\n" * 100, "a" + "\n" * 70 + "b", "x\n\n" + "\n" * 60]
    rows = []
    for text in probes:
        rows.append({"text": text, "llamacpp": lv4.tokenize(text, False, False),
                     "hf": hf.encode(text, add_special_tokens=False).ids})
        assert rows[-1]["llamacpp"] != rows[-1]["hf"], "expected a divergence"
    write_jsonl_gz(out / "gemma4_divergence.jsonl.gz", rows)

    # Invalid UTF-8. Leads F4..F7 can decode above U+10FFFF, where llama.cpp's BPE pre-split
    # throws out of llama_tokenize (and aborts): Gemma 4 probes avoid them.
    lv3 = LlamaVocab(args.model)
    rows = []
    for text in invalid_utf8_probes():
        row = {"hex": text.hex()}
        for name, lv, ok in (("gemma3", lv3, True), ("gemma4", lv4, not any(0xF4 <= c <= 0xF7 for c in text))):
            if ok:
                row[name] = [lv.llm.tokenize(text, add_bos=False, special=False),
                             lv.llm.tokenize(text, add_bos=True, special=True)]
        rows.append(row)
    write_jsonl_gz(out / "invalid_utf8.jsonl.gz", rows)


def invalid_utf8_probes(n=300, seed=5):
    import random
    rng = random.Random(seed)
    fixed = [b"h\x80o", b"\xc0\x80", b"\xc1\xbf", b"\xed\xa0\x80", b"a \xc3 b", b"\xe2\x96", b"\xf0\x9f\x98",
             b"\xf5\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xff", b"\xfe\xff", b"\xf8\x88\x80\x80\x80", b"\xc3",
             b"<bos>\xc3<end_of_turn>\xa9", b"\xe2\x96\x81", b" \xe2 \x96 \x81"]
    alphabet = [b"a", b"o", b" ", b"  ", b"\n", b"\x80", b"\xbf", b"\xc0", b"\xc3", b"\xa9", b"\xe2", b"\x96",
                b"\x81", b"\xed", b"\xa0", b"\xf0", b"\x9f", b"\x98", b"\xf4", b"\xf5", b"\xff", b"<bos>",
                "é".encode(), "中".encode(), "😀".encode()]
    out = list(fixed)
    while len(out) < n:
        s = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        try:
            s.decode("utf-8")
        except UnicodeDecodeError:
            out.append(s)
    return out


if __name__ == "__main__":
    main()
