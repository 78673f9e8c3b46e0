"""`sluice inspect --json` must agree with the PyPI `gguf` package's reader (a GGUF
implementation we did not write) on every key, type, value and tensor."""
import json
import math

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import quantize

from conftest import run

TYPE_NAMES = {
    GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
    GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
    GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
    GGUFValueType.FLOAT64: "f64",
}


def inspect_json(sluice_bin, path):
    r = run([sluice_bin, "inspect", "--json", path])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def same_value(ours, theirs):
    if isinstance(theirs, list):
        return isinstance(ours, list) and len(ours) == len(theirs) and all(
            same_value(a, b) for a, b in zip(ours, theirs))
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return ours is theirs or ours == theirs and type(ours) is type(theirs)
    if isinstance(theirs, float):
        if math.isnan(theirs):
            return ours == "nan"
        if math.isinf(theirs):
            return ours == ("inf" if theirs > 0 else "-inf")
        return float(ours) == theirs   # f32 -> double is exact, and JSON round-trips doubles
    return ours == theirs


def assert_agrees(doc, path):
    ref = GGUFReader(path)
    fields = [(k, f) for k, f in ref.fields.items() if not k.startswith("GGUF.")]
    meta = doc["metadata"]
    assert [m["key"] for m in meta] == [k for k, _ in fields]
    for m, (key, f) in zip(meta, fields):
        assert m["type"] == TYPE_NAMES[f.types[0]], key
        if f.types[0] == GGUFValueType.ARRAY:
            elem = f.types[1] if len(f.types) > 1 else None
            assert m["count"] == len(f.data), key
            if elem is not None:
                assert m["elem_type"] == TYPE_NAMES[elem], key
        assert same_value(m["value"], f.contents()), key
    assert doc["tensor_count"] == len(ref.tensors)
    assert len(doc["tensors"]) == len(ref.tensors)
    for t, rt in zip(doc["tensors"], ref.tensors):
        assert t["name"] == rt.name
        assert t["type_id"] == int(rt.tensor_type)
        assert t["shape"] == [int(x) for x in rt.shape]
        assert doc["data_offset"] + t["offset"] == rt.data_offset, t["name"]
        assert t["bytes"] == int(rt.n_bytes), t["name"]
    return ref


def test_real_gemma3_file(sluice_bin, gemma3_path):
    doc = inspect_json(sluice_bin, gemma3_path)
    assert_agrees(doc, gemma3_path)
    assert doc["architecture"] == "gemma3"
    assert doc["tokenizer"]["n_tokens"] == 262144
    # Tied lm_head: every tensor is streamed in full once, nothing is gathered.
    assert doc["decode_stream"]["bytes_per_token"] == sum(t["bytes"] for t in doc["tensors"])
    assert doc["decode_stream"]["groups"]["lm_head"] == next(
        t["bytes"] for t in doc["tensors"] if t["name"] == "token_embd.weight")


def write_every_type(path, alignment=None):
    w = GGUFWriter(str(path), "testarch")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2**63 + 12345)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", -1.0 / 3.0)
    w.add_bool("t.bool.true", True)
    w.add_bool("t.bool.false", False)
    w.add_string("t.string", "héllo ✓ \n\t\"quoted\"")
    w.add_string("t.string.empty", "")
    for name, vt, vals in [
        ("u8", GGUFValueType.UINT8, [0, 1, 255]), ("i8", GGUFValueType.INT8, [-128, 0, 127]),
        ("u16", GGUFValueType.UINT16, [0, 65535]), ("i16", GGUFValueType.INT16, [-32768, 32767]),
        ("u32", GGUFValueType.UINT32, [0, 2**32 - 1]), ("i32", GGUFValueType.INT32, [-(2**31), 2**31 - 1]),
        ("f32", GGUFValueType.FLOAT32, [1.5, -0.0, 3.4e38]), ("u64", GGUFValueType.UINT64, [0, 2**64 - 1]),
        ("i64", GGUFValueType.INT64, [-(2**63), 2**63 - 1]), ("f64", GGUFValueType.FLOAT64, [1e-300, 2.5]),
        ("bool", GGUFValueType.BOOL, [True, False, True]),
    ]:
        w.add_key_value(f"t.arr.{name}", vals, GGUFValueType.ARRAY, sub_type=vt)
    w.add_array("t.arr.string", ["a", "", "multi\nline", "<0x0A>", "日本語"])
    # (gguf-py refuses to write empty arrays; the C++ reader tests cover them.)
    rng = np.random.default_rng(7)
    w.add_tensor("f32.vec", rng.standard_normal(7).astype(np.float32))
    w.add_tensor("f32.mat", rng.standard_normal((3, 5)).astype(np.float32))
    w.add_tensor("f16.mat", rng.standard_normal((2, 3, 4)).astype(np.float16))
    x = rng.standard_normal((4, 256)).astype(np.float32)
    for qt in (GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q8_0, GGMLQuantizationType.BF16,
               GGMLQuantizationType.Q5_1):
        w.add_tensor(f"q.{qt.name.lower()}", quantize(x, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("alignment", [None, 64])
def test_file_written_by_gguf_package(sluice_bin, tmp_path, alignment):
    path = tmp_path / "every_type.gguf"
    write_every_type(path, alignment)
    doc = inspect_json(sluice_bin, path)
    assert_agrees(doc, path)
    assert doc["alignment"] == (alignment or 32)
    assert doc["architecture"] == "testarch"


def test_text_output_and_errors(sluice_bin, gemma3_path, tmp_path):
    r = run([sluice_bin, "inspect", gemma3_path])
    assert r.returncode == 0, r.stderr
    assert "gemma3.block_count" in r.stdout and "blk.0.attn_q.weight" in r.stdout
    bad = tmp_path / "bad.gguf"
    data = gemma3_path.read_bytes()
    bad.write_bytes(data[:-4096])   # a truncated download: the last tensor is cut short
    r = run([sluice_bin, "inspect", bad])
    assert r.returncode == 1
    assert r.stdout == ""
    assert str(bad) in r.stderr and "is not within the file" in r.stderr
    bad.write_bytes(data[:100000])  # cut inside the token list
    r = run([sluice_bin, "inspect", bad])
    assert r.returncode == 1 and "tokenizer.ggml.tokens" in r.stderr
    r = run([sluice_bin, "inspect", tmp_path / "does-not-exist.gguf"])
    assert r.returncode == 1 and "cannot open" in r.stderr


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gemma4_stream_accounting(sluice_bin, tmp_path):
    """KV-shared layers' k/v tensors are excluded; embedding tables stream one row."""
    n_layer, shared, d, ple = 4, 2, 32, 8
    w = GGUFWriter(str(tmp_path / "g4.gguf"), "gemma4")
    w.add_uint32("gemma4.block_count", n_layer)
    w.add_uint32("gemma4.attention.shared_kv_layers", shared)
    z = lambda *shape: np.zeros(shape, dtype=np.float32)   # noqa: E731
    w.add_tensor("token_embd.weight", z(64, d))
    w.add_tensor("per_layer_token_embd.weight", z(64, n_layer * ple))
    for l in range(n_layer):
        for name, shape in [("attn_q", (d, d)), ("attn_k", (8, d)), ("attn_v", (8, d)),
                            ("attn_k_norm", (8,)), ("ffn_down", (d, 2 * d))]:
            w.add_tensor(f"blk.{l}.{name}.weight", z(*shape))
    finish(w)
    doc = inspect_json(sluice_bin, tmp_path / "g4.gguf")
    by = {t["name"]: t["bytes"] for t in doc["tensors"]}
    unused = sum(by[f"blk.{l}.{n}.weight"] for l in range(n_layer - shared, n_layer)
                 for n in ("attn_k", "attn_v", "attn_k_norm"))
    expected = sum(by.values()) - unused - by["per_layer_token_embd.weight"] + n_layer * ple * 4
    assert doc["decode_stream"]["unused_tensor_bytes"] == unused
    assert doc["decode_stream"]["bytes_per_token"] == expected


def test_moe_stream_accounting(sluice_bin, tmp_path):
    """A mixture-of-experts file (gemma4.md §2.9): the expert stacks stream
    expert_used_count / expert_count of their bytes per token, the router and the dense FFN in
    full, and the text and JSON say so."""
    n_layer, d, f, n_exp, used = 2, 32, 16, 8, 2
    w = GGUFWriter(str(tmp_path / "moe.gguf"), "gemma4")
    w.add_uint32("gemma4.block_count", n_layer)
    w.add_uint32("gemma4.expert_count", n_exp)
    w.add_uint32("gemma4.expert_used_count", used)
    z = lambda *shape: np.zeros(shape, dtype=np.float32)   # noqa: E731
    w.add_tensor("token_embd.weight", z(64, d))
    experts = []
    for l in range(n_layer):
        w.add_tensor(f"blk.{l}.ffn_gate_inp.weight", z(n_exp, d))
        w.add_tensor(f"blk.{l}.ffn_gate_inp.scale", z(d))
        w.add_tensor(f"blk.{l}.ffn_down.weight", z(d, 2 * d))
        split = l == 1   # layer 1 has llama.cpp's split gate/up pair
        names = (["ffn_gate_exps", "ffn_up_exps"] if split else ["ffn_gate_up_exps"]) + ["ffn_down_exps"]
        for n in names:
            shape = (n_exp, d, f) if n == "ffn_down_exps" else (n_exp, f if split else 2 * f, d)
            w.add_tensor(f"blk.{l}.{n}.weight", z(*shape))
            experts.append(f"blk.{l}.{n}.weight")
        w.add_tensor(f"blk.{l}.ffn_down_exps.scale", z(n_exp))
    finish(w)
    doc = inspect_json(sluice_bin, tmp_path / "moe.gguf")
    by = {t["name"]: t["bytes"] for t in doc["tensors"]}
    expert_bytes = sum(by[n] for n in experts)
    moe = doc["decode_stream"]["moe"]
    assert moe == {"expert_count": n_exp, "expert_used_count": used, "expert_tensor_bytes": expert_bytes,
                   "expert_bytes_per_token": expert_bytes * used // n_exp}
    assert doc["decode_stream"]["groups"]["ffn experts (k of E)"] == expert_bytes * used // n_exp
    assert doc["decode_stream"]["bytes_per_token"] == sum(by.values()) - expert_bytes + expert_bytes * used // n_exp
    text = run([sluice_bin, "inspect", str(tmp_path / "moe.gguf")])
    assert text.returncode == 0, text.stderr
    assert "mixture of experts: the expert tensors" in text.stdout
    assert f"count {used}/{n_exp} of their bytes" in text.stdout
