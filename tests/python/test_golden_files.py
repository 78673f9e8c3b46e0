"""The golden fixtures (tests/data/golden/: logits, taps and manifest written and committed
by python/make_golden.py; GGUFs rebuilt from the manifest by python/make_fixtures.py) must
be consistent: GGUFs parse with the PyPI `gguf` reader, carry every metadata key and exactly
the tensor names/shapes/types the specs list (gemma4.md §3.2/§3.3, gemma3.md §3.1/§3.3), and
the logits/taps files match the manifest. Needs only numpy + gguf (main .venv, no torch).

The last test re-runs python/make_golden.py's numpy forward (written from the spec text,
reading only the GGUF) and checks it reproduces the committed transformers logits, so a
stale or mismatched GGUF/logits pair fails here."""
import hashlib
import json
import math
import pathlib
import sys

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT, GGUFReader, GGUFValueType as VT

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden"
sys.path.insert(0, str(ROOT / "python"))

MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
VARIANTS = [(mid, ot) for mid, e in MANIFEST["models"].items() for ot in e["variants"]]
OUTTYPE_QT = {"f32": QT.F32, "f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0}

# Required metadata keys and their GGUF types (gemma4.md §3.2, §4.1, gemma3.md §3.1).
U32, F32, STR, ARRAY = VT.UINT32, VT.FLOAT32, VT.STRING, VT.ARRAY
COMMON_KEYS = {
    "general.architecture": STR, "general.file_type": U32,
    "{a}.block_count": U32, "{a}.context_length": U32, "{a}.embedding_length": U32,
    "{a}.attention.head_count": U32, "{a}.attention.head_count_kv": U32,
    "{a}.attention.key_length": U32, "{a}.attention.value_length": U32,
    "{a}.attention.layer_norm_rms_epsilon": F32, "{a}.rope.freq_base": F32,
    "{a}.rope.freq_base_swa": F32, "{a}.attention.sliding_window": U32,
    "tokenizer.ggml.model": STR, "tokenizer.ggml.tokens": VT.ARRAY,
    "tokenizer.ggml.scores": VT.ARRAY, "tokenizer.ggml.token_type": VT.ARRAY,
    "tokenizer.ggml.bos_token_id": U32, "tokenizer.ggml.eos_token_id": U32,
}
GEMMA4_KEYS = {
    "{a}.attention.key_length_swa": U32, "{a}.attention.value_length_swa": U32,
    "{a}.rope.dimension_count": U32, "{a}.rope.dimension_count_swa": U32,
    "{a}.attention.sliding_window_pattern": VT.ARRAY, "{a}.attention.shared_kv_layers": U32,
    "{a}.embedding_length_per_layer_input": U32, "{a}.final_logit_softcapping": F32,
    "tokenizer.ggml.merges": VT.ARRAY,
}


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _reader(mid, ot):
    return GGUFReader(str(GOLDEN / MANIFEST["models"][mid]["variants"][ot]["gguf"]))


def _kv(r, key, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()


def moe_tensors(r, b, d, n_exp, ffe):
    """A 26B-A4B-style layer's extra tensors (docs/spec/gemma4.md §2.9): the router, its input
    scale, the expert stacks (fused gate|up, or split) with the per-expert output scale, and the
    norms of the two branches."""
    names = {t.name for t in r.tensors}
    exp = {b + "ffn_gate_inp.weight": [d, n_exp], b + "ffn_gate_inp.scale": [d],
           b + "ffn_down_exps.weight": [ffe, d, n_exp], b + "ffn_down_exps.scale": [n_exp],
           b + "pre_ffw_norm_2.weight": [d], b + "post_ffw_norm_1.weight": [d],
           b + "post_ffw_norm_2.weight": [d]}
    if b + "ffn_gate_up_exps.weight" in names:
        exp[b + "ffn_gate_up_exps.weight"] = [d, 2 * ffe, n_exp]
    else:
        exp.update({b + "ffn_gate_exps.weight": [d, ffe, n_exp], b + "ffn_up_exps.weight": [d, ffe, n_exp]})
    return exp


def expected_tensors(r, k_eq_v=False):
    """{name: ne} that gemma4.md §3.3 / gemma3.md §3.3 require for this file's metadata;
    `k_eq_v`: global layers have no attn_v (31B-style, V from the K projection)."""
    a = _kv(r, "general.architecture")
    g = lambda k, d=None: _kv(r, f"{a}.{k}", d)
    n_layer, d = g("block_count"), g("embedding_length")
    n_vocab = len(_kv(r, "tokenizer.ggml.tokens"))
    H, Hkv = g("attention.head_count"), g("attention.head_count_kv")
    hkv = (lambda il: Hkv[il]) if isinstance(Hkv, list) else (lambda il: Hkv)   # per-layer on MoE files
    ff = g("feed_forward_length")
    ff = ff if isinstance(ff, list) else [ff] * n_layer
    exp = {"token_embd.weight": [d, n_vocab], "output_norm.weight": [d]}
    if a == "gemma4":
        swa = g("attention.sliding_window_pattern")
        hd = lambda il: g("attention.key_length_swa") if swa[il] else g("attention.key_length")
        first_shared = n_layer - g("attention.shared_kv_layers", 0)
        P = g("embedding_length_per_layer_input", 0)
        if P:
            exp["per_layer_token_embd.weight"] = [n_layer * P, n_vocab]
            exp["per_layer_model_proj.weight"] = [d, n_layer * P]
            exp["per_layer_proj_norm.weight"] = [P]
        if not all(swa):
            exp["rope_freqs.weight"] = [g("attention.key_length") // 2]
    else:
        hd = lambda il: g("attention.key_length")
        first_shared = n_layer
    for il in range(n_layer):
        b, D = f"blk.{il}.", hd(il)
        exp.update({
            b + "attn_norm.weight": [d], b + "attn_q.weight": [d, H * D],
            b + "attn_output.weight": [H * D, d], b + "attn_q_norm.weight": [D],
            b + "post_attention_norm.weight": [d], b + "ffn_norm.weight": [d],
            b + "ffn_gate.weight": [d, ff[il]], b + "ffn_up.weight": [d, ff[il]],
            b + "ffn_down.weight": [ff[il], d], b + "post_ffw_norm.weight": [d],
        })
        if il < first_shared:   # KV-shared layers carry no K/V in our converter's output
            exp.update({b + "attn_k.weight": [d, hkv(il) * D], b + "attn_k_norm.weight": [D]})
            if not (k_eq_v and a == "gemma4" and not swa[il]):
                exp[b + "attn_v.weight"] = [d, hkv(il) * D]
        if a == "gemma4" and g("expert_count"):
            exp.update(moe_tensors(r, b, d, g("expert_count"), g("expert_feed_forward_length")))
        if a == "gemma4":
            exp[b + "layer_output_scale.weight"] = [1]
            if P:
                exp.update({b + "inp_gate.weight": [d, P], b + "proj.weight": [P, d],
                            b + "post_norm.weight": [d]})
    return exp


def test_manifest_lists_existing_files():
    assert MANIFEST["format_version"] == 2
    assert {e["arch"] for e in MANIFEST["models"].values()} == {"gemma4", "gemma3"}
    named = {"manifest.json"}
    for e in MANIFEST["models"].values():
        assert e["n_tokens"] >= 3 * e["options"]["sliding_window"]
        assert len(e["token_ids"]) == e["n_tokens"] and e["token_ids"][0] == 2
        assert all(0 <= t < e["n_vocab"] for t in e["token_ids"])
        for v in e["variants"].values():
            for k in ("gguf", "logits", "taps"):
                if k in v:
                    assert (GOLDEN / v[k]).is_file(), v[k]
                    named.add(v[k])
    for e in MANIFEST.get("assistants", {}).values():
        for v in e["variants"].values():
            for k in ("gguf", "steps"):
                assert (GOLDEN / v[k]).is_file(), v[k]
                named.add(v[k])
    for e in MANIFEST.get("drafts", {}).values():  # speculative-decoding draft models: GGUFs only
        assert e["n_vocab"] in {m["n_vocab"] for m in MANIFEST["models"].values()}
        for v in e["variants"].values():
            assert (GOLDEN / v["gguf"]).is_file(), v["gguf"]
            named.add(v["gguf"])
    for kind, file in (("vision", "manifest.json"), ("audio", "towers.json")):   # the encoder towers' own
        towers = json.loads((GOLDEN / kind / file).read_text())
        named |= {kind} | {t["gguf"] for t in towers["towers"]}
    stray = {p.name for p in GOLDEN.iterdir()} - named
    assert not stray, f"files not in the manifest: {stray}"
    # committed: manifest, logits, taps; the GGUFs are rebuilt by `make fixtures`
    committed = sum(p.stat().st_size for p in GOLDEN.iterdir() if p.suffix != ".gguf")
    assert committed < 1_100_000 * len(MANIFEST["models"]), committed   # ~1 MB per model


def test_fixture_rebuild_reproduces_manifest_hashes(tmp_path):
    """make_fixtures draws the weights from each model's seed and converts them; every GGUF
    it writes must be byte-identical to the one make_golden ran transformers against."""
    import make_fixtures
    (tmp_path / "manifest.json").write_bytes((GOLDEN / "manifest.json").read_bytes())
    assert make_fixtures.rebuild(tmp_path, MANIFEST, verbose=False) == []
    for mid, e in MANIFEST["models"].items():
        for v in e["variants"].values():
            assert _sha(tmp_path / v["gguf"]) == v["gguf_sha256"]
            assert (tmp_path / v["gguf"]).read_bytes() == (GOLDEN / v["gguf"]).read_bytes()
    # a changed seed gives different weights, so the hash check can fail
    bad = json.loads(json.dumps(MANIFEST))
    e = next(iter(bad["models"].values()))
    e["seed"] += 1
    for v in e["variants"].values():
        (tmp_path / v["gguf"]).unlink()
    assert len(make_fixtures.rebuild(tmp_path, bad, verbose=False)) == len(e["variants"])


@pytest.mark.parametrize("mid,ot", VARIANTS)
def test_files_match_manifest(mid, ot):
    e = MANIFEST["models"][mid]
    v = e["variants"][ot]
    gp, lp = GOLDEN / v["gguf"], GOLDEN / v["logits"]
    assert gp.stat().st_size == v["gguf_bytes"]
    assert _sha(gp) == v["gguf_sha256"], "GGUF changed without regenerating the manifest"
    assert _sha(lp) == v["logits_sha256"]
    assert v["logits_shape"] == [e["n_tokens"], e["n_vocab"]]
    assert lp.stat().st_size == e["n_tokens"] * e["n_vocab"] * 4
    logits = np.fromfile(lp, "<f4").reshape(v["logits_shape"])
    assert np.isfinite(logits).all() and logits.std() > 0.1
    cap = e["options"]["final_softcap"]
    if cap:
        assert np.abs(logits).max() < cap
    if ot != "f32":   # the dequantized-weight reference differs from f32 as recorded
        ref = np.fromfile(GOLDEN / e["variants"]["f32"]["logits"], "<f4").reshape(v["logits_shape"])
        q = float(np.sum((logits.astype(np.float64) - ref) ** 2) / np.sum(ref.astype(np.float64) ** 2))
        assert math.isclose(q, v["quantization_nmse_vs_f32_reference"], rel_tol=1e-4)


@pytest.mark.parametrize("mid", list(MANIFEST["models"]))
def test_taps_file(mid):
    from make_golden import read_taps
    v = MANIFEST["models"][mid]["variants"]["f32"]
    taps = read_taps(GOLDEN / v["taps"])
    assert list(taps) == v["taps_names"]
    e = MANIFEST["models"][mid]
    n_layer, d = e["options"]["layers"], e["options"]["hidden"]
    want = {"embd", "result_norm"} | {f"{k}.{i}" for i in range(n_layer) for k in ("attn_out", "ffn_out", "l_out")}
    top_k = e["options"].get("moe_top_k")
    if top_k:   # the router's choices and weights and the experts' sum, per MoE layer
        want |= {f"{k}.{i}" for i in range(n_layer) for k in ("moe_experts", "moe_weights", "moe_out")}
    if e["arch"] == "gemma4" and e["options"]["ple_width"]:
        want.add("ple")
        assert list(taps["ple"].shape) == [e["n_tokens"], n_layer, e["options"]["ple_width"]]
    assert set(taps) == want
    for k, t in taps.items():
        assert list(t.shape) == v["taps_shapes"][k]
        if k.startswith(("moe_experts", "moe_weights")):
            assert list(t.shape) == [e["n_tokens"], top_k]
        elif k != "ple":
            assert list(t.shape) == [e["n_tokens"], d]
        assert np.isfinite(t).all() and np.abs(t).max() > 0


@pytest.mark.parametrize("mid,ot", VARIANTS)
def test_gguf_metadata(mid, ot):
    e = MANIFEST["models"][mid]
    o, a = e["options"], e["arch"]
    r = _reader(mid, ot)
    keys = dict(COMMON_KEYS, **(GEMMA4_KEYS if a == "gemma4" else {}))
    for k, t in keys.items():
        k = k.format(a=a)
        assert k in r.fields, f"missing {k}"
        if k.endswith("head_count_kv") and o.get("global_kv_heads"):
            t = ARRAY   # per layer on MoE files: sliding and global layers differ
        assert r.fields[k].types[0] == t, k
    g = lambda k, d=None: _kv(r, f"{a}.{k}", d)
    assert _kv(r, "general.architecture") == a
    assert g("block_count") == o["layers"] and g("embedding_length") == o["hidden"]
    pattern = [(o["layer_pattern"] * o["layers"])[i] == "S" for i in range(o["layers"])]
    kv = [o["kv_heads"] if sw else o.get("global_kv_heads", o["kv_heads"]) for sw in pattern]
    assert g("attention.head_count") == o["heads"]
    assert g("attention.head_count_kv") == (kv if o.get("global_kv_heads") else o["kv_heads"])
    assert g("attention.sliding_window") == o["sliding_window"]
    assert g("rope.freq_base") == o["rope_theta"] and g("rope.freq_base_swa") == o["rope_theta_swa"]
    assert len(_kv(r, "tokenizer.ggml.tokens")) == e["n_vocab"]
    assert _kv(r, "tokenizer.ggml.bos_token_id") == 2 and _kv(r, "tokenizer.ggml.eos_token_id") == 1
    pattern = [(o["layer_pattern"] * o["layers"])[i] == "S" for i in range(o["layers"])]
    if a == "gemma4":
        assert _kv(r, "tokenizer.ggml.model") == "gemma4"
        # key_length is the GLOBAL head dim, key_length_swa the sliding one (§3.2, pitfall 5)
        assert g("attention.key_length") == g("attention.value_length") == o["global_head_dim"]
        assert g("attention.key_length_swa") == g("attention.value_length_swa") == o["head_dim"]
        assert g("rope.dimension_count") == o["global_head_dim"]
        assert g("rope.dimension_count_swa") == o["head_dim"]
        f = r.fields[f"{a}.attention.sliding_window_pattern"]
        assert f.types == [VT.ARRAY, VT.BOOL] and g("attention.sliding_window_pattern") == pattern
        assert g("attention.shared_kv_layers") == o["kv_shared_layers"]
        assert g("embedding_length_per_layer_input") == o["ple_width"]
        assert g("final_logit_softcapping") == o["final_softcap"]
        first_shared = o["layers"] - o["kv_shared_layers"]
        want_ff = [o["intermediate"] * (2 if o["double_wide_mlp"] and il >= first_shared else 1)
                   for il in range(o["layers"])]
        if len(set(want_ff)) > 1:   # per-layer array, i32 (§3.2)
            assert r.fields[f"{a}.feed_forward_length"].types == [VT.ARRAY, VT.INT32]
            assert g("feed_forward_length") == want_ff
        else:
            assert g("feed_forward_length") == want_ff[0]
    else:
        assert _kv(r, "tokenizer.ggml.model") == "llama"
        assert g("attention.key_length") == g("attention.value_length") == o["head_dim"]
        assert g("feed_forward_length") == o["intermediate"]
        assert f"{a}.final_logit_softcapping" not in r.fields   # Gemma 3: no softcap
        # llama.cpp hard-codes "sliding iff il % 6 < 5"; the key is only written otherwise
        if pattern == [il % 6 < 5 for il in range(o["layers"])]:
            assert f"{a}.attention.sliding_window_pattern" not in r.fields
        else:
            assert g("attention.sliding_window_pattern") == pattern


@pytest.mark.parametrize("mid,ot", VARIANTS)
def test_gguf_tensors(mid, ot):
    e = MANIFEST["models"][mid]
    r = _reader(mid, ot)
    got = {t.name: t for t in r.tensors}
    exp = expected_tensors(r, e["options"].get("attention_k_eq_v", False))
    assert set(got) == set(exp), (sorted(set(exp) - set(got))[:5], sorted(set(got) - set(exp))[:5])
    for name, ne in exp.items():
        t = got[name]
        assert [int(x) for x in t.shape] == ne, (name, list(t.shape), ne)
        if "exps" in name or "gate_inp" in name:
            continue                                  # expert stacks and the router: types as the loader tests take them
        if len(ne) == 1:
            assert t.tensor_type == QT.F32, name       # norms, scalars, rope_freqs stay F32
        else:
            want = OUTTYPE_QT[ot]
            if want in (QT.Q8_0, QT.Q4_0) and ne[0] % 32:
                want = QT.F16                         # converter fallback for odd rows
            assert t.tensor_type == want, (name, t.tensor_type.name)
    if "rope_freqs.weight" in got:   # §2.1: [1.0 x n_rot, 1e30 x rest], n_rot = int(p*hd//2)
        o = e["options"]
        n_rot = int(o["partial_rotary_factor"] * o["global_head_dim"] // 2)
        want = np.array([1.0] * n_rot + [1e30] * (o["global_head_dim"] // 2 - n_rot), np.float32)
        assert np.array_equal(np.asarray(got["rope_freqs.weight"].data), want)
    scalars = [np.asarray(t.data)[0] for n, t in got.items() if n.endswith("layer_output_scale.weight")]
    assert all(s != 1.0 for s in scalars)             # randomized, so a missing multiply shows
    if e["arch"] == "gemma3":
        # the +1 of Gemma3RMSNorm is folded (gemma3.md §3.4): stored HF w ~ N(0, .35) for the
        # layer norms of the tiny model, so folded means are ~1, never ~0
        means = [float(np.mean(np.asarray(t.data))) for n, t in got.items() if n.endswith("attn_norm.weight")]
        assert min(means) > 0.6, means


@pytest.mark.parametrize("mid,ot", VARIANTS)
def test_spec_forward_reproduces_logits(mid, ot):
    """numpy forward from the spec text, reading only the GGUF, vs the committed
    transformers logits (the generator asserted < 1e-9; allow float noise)."""
    from make_golden import nmse, spec_forward
    e = MANIFEST["models"][mid]
    v = e["variants"][ot]
    ref = np.fromfile(GOLDEN / v["logits"], "<f4").reshape(v["logits_shape"])
    logits, _ = spec_forward(GOLDEN / v["gguf"], np.array(e["token_ids"]))
    assert nmse(logits, ref) < 1e-9
    assert np.mean(logits.argmax(-1) == ref.argmax(-1)) == 1.0


@pytest.mark.parametrize("aid", list(MANIFEST.get("assistants", {})))
def test_assistant_fixture(aid):
    """The Gemma 4 assistant fixture (python/make_assistant_golden.py): its GGUF carries the
    gemma4-assistant keys and tensors of gemma4.md §5 (centroid count and top-k included),
    the steps file the records the C++ test reads, with the shapes of its cases."""
    from make_golden import read_taps
    e = MANIFEST["assistants"][aid]
    v = e["variants"]["f32"]
    assert _sha(GOLDEN / v["gguf"]) == v["gguf_sha256"] and _sha(GOLDEN / v["steps"]) == v["steps_sha256"]
    r = GGUFReader(str(GOLDEN / v["gguf"]))
    a = "gemma4-assistant"
    assert _kv(r, "general.architecture") == a
    o, t = e["options"], MANIFEST["models"][e["target"]]
    assert _kv(r, f"{a}.embedding_length") == o["hidden"]
    assert _kv(r, f"{a}.embedding_length_out") == t["options"]["hidden"]
    assert _kv(r, f"{a}.centroid_count") == o["centroids"] and _kv(r, f"{a}.centroid_top_k") == o["centroid_top_k"]
    names = {x.name: x for x in r.tensors}
    assert names["masked_embd_ordering"].tensor_type == QT.I32
    assert sorted(np.asarray(names["masked_embd_ordering"].data).tolist()) == list(range(o["vocab"]))
    for n in ("token_embd.weight", "output_norm.weight", "nextn.pre_projection.weight",
              "nextn.post_projection.weight", "masked_embd_centroids.weight"):
        assert n in names, n
    assert not any("attn_k" in n or "attn_v" in n for n in names)
    steps = read_taps(GOLDEN / v["steps"])
    V, K, dt = o["vocab"], e["n_steps"], t["options"]["hidden"]
    for c in e["cases"]:
        assert c["n_prompt"] < t["n_tokens"] and len(c["tokens"]) == K + 1
        n = c["name"]
        assert list(steps[f"{n}.full_logits"].shape) == [K, V]
        assert list(steps[f"{n}.centroid_logits"].shape) == [K, V]
        assert list(steps[f"{n}.next_hidden"].shape) == [K, dt]
        assert list(steps[f"{n}.centroid_scores"].shape) == [K, o["centroids"]]
        assert e["facts"][n]["fed_equals_post_norm"]
    assert any(c["n_prompt"] > o["sliding_window"] for c in e["cases"])
