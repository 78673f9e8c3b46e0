"""Cross-check of sluice's reference (de)quantizers (via tests/tools/sluice_quant_tool) with
the gguf-py package (gguf==0.19.0), an implementation we did not write.

* Dequantization: random blocks of every supported type, compared bit for bit. No -0.0/+0.0
  allowance is needed: both sides do the same f32 operations in the same order.
* Quantization: byte-exact against gguf.quants.quantize where gguf has a quantizer (BF16,
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; gguf computes x*id + 8.5 unfused in f32 like ggml's
  reference without FMA), F16 against numpy's astype(float16), and
  quantize(dequantize(q)) == q.
* Q6_K has no gguf quantizer; quantize∘dequantize is an exact fixed point only for
  "canonical" blocks (see tests/unit/quant/q6_k_quantize_test.cpp for why ggml's algorithm
  is not one in general), so that is what is checked here.
"""
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import quants

from conftest import run

# ggml name -> (gguf type, elements per block, bytes per block, byte offsets of f16 scales)
TYPES = {
    "f32": (T.F32, 1, 4, []),
    "f16": (T.F16, 1, 2, []),
    "bf16": (T.BF16, 1, 2, []),
    "q4_0": (T.Q4_0, 32, 18, [0]),
    "q4_1": (T.Q4_1, 32, 20, [0, 2]),
    "q5_0": (T.Q5_0, 32, 22, [0]),
    "q5_1": (T.Q5_1, 32, 24, [0, 2]),
    "q8_0": (T.Q8_0, 32, 34, [0]),
    "q2_K": (T.Q2_K, 256, 84, [80, 82]),
    "q3_K": (T.Q3_K, 256, 110, [108]),
    "q4_K": (T.Q4_K, 256, 144, [0, 2]),
    "q5_K": (T.Q5_K, 256, 176, [0, 2]),
    "q6_K": (T.Q6_K, 256, 210, [208]),
    "iq4_nl": (T.IQ4_NL, 32, 18, [0]),
    "iq4_xs": (T.IQ4_XS, 256, 136, [0]),
}


def tool(quant_tool, tmp_path, mode, type_name, data):
    """Runs `sluice_quant_tool mode type`; returns the output bytes as a uint8 array."""
    src, dst = tmp_path / f"{type_name}.in", tmp_path / f"{type_name}.out"
    np.ascontiguousarray(data).tofile(src)
    r = run([quant_tool, mode, type_name, src, dst])
    assert r.returncode == 0, r.stderr
    return np.fromfile(dst, dtype=np.uint8)


def random_blocks(type_name, rng):
    """Random bytes with every f16 scale field made finite (clear bit 14 of an f16 whose
    exponent is all ones); for F32/F16/BF16 every element is a random finite value."""
    _, be, bb, offsets = TYPES[type_name]
    n_blocks = 65536 if be == 1 else 4096 if be == 32 else 2048
    raw = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint8)
    if type_name == "f32":
        u = raw.view(np.uint32)
        u[:] = np.where((u & 0x7F800000) == 0x7F800000, u & ~np.uint32(0x40000000), u)
    elif type_name in ("f16", "bf16"):
        u = raw.view(np.uint16)
        exp = 0x7C00 if type_name == "f16" else 0x7F80
        u[:] = np.where((u & exp) == exp, u & ~np.uint16(0x4000), u)
    for off in offsets:
        hi = raw[:, off + 1]
        raw[:, off + 1] = np.where((hi & 0x7C) == 0x7C, hi & 0xBF, hi)
    return raw.ravel()


def mismatches(a, b):
    a32, b32 = np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32)
    assert a32.shape == b32.shape
    return int(np.count_nonzero(a32 != b32))


@pytest.mark.parametrize("type_name", list(TYPES))
def test_dequantize_matches_gguf_bit_for_bit(quant_tool, tmp_path, type_name):
    rng = np.random.default_rng(1000 + list(TYPES).index(type_name))
    data = random_blocks(type_name, rng)
    ours = tool(quant_tool, tmp_path, "dequant", type_name, data).view(np.float32)
    theirs = quants.dequantize(data, TYPES[type_name][0]).astype(np.float32, copy=False).ravel()
    assert ours.size == theirs.size
    assert mismatches(ours, theirs) == 0


def random_inputs(be, n_blocks, rng, log2_range=(-20, 20), div=8):
    """f32 blocks of `be` values with per-block magnitude 2^k and varied shapes: uniform,
    normal, one-signed offset, sparse, all-zero, exact ties (half-integer multiples of a
    power of two, so x*id hits .5 exactly), duplicated extremes of both signs, and near ties:
    x = d*(k + 0.5) for a non-dyadic block scale d = max/div (div = the quantizer's code
    range, e.g. 8 for Q4_0), where x*id lands within a rounding of .5, the cases in which a
    fused x*id + 8.5 would round differently."""
    x = np.zeros((n_blocks, be), np.float32)
    for b in range(n_blocks):
        mag = np.float32(2.0) ** int(rng.integers(*log2_range))
        shape = b % 8
        if shape == 0:
            v = rng.uniform(-1, 1, be)
        elif shape == 1:
            v = rng.normal(size=be)
        elif shape == 2:
            v = 3 + rng.uniform(-1, 1, be)
        elif shape == 3:
            v = np.where(rng.random(be) < 0.15, rng.normal(size=be), 0.0)
        elif shape == 4:
            v = np.zeros(be)
        elif shape == 5:
            v = rng.integers(-16, 17, be) * 0.5
        elif shape == 6:
            v = rng.integers(-4, 5, be).astype(np.float64)
            v[rng.integers(be)] = 8.0
            v[rng.integers(be)] = -8.0
        else:
            top = np.float32(rng.uniform(0.5, 1.0) * mag)
            d = top / np.float32(div)
            if div < 15:  # symmetric (Q4_0, Q5_0): d = max/-div, codes k + div
                k = rng.integers(-div, div, be)
            else:         # min/max (Q4_1, Q5_1) or absmax (Q8_0) with min = 0
                k = rng.integers(0, div, be)
            x[b] = d * (k.astype(np.float32) + np.float32(0.5))
            x[b, 0] = top  # the block maximum that sets d
            x[b, 1] = 0.0  # the block minimum for Q4_1/Q5_1
            continue
        x[b] = (v * mag).astype(np.float32)
    return x.ravel()


# Types where gguf has a quantizer (F16 is numpy's astype in gguf too).
GGUF_QUANTIZERS = ["bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]
# Code range per quantizer for the near-tie inputs: d = max/-8, max/-16, (max-min)/15, ...
TIE_DIV = {"bf16": 8, "f16": 8, "q4_0": 8, "q4_1": 15, "q5_0": 16, "q5_1": 31, "q8_0": 127}


@pytest.mark.parametrize("type_name", GGUF_QUANTIZERS)
def test_quantize_matches_gguf_bytes(quant_tool, tmp_path, type_name):
    rng = np.random.default_rng(2000 + GGUF_QUANTIZERS.index(type_name))
    be = max(TYPES[type_name][1], 32)
    x = random_inputs(be, 10000, rng, div=TIE_DIV[type_name])
    if type_name == "bf16":  # ties of the f32 -> bf16 rounding, Inf, NaN (made quiet)
        extra = np.array([0x3F808000, 0x3F818000, 0x7F7F8000, 0x7F800000, 0xFF800000,
                          0x7F800001, 0xFFC00001, 0x00008000, 0x80018000], np.uint32)
        x = np.concatenate([x, extra.view(np.float32)])
    ours = tool(quant_tool, tmp_path, "quant", type_name, x)
    with np.errstate(over="ignore"):  # f16 scales of the 2^20 blocks overflow to Inf on both sides
        theirs = quants.quantize(x, TYPES[type_name][0]).view(np.uint8).ravel()
    bb = TYPES[type_name][2]
    bad = np.nonzero((ours.reshape(-1, bb) != theirs.reshape(-1, bb)).any(axis=1))[0]
    assert bad.size == 0, f"{bad.size} blocks differ, first {bad[:5]}"


@pytest.mark.parametrize("type_name", ["f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"])
def test_quantize_of_dequantize_is_identity(quant_tool, tmp_path, type_name):
    # Magnitudes where the f16 scales neither underflow to 0 nor lose precision: with d
    # rounded to 0 the codes cannot come back (all values decode to 0).
    rng = np.random.default_rng(3000 + len(type_name))
    be = max(TYPES[type_name][1], 32)
    x = random_inputs(be, 3000, rng, log2_range=(-8, 9), div=TIE_DIV[type_name])
    q = tool(quant_tool, tmp_path, "quant", type_name, x)
    y = tool(quant_tool, tmp_path, "dequant", type_name, q).view(np.float32)
    q2 = tool(quant_tool, tmp_path, "quant", type_name, y)
    assert np.array_equal(q, q2)


def test_f16_quantize_matches_numpy(quant_tool, tmp_path):
    rng = np.random.default_rng(4000)
    # Every exponent from below the smallest f16 subnormal to past the f16 maximum.
    u = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    u = (u & np.uint32(0x807FFFFF)) | (rng.integers(98, 145, u.size).astype(np.uint32) << 23)
    # Exact ties: f16 values plus half an f16 ulp (normal and subnormal), and overflow ties.
    h = rng.integers(0, 0x7BFF, 5000).astype(np.uint16)
    lo = h.view(np.float16).astype(np.float64)
    hi = (h + 1).astype(np.uint16).view(np.float16).astype(np.float64)
    ties = ((lo + hi) / 2).astype(np.float32)
    special = np.array([65519.0, 65520.0, -65520.0, 2.0**-25, 3 * 2.0**-25, np.inf, -np.inf, 0.0, -0.0],
                       np.float32)
    x = np.concatenate([u.view(np.float32), ties, -ties, special])
    assert np.array_equal((ties.astype(np.float64)), (lo + hi) / 2), "ties must be exact in f32"
    ours = tool(quant_tool, tmp_path, "quant", "f16", x).view(np.uint16)
    with np.errstate(over="ignore"):
        theirs = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(ours, theirs)


def pack_q6_k(d, scales, codes):
    """Q6_K blocks (§8.2) from f16 bits d (n,), int8 scales (n, 16), codes (n, 256) in [-32, 31]."""
    n = d.size
    L = (codes + 32).astype(np.uint8).reshape(n, 2, 4, 32)  # [block, half, k, l]
    lo = L & 15
    ql = np.concatenate([lo[:, :, 0] | (lo[:, :, 2] << 4), lo[:, :, 1] | (lo[:, :, 3] << 4)], axis=2)
    qh = (L[:, :, 0] >> 4) | ((L[:, :, 1] >> 4) << 2) | ((L[:, :, 2] >> 4) << 4) | ((L[:, :, 3] >> 4) << 6)
    return np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), scales.astype(np.int8).view(np.uint8),
                           d.astype(np.uint16).reshape(n, 1).view(np.uint8)], axis=1).astype(np.uint8)


def test_q6_k_canonical_blocks_are_fixed_points(quant_tool, tmp_path):
    """Canonical: d a finite non-zero f16, a sub-scale -128, each non-zero group holds code -32
    and otherwise spread codes, zero groups hold only -32 (what ggml writes)."""
    rng = np.random.default_rng(5000)
    n = 2000
    d = rng.integers(0, 0x10000, n).astype(np.uint16)
    d = np.where((d & 0x7C00) == 0x7C00, d & 0xBFFF, d)
    d = np.where((d & 0x7FFF) == 0, np.uint16(0x3C00), d)
    scales = rng.integers(-127, 128, (n, 16))
    scales[rng.random((n, 16)) < 0.08] = 0
    scales[np.arange(n), rng.integers(0, 16, n)] = -128
    codes = rng.integers(-31, 32, (n, 16, 16))
    pos = rng.integers(0, 16, (n, 16))
    np.put_along_axis(codes, pos[..., None], -32, axis=2)
    np.put_along_axis(codes, ((pos + 1) % 16)[..., None], 5, axis=2)
    codes[scales == 0] = -32
    q = pack_q6_k(d, scales, codes.reshape(n, 256)).ravel()
    # The packing agrees with gguf's decoder before it is used for anything else.
    y_ref = quants.dequantize(q, T.Q6_K).ravel()
    d32 = d.view(np.float16).astype(np.float32)
    want = (d32[:, None, None] * scales.astype(np.float32)[..., None]) * codes.astype(np.float32)
    assert np.array_equal(y_ref, want.ravel())
    y = tool(quant_tool, tmp_path, "dequant", "q6_K", q).view(np.float32)
    q2 = tool(quant_tool, tmp_path, "quant", "q6_K", y)
    bad = np.nonzero((q.reshape(n, 210) != q2.reshape(n, 210)).any(axis=1))[0]
    assert bad.size == 0, f"{bad.size} blocks changed, first {bad[:5]}"


def test_q6_k_quantize_decodes_close(quant_tool, tmp_path):
    """Quantizer output on random data: every element within max|x|/16 of the input."""
    rng = np.random.default_rng(5001)
    x = random_inputs(256, 500, rng, log2_range=(-1, 16))
    y = tool(quant_tool, tmp_path, "dequant", "q6_K", tool(quant_tool, tmp_path, "quant", "q6_K", x))
    y = y.view(np.float32).reshape(-1, 256)
    xb = x.reshape(-1, 256)
    assert np.all(np.abs(y - xb) <= np.abs(xb).max(axis=1, keepdims=True) / 16)


@pytest.mark.parametrize("args, size, message", [
    (["dequant", "q9_9"], 0, "unknown type"),
    (["dequant", "iq2_xxs"], 0, "unsupported"),
    (["quant", "q4_K"], 0, "no reference quantizer"),
    (["dequant", "q4_0"], 100, "not a multiple"),
    (["quant", "q8_0"], 100, "not a multiple"),
    (["quant", "f32"], 6, "not a whole number of f32"),
    (["frobnicate", "q8_0"], 0, "unknown mode"),
])
def test_tool_errors(quant_tool, tmp_path, args, size, message):
    src = tmp_path / "in.bin"
    np.zeros(size, np.uint8).tofile(src)
    r = run([quant_tool, *args, src, tmp_path / "out.bin"])
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def test_tool_missing_input(quant_tool, tmp_path):
    r = run([quant_tool, "dequant", "q4_0", tmp_path / "nope.bin", tmp_path / "out.bin"])
    assert r.returncode != 0 and "cannot open" in r.stderr


def test_tool_usage(quant_tool):
    r = run([quant_tool])
    assert r.returncode != 0 and "usage" in r.stderr
