"""python/make_e2b_shaped.py: the full E2B plan against the spec tables (no 3 GB file is
written), and small variants written, read back with the PyPI gguf package and run by sluice."""
import json
import math
import pathlib
import sys

import numpy as np
import gguf
import pytest
from gguf import GGMLQuantizationType as QT

from conftest import ROOT, run

sys.path.insert(0, str(ROOT / "python"))
import make_e2b_shaped as m   # noqa: E402

GEN = [sys.executable, str(ROOT / "python" / "make_e2b_shaped.py")]
# 35 layers with E2B's layer structure (pattern, 20 shared, double-wide FFN, head dims 256/512,
# PLE 256), but narrow and with a small vocabulary: ~50 MB, written in well under a second.
SMALL = ["--hidden", "256", "--ffn", "512", "--vocab", "2048"]
GB_26B = 14.42   # 26B-A4B-shaped Q4_0, GB


def spec_tensors():
    """(name -> (type, ne)) from gemma4.md §3.3 (shapes) and §3.4 (QAT types)."""
    t = {
        "token_embd.weight": (QT.Q6_K, (1536, 262144)),
        "per_layer_token_embd.weight": (QT.Q6_K, (8960, 262144)),
        "per_layer_model_proj.weight": (QT.BF16, (1536, 8960)),
        "per_layer_proj_norm.weight": (QT.F32, (256,)),
        "output_norm.weight": (QT.F32, (1536,)),
        "rope_freqs.weight": (QT.F32, (256,)),
    }
    for il in range(35):
        glob = il % 5 == 4
        hd, ff, p = (512 if glob else 256), (6144 if il < 15 else 12288), f"blk.{il}."
        t.update({
            p + "attn_norm.weight": (QT.F32, (1536,)),
            p + "attn_q.weight": (QT.Q4_0, (1536, 8 * hd)),
            p + "attn_k.weight": (QT.Q4_0, (1536, hd)),
            p + "attn_v.weight": (QT.Q4_0, (1536, hd)),
            p + "attn_output.weight": (QT.Q4_0, (8 * hd, 1536)),
            p + "attn_q_norm.weight": (QT.F32, (hd,)),
            p + "attn_k_norm.weight": (QT.F32, (hd,)),
            p + "post_attention_norm.weight": (QT.F32, (1536,)),
            p + "ffn_norm.weight": (QT.F32, (1536,)),
            p + "ffn_gate.weight": (QT.Q4_0, (1536, ff)),
            p + "ffn_up.weight": (QT.Q4_0, (1536, ff)),
            p + "ffn_down.weight": (QT.Q4_0, (ff, 1536)),
            p + "post_ffw_norm.weight": (QT.F32, (1536,)),
            p + "inp_gate.weight": (QT.Q4_0, (1536, 256)),
            p + "proj.weight": (QT.Q4_0, (256, 1536)),
            p + "post_norm.weight": (QT.F32, (1536,)),
            p + "layer_output_scale.weight": (QT.F32, (1,)),
        })
    return t


def test_full_plan_is_e2b_with_qat_types():
    plans = m.plan_tensors(m.Shape())
    got = {tp.name: (tp.qtype, tp.ne) for tp in plans}
    assert len(plans) == 601 == len(got)             # gemma4.md §3.3: 6 + 17 x 35
    assert got == spec_tensors()
    data = sum(tp.nbytes for tp in plans)
    # gemma4.md §3.4: the official file is 3,349,516,256 bytes; the types were inferred from that
    # size (Q8_0 or Q4_0 embeddings would be off by >= 100 MB). Tensor data + ~9 MB metadata.
    assert abs(data - m.SPEC_FILE_SIZE) / m.SPEC_FILE_SIZE < 0.003
    # what one decoded token streams (sluice's accounting, README): everything but the PLE table
    # (one row) and the unused K/V of the shared layers -> ~1407 MB
    streamed = 0
    for tp in plans:
        if tp.name == "per_layer_token_embd.weight":
            streamed += tp.nbytes // tp.ne[1]
        elif tp.name.startswith("blk.") and int(tp.name.split(".")[1]) >= 15 and \
                tp.name.split(".")[2] in ("attn_k", "attn_v", "attn_k_norm"):
            continue
        else:
            streamed += tp.nbytes
    assert abs(streamed - 1.407e9) < 2e6
    rope = next(tp for tp in plans if tp.name == "rope_freqs.weight").values
    assert rope.tolist() == [1.0] * 64 + [np.float32(1e30)] * 192


def test_vocab_loads_as_gemma4_bpe():
    tokens, types, merges = m.make_vocab(262144)
    assert len(tokens) == 262144 == len(set(tokens))   # llama.cpp asserts unique strings
    for i, (text, tt) in m.SPECIAL_TOKENS.items():
        assert tokens[i] == text and types[i] == int(tt)
    assert tokens[105:108] == ["<|turn>", "<turn|>", "\n"] and tokens[50] == "<|tool_response>"
    assert tokens[238] == "<0x00>" and tokens[493] == "<0xFF>"
    assert all(types[238 + b] == int(gguf.TokenType.BYTE) for b in range(256))
    ids = {t: i for i, t in enumerate(tokens)}
    assert "▁" in ids and "h" in ids and "hi" in ids
    # every merge joins two existing tokens into a third, ranks in id order (tokenizer.md §7.1)
    last = -1
    for r in merges:
        a, b = r.split(" ", 1)
        assert a in ids and b in ids and a + b in ids
        assert ids[a + b] > last
        last = ids[a + b]
    assert len(merges) > 250_000


def write_small(path, *extra, seed="0"):
    r = run(GEN + [path, "--seed", seed] + SMALL + list(extra))
    assert r.returncode == 0, r.stderr
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_small(tmp_path_factory.mktemp("e2b") / "small.gguf")


def field(r, key):
    f = r.fields[key]
    vals = [f.parts[i] for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(vals[0]).decode()
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        return [v.tolist()[0] for v in vals]
    return vals[0].tolist()[0]


def test_small_file_metadata_and_values(small):
    r = gguf.GGUFReader(str(small))
    assert field(r, "general.architecture") == "gemma4"
    assert field(r, "gemma4.block_count") == 35
    assert field(r, "gemma4.feed_forward_length") == [512] * 15 + [1024] * 20
    assert field(r, "gemma4.attention.sliding_window_pattern") == [True, True, True, True, False] * 7
    assert field(r, "gemma4.attention.shared_kv_layers") == 20
    assert (field(r, "gemma4.attention.key_length"), field(r, "gemma4.attention.key_length_swa")) == (512, 256)
    assert field(r, "gemma4.final_logit_softcapping") == 30.0
    assert field(r, "tokenizer.ggml.model") == "gemma4"
    assert len(r.tensors) == 601
    for t in r.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).ravel()
        assert np.isfinite(w).all(), t.name
        leaf = t.name.split(".")[-2]
        if t.name == "rope_freqs.weight":
            continue
        if t.tensor_type == QT.F32:
            lo, hi = m.NORM_RANGE[leaf]
            assert lo <= w.min() and w.max() <= hi, t.name
            continue
        std = m.WEIGHT_STD.get(leaf, m.WEIGHT_STD["matrix"])
        assert abs(w.std() / std - 1) < 0.1, (t.name, w.std(), std)
        assert abs(w.mean()) < 0.05 * std, t.name
        if t.tensor_type == QT.Q4_0:
            blocks = w.reshape(-1, 32)
            assert (np.abs(blocks).max(axis=1) > 0).all(), f"{t.name} has an all-zero block"


def test_deterministic_given_seed(small, tmp_path):
    again = write_small(tmp_path / "again.gguf")
    other = write_small(tmp_path / "other.gguf", seed="1")
    a, b, c = (pathlib.Path(p).read_bytes() for p in (small, again, other))
    assert a == b
    assert len(a) == len(c) and a != c


def test_sluice_runs_it_with_healthy_activations(small, sluice_bin, tmp_path):
    r = run([sluice_bin, "inspect", small, "--json", "--no-tensors"])
    assert r.returncode == 0, r.stderr
    out = tmp_path / "logits.f32"
    r = run([sluice_bin, "logits", "-m", small, "--ids", "2,600,1500,2000", "--out", out, "-t", "1"])
    assert r.returncode == 0, r.stderr
    x = np.fromfile(out, dtype=np.float32).reshape(4, 2048)
    assert np.isfinite(x).all()
    # after 35 layers the logits neither vanish nor saturate the softcap: the expected std is
    # sqrt(hidden) * 0.03 * rms(output_norm) ~ 0.5 here (1.2 at hidden 1536)
    assert (0.25 < x.std(axis=1)).all() and (x.std(axis=1) < 2).all()
    assert np.abs(x).max() < 20
    assert len(set(x.argmax(axis=1).tolist())) > 1   # different tokens, different predictions
    r = run([sluice_bin, "run", "-m", small, "-p", "hi", "-n", "2", "--temp", "0", "-t", "1"])
    assert r.returncode == 0, r.stderr


def test_bad_arguments_give_clear_errors(tmp_path):
    r = run(GEN + [tmp_path / "missing-dir" / "x.gguf"] + SMALL)
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = run(GEN + [tmp_path] + SMALL)
    assert r.returncode == 1 and "is a directory" in r.stderr
    r = run(GEN + [tmp_path / "x.gguf", "--hidden", "300", "--vocab", "2048"])
    assert r.returncode == 1 and "multiple of 256" in r.stderr
    r = run(GEN + [tmp_path / "x.gguf", "--vocab", "100"])
    assert r.returncode == 1 and "vocab" in r.stderr
    assert not list(tmp_path.glob("*.gguf*"))   # nothing half-written left behind


# ---- E4B and 31B (docs/spec/gemma4.md §1.3): the full plans against the spec's variant table,
# small files with each variant's layer structure written, accounted and run.

def spec_variants():
    """{column: {row label: cell}} of the variant table in docs/spec/gemma4.md §1.3."""
    text = (ROOT / "docs" / "spec" / "gemma4.md").read_text()
    sec = text.split("\n### 1.3", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in sec.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    header, body = rows[0], rows[1:]
    return {col: {r[0]: r[i] for r in body} for i, col in enumerate(header) if i > 0}


def shape_from_spec(col):
    v = spec_variants()[col]
    ints = lambda cell: [int(x) for x in cell.split("(")[0].replace(" ", "").split("/")]   # noqa: E731
    layers, hidden, ffn = ints(v["layers / hidden / ffn"])
    heads, kv_swa, kv_glob = ints(v["q heads / kv heads (sliding) / kv heads (global)"])
    n_s, n_f = (int(x) for x in v["pattern"].replace("S", "").replace("F", "").split(":"))
    ple = v["PLE width"].split()[0]
    return dict(layers=layers, hidden=hidden, ffn=ffn, heads=heads, kv_swa=kv_swa, kv_glob=kv_glob,
                pattern="S" * n_s + "F" * n_f, window=int(v["sliding window"]),
                shared=int(v["kv-shared layers"]), ple=int(ple), double_wide=v["double-wide MLP"] == "yes",
                k_eq_v=v["K=V (global layers have no v_proj)"] == "yes")


@pytest.mark.parametrize("variant,col", [("e2b", "E2B"), ("e4b", "E4B"), ("31b", "31B"), ("26b-a4b", "26B-A4B")])
def test_variant_shapes_match_the_spec_table(variant, col):
    want, s = shape_from_spec(col), m.VARIANTS[variant]
    got = dict(layers=s.layers, hidden=s.hidden, ffn=s.ffn, heads=s.heads, kv_swa=s.kv_heads,
               kv_glob=s.kv_heads_global or s.kv_heads, pattern=s.pattern, window=s.window,
               shared=s.shared_kv_layers, ple=s.ple, double_wide=s.double_wide, k_eq_v=s.k_eq_v)
    assert got == want
    assert (s.head_dim_swa, s.head_dim) == (256, 512) and s.vocab == 262144


def expected_plan(s):
    """name -> (type, ne), from the shape rules of docs/spec/gemma4.md §3.3 written out again."""
    E, V = s.hidden, 262144
    t = {"token_embd.weight": (QT.Q6_K, (E, V)), "rope_freqs.weight": (QT.F32, (256,)),
         "output_norm.weight": (QT.F32, (E,))}
    if s.ple:
        LP = s.layers * s.ple
        t.update({"per_layer_token_embd.weight": (QT.Q6_K, (LP, V)),
                  "per_layer_model_proj.weight": (QT.BF16, (E, LP)),
                  "per_layer_proj_norm.weight": (QT.F32, (s.ple,))})
    first_shared = s.layers - s.shared_kv_layers
    for il in range(s.layers):
        glob = s.pattern[il % len(s.pattern)] == "F"
        hd = 512 if glob else 256
        kvh = (s.kv_heads_global or s.kv_heads) if glob else s.kv_heads
        ff = s.ffn * (2 if s.double_wide and il >= first_shared else 1)
        p = f"blk.{il}."
        t.update({p + "attn_norm.weight": (QT.F32, (E,)), p + "attn_q.weight": (QT.Q4_0, (E, s.heads * hd)),
                  p + "attn_k.weight": (QT.Q4_0, (E, kvh * hd)),
                  p + "attn_output.weight": (QT.Q4_0, (s.heads * hd, E)),
                  p + "attn_q_norm.weight": (QT.F32, (hd,)), p + "attn_k_norm.weight": (QT.F32, (hd,)),
                  p + "post_attention_norm.weight": (QT.F32, (E,)), p + "ffn_norm.weight": (QT.F32, (E,)),
                  p + "ffn_gate.weight": (QT.Q4_0, (E, ff)), p + "ffn_up.weight": (QT.Q4_0, (E, ff)),
                  p + "ffn_down.weight": (QT.Q4_0, (ff, E)), p + "post_ffw_norm.weight": (QT.F32, (E,)),
                  p + "layer_output_scale.weight": (QT.F32, (1,))})
        if not (glob and s.k_eq_v):
            t[p + "attn_v.weight"] = (QT.Q4_0, (E, kvh * hd))
        if s.ple:
            t.update({p + "inp_gate.weight": (QT.Q4_0, (E, s.ple)), p + "proj.weight": (QT.Q4_0, (s.ple, E)),
                      p + "post_norm.weight": (QT.F32, (E,))})
        if s.experts:   # gemma4.md §2.9 / §3.3
            X, F = s.experts, s.expert_ffn
            t.update({p + "ffn_gate_inp.weight": (QT.F32, (E, X)), p + "ffn_gate_inp.scale": (QT.F32, (E,)),
                      p + "ffn_gate_up_exps.weight": (QT.Q4_0, (E, 2 * F, X)),
                      p + "ffn_down_exps.weight": (QT.Q4_0, (F, E, X)), p + "ffn_down_exps.scale": (QT.F32, (X,)),
                      p + "pre_ffw_norm_2.weight": (QT.F32, (E,)), p + "post_ffw_norm_1.weight": (QT.F32, (E,)),
                      p + "post_ffw_norm_2.weight": (QT.F32, (E,))})
    return t


@pytest.mark.parametrize("variant,n_tensors,gb", [("e4b", 720, 5.17), ("31b", 833, 17.64),
                                                   ("26b-a4b", 658, GB_26B)])
def test_full_variant_plans(variant, n_tensors, gb):
    s = m.VARIANTS[variant]
    plans = m.plan_tensors(s)
    got = {tp.name: (tp.qtype, tp.ne) for tp in plans}
    assert len(plans) == n_tensors == len(got)
    assert got == expected_plan(s)
    assert abs(sum(tp.nbytes for tp in plans) / 1e9 - gb) < 0.01
    if variant == "31b":   # the global layers (5, 11, ..., 59) have no V projection
        assert sorted(int(n.split(".")[1]) for n in got if n.startswith("blk.") and n.endswith("attn_k.weight")
                      and n.replace("attn_k", "attn_v") not in got) == list(range(5, 60, 6))


def test_small_moe_variant_written_accounted_and_run(sluice_bin, tmp_path):
    """26B-A4B's structure, shrunk: the expert keys and stacks, k/E of the expert bytes per
    token in inspect's accounting, and sluice runs it."""
    path = write_small(tmp_path / "26b.gguf", "--variant", "26b-a4b", "--layers", "6", "--experts", "16",
                       "--expert-ffn", "128")
    r = gguf.GGUFReader(str(path))
    assert (field(r, "gemma4.expert_count"), field(r, "gemma4.expert_used_count"),
            field(r, "gemma4.expert_feed_forward_length")) == (16, 8, 128)
    assert field(r, "gemma4.attention.head_count_kv") == [8] * 5 + [2]
    t = {x.name: x for x in r.tensors}
    assert [int(v) for v in t["blk.0.ffn_gate_up_exps.weight"].shape] == [256, 256, 16]
    assert [int(v) for v in t["blk.5.ffn_down_exps.weight"].shape] == [128, 256, 16]
    res = run([sluice_bin, "inspect", path, "--json", "--no-tensors"])
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    experts = sum(int(x.n_bytes) for x in r.tensors if "_exps.weight" in x.name)
    assert info["decode_stream"]["moe"]["expert_bytes_per_token"] == experts // 2
    total = sum(int(x.n_bytes) for x in r.tensors)
    assert info["decode_stream"]["bytes_per_token"] == total - experts // 2
    out = tmp_path / "logits.f32"
    res = run([sluice_bin, "logits", "-m", path, "--ids", "2,600,1500,2000", "--out", out, "-t", "1"])
    assert res.returncode == 0, res.stderr
    x = np.fromfile(out, dtype=np.float32).reshape(4, 2048)
    assert np.isfinite(x).all() and (x.std(axis=1) > 0.1).all()


def test_small_variants_written_accounted_and_run(sluice_bin, tmp_path):
    e4b = write_small(tmp_path / "e4b.gguf", "--variant", "e4b")
    g31 = write_small(tmp_path / "31b.gguf", "--variant", "31b", "--layers", "12")
    r = gguf.GGUFReader(str(e4b))
    assert field(r, "gemma4.block_count") == 42 and field(r, "gemma4.attention.shared_kv_layers") == 18
    assert field(r, "gemma4.feed_forward_length") == 512 and field(r, "gemma4.attention.head_count_kv") == 2
    assert field(r, "gemma4.attention.sliding_window_pattern") == ([True] * 5 + [False]) * 7
    r = gguf.GGUFReader(str(g31))
    assert field(r, "gemma4.attention.head_count_kv") == ([16] * 5 + [4]) * 2
    assert field(r, "gemma4.embedding_length_per_layer_input") == 0 and field(r, "gemma4.attention.sliding_window") == 1024
    names = {t.name for t in r.tensors}
    assert "blk.5.attn_v.weight" not in names and "blk.4.attn_v.weight" in names
    assert not any("per_layer" in n or n.endswith(("inp_gate.weight", "proj.weight")) for n in names)
    for path in (e4b, g31):
        # sluice inspect accounts every byte: per type, and per token (the KV tensors of shared
        # layers unused, one row of the PLE table)
        rd = gguf.GGUFReader(str(path))
        total = sum(int(t.n_bytes) for t in rd.tensors)
        res = run([sluice_bin, "inspect", path, "--json", "--no-tensors"])
        assert res.returncode == 0, res.stderr
        info = json.loads(res.stdout)
        assert sum(v["bytes"] for v in info["bytes_per_type"].values()) == total
        s = m.VARIANTS["e4b" if path == e4b else "31b"]
        first_shared = field(rd, "gemma4.block_count") - s.shared_kv_layers
        unused = sum(int(t.n_bytes) for t in rd.tensors if t.name.startswith("blk.")
                     and int(t.name.split(".")[1]) >= first_shared
                     and t.name.split(".")[2] in ("attn_k", "attn_v", "attn_k_norm"))
        ple = next((t for t in rd.tensors if t.name == "per_layer_token_embd.weight"), None)
        ple_saved = int(ple.n_bytes) - int(ple.n_bytes) // 2048 if ple is not None else 0
        assert info["decode_stream"]["unused_tensor_bytes"] == unused
        assert info["decode_stream"]["bytes_per_token"] == total - unused - ple_saved
    res = run([sluice_bin, "bench", "-m", e4b, "-t", "1", "-p", "8", "-n", "2", "--depths", "0", "--repeats", "1",
               "--json"])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["decode"]
