#!/usr/bin/env python3
"""Write a Gemma 4 E2B-, E4B- or 31B-shaped GGUF with random weights, typed like Google's QAT
Q4_0 release, for benchmarking (the decode floor depends only on shapes and types, not on what
the weights say).

    .venv/bin/python python/make_e2b_shaped.py models/gemma4-e2b-shaped-q4_0.gguf [--seed 0]
    .venv/bin/python python/make_e2b_shaped.py models/gemma4-e4b-shaped-q4_0.gguf --variant e4b
    make e2b-model / make e4b-model / make 31b-model / make 26b-model   # the same, into models/

Variants (VARIANTS; docs/spec/gemma4.md §1.1 for E2B, §1.3 for the others, §2.9 for 26B-A4B's
experts): 26B-A4B 30 layers of width 2816 shaped like 31B's (5:1, window 1024, 16 query heads,
8 KV heads sliding / 2 global, K = V) with a dense FFN of 2112 and 128 Q4_0 experts of width 704
per layer (ffn_gate_up_exps [2816, 1408, 128], ffn_down_exps [704, 2816, 128]; the F32 router
ffn_gate_inp and the .scale vectors as llama.cpp writes them), 658 tensors, 14.4 GB; E2B 3.35 GB; E4B
42 layers of width 2560, 5 sliding : 1 global, 2 KV heads, 18 KV-shared layers, FFN 10240
everywhere (no double-wide MLP), ~5.3 GB; 31B 60 layers of width 5376, window 1024, 32 query
heads, 16 KV heads on sliding layers and 4 on global ones (head_count_kv written as a per-layer
array), no KV sharing, no per-layer embeddings, FFN 21504, and K = V on the global layers: those
have no attn_v tensor (the key projection is also the value), ~17.6 GB.

Shapes, names and metadata: docs/spec/gemma4.md §1.1 (E2B config), §3.2 (keys), §3.3
(tensors: 601 = 6 global + 17 per layer, llama.cpp names, KV tensors of the shared layers
included as in real files), §3.4 (types of the official QAT file: Q4_0 for every 2-D layer
matrix, Q6_K `token_embd` (tied LM head, no `output.weight`) and `per_layer_token_embd`,
BF16 `per_layer_model_proj`, F32 norms / `rope_freqs` / `layer_output_scale`).
Block layouts: quants.md §3 (Q4_0) and §8 (Q6_K). Tokenizer: gemma4.md §4, tokenizer.md §2-3, 7.

The weights are not quantized floats: the blocks are written directly from random codes and
chosen scales (quants.md §10.3), so a 3.35 GB file takes well under a minute and is streamed
to disk in chunks of at most CHUNK_BYTES. Output is a pure function of (shape options, seed):
each tensor has its own generator seeded with (seed, tensor index), independent of chunking.

Distributions (dequantized values; "std" is the target standard deviation, see WEIGHT_STD):
  * Q4_0 matrices: codes uniform over 0..15 (value (q-8)*d, so -8..7, rms 4.64), per-block
    scale d = +-STD/4.64 * u, u ~ U(0.75, 1.25), random sign. std 0.03 (attention, ffn gate/up,
    PLE gate/projection), 0.02 for ffn_down (fan-in 6144/12288). The random sign of d cancels
    the -0.5 mean of the codes across blocks. Never zero blocks (|d| >= 0.75*STD/4.64).
  * Q6_K tables: ql/qh random (codes uniform over -32..31, rms 18.5), int8 sub-block scales
    +-U{64..127} with random sign (the reference quantizer gives the block's largest group -128
    and the others similar magnitudes), d = STD/(18.5*97.4) * u. std 0.03 for token_embd
    (x0 = E[t]*sqrt(1536) has rms ~1.2; tied logits have std ~1.2 before the softcap), 0.05 for
    per_layer_token_embd (the lookup is *16: rms ~0.8, similar to the normed projection).
    d lands in the f16 subnormal range, as it does in real Q6_K files of small weights.
  * BF16 per_layer_model_proj: N(0, 0.03) rounded to nearest even.
  * Norm weights (F32, used as stored: Gemma 4 has no +1): attn_norm, ffn_norm, output_norm,
    per_layer_proj_norm ~ U(0.7, 1.3); post_attention_norm, post_ffw_norm, post_norm (the
    residual branch gains) ~ U(0.5, 1.0); attn_q_norm ~ U(0.5, 1.0) and attn_k_norm ~
    U(0.06, 0.12) (they replace 1/sqrt(head_dim): attention scores have std ~1.1 on sliding
    and ~1.5 on global layers).
  * layer_output_scale ~ U(0.5, 0.9): every branch is RMS-normed before its residual add, so the
    stream obeys r' = s*(r + ~3 branch rms) and settles near rms ~1.3 instead of growing over
    35 layers.
  * rope_freqs: 1.0 x 64 then 1e30 x 192 (as llama.cpp's converter writes for E2B).

Tokenizer (fixed, independent of the seed): `tokenizer.ggml.model = "gemma4"`, 262144 unique
strings. Gemma 4's special tokens at their ids (gemma4.md §4.3), <unusedN> control fillers in
the low range, newline runs at 107..137, byte tokens <0x00>..<0xFF> at 238..493 (Gemma's
layout), 160 single characters, then merged 2- and 3-character pieces, each with its BPE merge
(one merge per merged token, ranks in id order). Scores are all -1000 (as the gemma4
converter writes), bos 2 / eos 1 / unk 3 / pad 0 / mask 4, add_bos true, add_space_prefix false.
No chat template. llama.cpp 0.3.36's vocab loader needs the merges and asserts unique strings.

The shrink options (--layers, --hidden, --ffn, --vocab, --shared-kv-layers) exist for tests; they
change the chosen variant's value (E2B by default).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import pathlib
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

CHUNK_BYTES = 32 << 20          # largest piece of tensor data held in memory at once
SPEC_FILE_SIZE = 3_349_516_256  # gemma4.md §3.4: the official E2B QAT Q4_0 file

WEIGHT_STD = {
    "token_embd": 0.03, "per_layer_token_embd": 0.05, "per_layer_model_proj": 0.03,
    "ffn_down": 0.02, "matrix": 0.03,
    # MoE router [d -> E], F32 (llama.cpp never quantizes ffn_gate_inp): its input has norm ~1,
    # so logits have std ~1 and the top 8 of 128 vary from token to token.
    "ffn_gate_inp": 1.0,
}
NORM_RANGE = {
    "attn_norm": (0.7, 1.3), "ffn_norm": (0.7, 1.3), "output_norm": (0.7, 1.3),
    "per_layer_proj_norm": (0.7, 1.3),
    "post_attention_norm": (0.5, 1.0), "post_ffw_norm": (0.5, 1.0), "post_norm": (0.5, 1.0),
    "attn_q_norm": (0.5, 1.0), "attn_k_norm": (0.06, 0.12),
    "layer_output_scale": (0.5, 0.9),
    "pre_ffw_norm_2": (0.7, 1.3), "post_ffw_norm_1": (0.5, 1.0), "post_ffw_norm_2": (0.5, 1.0),
}
SCALE_RANGE = (0.7, 1.3)   # ffn_gate_inp.scale, ffn_down_exps.scale (MoE)
Q4_0_CODE_RMS = math.sqrt(21.5)       # rms of (q - 8), q uniform on 0..15
Q6_K_CODE_RMS = math.sqrt(341.5)      # rms of q, q uniform on -32..31
Q6_K_SCALE_RMS = math.sqrt(9477.25)   # rms of |sc|, sc uniform on 64..127


@dataclasses.dataclass(frozen=True)
class Shape:
    """E2B by default (gemma4.md §1.1). ffn is the width of the non-shared layers; with
    double_wide the KV-shared ones are twice as wide."""
    layers: int = 35
    hidden: int = 1536
    ffn: int = 6144
    heads: int = 8
    kv_heads: int = 1
    head_dim_swa: int = 256
    head_dim: int = 512             # global layers
    window: int = 512
    pattern: str = "SSSSF"          # repeated; S = sliding
    shared_kv_layers: int = 20
    ple: int = 256
    vocab: int = 262144
    context: int = 131072
    partial_rotary: float = 0.25
    kv_heads_global: int | None = None   # None: kv_heads on every layer
    double_wide: bool = True
    k_eq_v: bool = False                 # global layers have no attn_v (V = K)
    experts: int = 0                     # MoE (gemma4.md §2.9): experts per layer, 0 = dense
    experts_used: int = 0                # experts per token
    expert_ffn: int = 0                  # width of one expert
    label: str = "E2B"

    def n_kv_heads(self, il: int) -> int:
        if self.is_swa(il) or self.kv_heads_global is None:
            return self.kv_heads
        return self.kv_heads_global

    def has_v(self, il: int) -> bool:
        return self.is_swa(il) or not self.k_eq_v

    def is_swa(self, il: int) -> bool:
        return self.pattern[il % len(self.pattern)] == "S"

    def hd(self, il: int) -> int:
        return self.head_dim_swa if self.is_swa(il) else self.head_dim

    @property
    def first_shared(self) -> int:
        return self.layers - self.shared_kv_layers

    def n_ff(self, il: int) -> int:
        return self.ffn * (2 if self.double_wide and il >= self.first_shared else 1)

    def validate(self) -> None:
        def bad(msg):
            raise ValueError(f"bad shape: {msg}")
        if self.layers < 1 or not 0 <= self.shared_kv_layers < self.layers:
            bad(f"need layers >= 1 and 0 <= shared_kv_layers < layers (got {self.layers}, {self.shared_kv_layers})")
        if self.hidden % 256 or self.hidden <= 0:
            bad(f"hidden {self.hidden} must be a positive multiple of 256 (Q6_K rows of token_embd)")
        if self.ffn % 32 or self.ffn <= 0:
            bad(f"ffn {self.ffn} must be a positive multiple of 32 (Q4_0 rows of ffn_down)")
        if self.experts and (self.expert_ffn % 32 or self.expert_ffn <= 0 or not 0 < self.experts_used <= self.experts):
            bad(f"experts {self.experts}, used {self.experts_used}, expert ffn {self.expert_ffn}: need "
                f"0 < used <= experts and a positive multiple of 32 (Q4_0 rows of ffn_down_exps)")
        if self.ple < 0 or (self.layers * self.ple) % 256:
            bad(f"layers*ple = {self.layers * self.ple} must be a multiple of 256 (Q6_K rows of the PLE table)")
        if self.vocab < MIN_VOCAB:
            bad(f"vocab {self.vocab} is below the {MIN_VOCAB} ids the fixed tokens need")
        if set(self.pattern) - {"S", "F"} or self.is_swa(self.layers - 1):
            bad("pattern must be S/F and the last layer global")
        for il in range(self.layers):
            if self.n_kv_heads(il) < 1 or self.heads % self.n_kv_heads(il):
                bad(f"layer {il}: {self.heads} query heads are not a multiple of {self.n_kv_heads(il)} KV heads")
        # every shared layer needs an earlier non-shared layer of its type (gemma4.md §1.2)
        for il in range(self.first_shared, self.layers):
            if not any(self.is_swa(j) == self.is_swa(il) for j in range(self.first_shared)):
                bad(f"KV-shared layer {il} has no earlier {'sliding' if self.is_swa(il) else 'global'} layer")


# The published text configs (docs/spec/gemma4.md §1.3; head dims 256 sliding / 512 global and
# the proportional RoPE of the global layers as in E2B).
VARIANTS = {
    "e2b": Shape(),
    "e4b": Shape(layers=42, hidden=2560, ffn=10240, heads=8, kv_heads=2, pattern="SSSSSF", shared_kv_layers=18,
                 double_wide=False, label="E4B"),
    "31b": Shape(layers=60, hidden=5376, ffn=21504, heads=32, kv_heads=16, kv_heads_global=4, pattern="SSSSSF",
                 window=1024, shared_kv_layers=0, ple=0, double_wide=False, k_eq_v=True, label="31B"),
    # gemma4.md §2.9: a dense FFN of 2112 and 128 experts of 704 (8 per token) in every layer.
    "26b-a4b": Shape(layers=30, hidden=2816, ffn=2112, heads=16, kv_heads=8, kv_heads_global=2, pattern="SSSSSF",
                     window=1024, shared_kv_layers=0, ple=0, double_wide=False, k_eq_v=True, context=262144,
                     experts=128, experts_used=8, expert_ffn=704, label="26B-A4B"),
}


# ---------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------
T = gguf.TokenType
# gemma4.md §4.3; types as the gemma4 converter assigns them (tokenizer.md §3.2): HF special
# tokens CONTROL, the seven tool/channel markers USER_DEFINED, "\n" and "</s>" NORMAL.
SPECIAL_TOKENS = {
    0: ("<pad>", T.CONTROL), 1: ("<eos>", T.CONTROL), 2: ("<bos>", T.CONTROL),
    3: ("<unk>", T.CONTROL), 4: ("<mask>", T.CONTROL),
    46: ("<|tool>", T.CONTROL), 47: ("<tool|>", T.CONTROL),
    48: ("<|tool_call>", T.USER_DEFINED), 49: ("<tool_call|>", T.USER_DEFINED),
    50: ("<|tool_response>", T.USER_DEFINED), 51: ("<tool_response|>", T.USER_DEFINED),
    52: ('<|"|>', T.USER_DEFINED),
    98: ("<|think|>", T.CONTROL),
    100: ("<|channel>", T.USER_DEFINED), 101: ("<channel|>", T.USER_DEFINED),
    105: ("<|turn>", T.CONTROL), 106: ("<turn|>", T.CONTROL),
    212: ("</s>", T.NORMAL),
    255999: ("<|image>", T.CONTROL), 256000: ("<|audio>", T.CONTROL),
    258880: ("<|image|>", T.CONTROL), 258881: ("<|audio|>", T.CONTROL),
    258882: ("<image|>", T.CONTROL), 258883: ("<audio|>", T.CONTROL),
    258884: ("<|video|>", T.CONTROL),
}
NEWLINE_RUNS = (107, 138)     # ids 107..137 = "\n" x 1..31
BYTE_BASE = 238               # <0x00> .. <0xFF> at 238..493
LOW_RANGE_END = BYTE_BASE + 256
MIN_VOCAB = 1024
BASE_CHARS = (["▁"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
              + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
              + [chr(c) for c in range(ord("0"), ord("9") + 1)]
              + [chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum()]
              + [chr(c) for c in range(0xC0, 0x100)])


def make_vocab(n_vocab: int):
    """(tokens, token types, merges) for `n_vocab` ids; see the module docstring."""
    tokens: list[str | None] = [None] * n_vocab
    types = [int(T.NORMAL)] * n_vocab
    for i, (text, tt) in SPECIAL_TOKENS.items():
        if i < n_vocab:
            tokens[i], types[i] = text, int(tt)
    for k, i in enumerate(range(*NEWLINE_RUNS)):
        tokens[i] = "\n" * (k + 1)
    for b in range(256):
        tokens[BYTE_BASE + b], types[BYTE_BASE + b] = f"<0x{b:02X}>", int(T.BYTE)
    unused = 0
    for i in range(LOW_RANGE_END):
        if tokens[i] is None:
            tokens[i], types[i] = f"<unused{unused}>", int(T.CONTROL)
            unused += 1
    # Pieces: single characters, then 2-character merges of them, then 3-character ones
    # (a 2-character piece + a character), each id's merge ranked in id order.
    free = (i for i in range(LOW_RANGE_END, n_vocab) if tokens[i] is None)

    def pieces():
        for c in BASE_CHARS:
            yield c, None
        pairs = [(a, b) for a in BASE_CHARS for b in BASE_CHARS]
        for a, b in pairs:
            yield a + b, f"{a} {b}"
        for a, b in pairs:
            for c in BASE_CHARS:
                yield a + b + c, f"{a + b} {c}"

    merges: list[str] = []
    for i, (text, merge) in zip(free, pieces()):
        tokens[i] = text
        if merge is not None:
            merges.append(merge)
    if any(t is None for t in tokens):
        raise ValueError(f"vocab {n_vocab} is larger than the filler pieces can cover")
    if len(set(tokens)) != n_vocab:
        raise AssertionError("token strings are not unique")   # llama.cpp asserts uniqueness
    return tokens, types, merges


# ---------------------------------------------------------------------------------------
# Block generators: each returns uint8 [n_rows, row_bytes] for a chunk of rows
# ---------------------------------------------------------------------------------------
def _raw_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    words = rng.bit_generator.random_raw((n + 7) // 8)
    return words.view(np.uint8)[:n]


def q4_0_rows(rng, rows: int, cols: int, std: float) -> np.ndarray:
    nb = rows * (cols // 32)
    out = np.empty((nb, 18), dtype=np.uint8)
    u = rng.uniform(0.75, 1.25, nb).astype(np.float32)
    sign = np.where(_raw_bytes(rng, nb) & 1, np.float32(-1), np.float32(1))
    d = (sign * u * np.float32(std / Q4_0_CODE_RMS)).astype("<f2")
    out[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
    out[:, 2:] = _raw_bytes(rng, nb * 16).reshape(nb, 16)
    return out.reshape(rows, -1)


def q6_k_rows(rng, rows: int, cols: int, std: float) -> np.ndarray:
    nb = rows * (cols // 256)
    out = np.empty((nb, 210), dtype=np.uint8)
    out[:, :192] = _raw_bytes(rng, nb * 192).reshape(nb, 192)           # ql[128], qh[64]
    mag = rng.integers(64, 128, size=(nb, 16), dtype=np.int16)
    neg = (_raw_bytes(rng, nb * 16).reshape(nb, 16) & 1).astype(bool)
    out[:, 192:208] = np.where(neg, -mag, mag).astype(np.int8).view(np.uint8)
    u = rng.uniform(0.75, 1.25, nb).astype(np.float32)
    d = (u * np.float32(std / (Q6_K_CODE_RMS * Q6_K_SCALE_RMS))).astype("<f2")
    out[:, 208:210] = d.view(np.uint8).reshape(nb, 2)
    return out.reshape(rows, -1)


def f32_rows(rng, rows: int, cols: int, std: float) -> np.ndarray:
    return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)).astype("<f4").view(np.uint8)


def bf16_rows(rng, rows: int, cols: int, std: float) -> np.ndarray:
    x = (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)).view(np.uint32)
    x = (x + np.uint32(0x7FFF) + ((x >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return x.astype("<u2").view(np.uint8)


ROW_GEN = {QT.Q4_0: q4_0_rows, QT.Q6_K: q6_k_rows, QT.BF16: bf16_rows, QT.F32: f32_rows}


@dataclasses.dataclass
class TensorPlan:
    name: str
    qtype: QT
    ne: tuple[int, ...]           # ggml order: ne[0] is the row (input) length
    std: float | None = None      # matrices
    lo_hi: tuple[float, float] | None = None   # uniform F32 vectors
    values: np.ndarray | None = None           # fixed F32 vectors

    @property
    def nbytes(self) -> int:
        block, size = gguf.GGML_QUANT_SIZES[self.qtype]
        n = math.prod(self.ne)
        return n // block * size


def plan_tensors(s: Shape) -> list[TensorPlan]:
    """Every tensor of the file in write order, with llama.cpp names and ggml shapes
    (gemma4.md §3.3). Matrices are ne [in, out]."""
    E, V, LP = s.hidden, s.vocab, s.layers * s.ple
    n_rot = int(s.partial_rotary * s.head_dim // 2)
    rope = np.array([1.0] * n_rot + [1e30] * (s.head_dim // 2 - n_rot), dtype=np.float32)
    t = [
        TensorPlan("token_embd.weight", QT.Q6_K, (E, V), std=WEIGHT_STD["token_embd"]),
        TensorPlan("rope_freqs.weight", QT.F32, (s.head_dim // 2,), values=rope),
    ]
    if s.ple:
        t += [
            TensorPlan("per_layer_token_embd.weight", QT.Q6_K, (LP, V), std=WEIGHT_STD["per_layer_token_embd"]),
            TensorPlan("per_layer_model_proj.weight", QT.BF16, (E, LP), std=WEIGHT_STD["per_layer_model_proj"]),
            TensorPlan("per_layer_proj_norm.weight", QT.F32, (s.ple,), lo_hi=NORM_RANGE["per_layer_proj_norm"]),
        ]
    t.append(TensorPlan("output_norm.weight", QT.F32, (E,), lo_hi=NORM_RANGE["output_norm"]))
    m = WEIGHT_STD["matrix"]
    for il in range(s.layers):
        hd, ff, p = s.hd(il), s.n_ff(il), f"blk.{il}."
        q, kv = s.heads * hd, s.n_kv_heads(il) * hd

        def vec(leaf, n):
            return TensorPlan(p + leaf + ".weight", QT.F32, (n,), lo_hi=NORM_RANGE[leaf])

        t += [
            vec("attn_norm", E),
            TensorPlan(p + "attn_q.weight", QT.Q4_0, (E, q), std=m),
            # shared layers (il >= first_shared) carry K/V too, unused, as real files do
            TensorPlan(p + "attn_k.weight", QT.Q4_0, (E, kv), std=m),
        ]
        if s.has_v(il):
            t.append(TensorPlan(p + "attn_v.weight", QT.Q4_0, (E, kv), std=m))
        t += [
            TensorPlan(p + "attn_output.weight", QT.Q4_0, (q, E), std=m),
            vec("attn_q_norm", hd),
            vec("attn_k_norm", hd),
            vec("post_attention_norm", E),
            vec("ffn_norm", E),
            TensorPlan(p + "ffn_gate.weight", QT.Q4_0, (E, ff), std=m),
            TensorPlan(p + "ffn_up.weight", QT.Q4_0, (E, ff), std=m),
            TensorPlan(p + "ffn_down.weight", QT.Q4_0, (ff, E), std=WEIGHT_STD["ffn_down"]),
            vec("post_ffw_norm", E),
        ]
        if s.experts:   # gemma4.md §2.9 / §3.3: router, experts as [in, out, E] stacks, scales, norms
            X, F = s.experts, s.expert_ffn
            t += [
                TensorPlan(p + "ffn_gate_inp.weight", QT.F32, (E, X), std=WEIGHT_STD["ffn_gate_inp"]),
                TensorPlan(p + "ffn_gate_inp.scale", QT.F32, (E,), lo_hi=SCALE_RANGE),
                TensorPlan(p + "ffn_gate_up_exps.weight", QT.Q4_0, (E, 2 * F, X), std=m),
                TensorPlan(p + "ffn_down_exps.weight", QT.Q4_0, (F, E, X), std=WEIGHT_STD["ffn_down"]),
                TensorPlan(p + "ffn_down_exps.scale", QT.F32, (X,), lo_hi=SCALE_RANGE),
                vec("pre_ffw_norm_2", E),
                vec("post_ffw_norm_1", E),
                vec("post_ffw_norm_2", E),
            ]
        if s.ple:
            t += [
                TensorPlan(p + "inp_gate.weight", QT.Q4_0, (E, s.ple), std=m),
                TensorPlan(p + "proj.weight", QT.Q4_0, (s.ple, E), std=m),
                vec("post_norm", E),
            ]
        t.append(vec("layer_output_scale", 1))
    return t


def tensor_chunks(tp: TensorPlan, rng: np.random.Generator):
    """The tensor's bytes as a sequence of arrays (row chunks of at most CHUNK_BYTES)."""
    if tp.qtype == QT.F32 and tp.std is None:
        if tp.values is not None:
            yield tp.values.astype("<f4")
        else:
            yield rng.uniform(*tp.lo_hi, size=tp.ne[0]).astype("<f4")
        return
    cols, rows = tp.ne[0], math.prod(tp.ne[1:])   # a 3-D expert stack is E x out rows
    row_bytes = tp.nbytes // rows
    step = max(1, CHUNK_BYTES // row_bytes)
    for r0 in range(0, rows, step):
        yield ROW_GEN[tp.qtype](rng, min(step, rows - r0), cols, tp.std)


# ---------------------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------------------
def add_metadata(w: gguf.GGUFWriter, s: Shape, seed: int) -> None:
    """gemma4.md §3.2 keys (written the way python/convert_hf_to_gguf.py and llama.cpp do)."""
    w.add_type("model")
    w.add_name(f"Gemma 4 {s.label}-shaped (random weights)")
    w.add_basename("gemma-4")
    w.add_size_label(s.label)
    w.add_description(f"sluice benchmark file: Gemma 4 {s.label} shapes and QAT Q4_0 types, random weights "
                      f"(python/make_e2b_shaped.py, seed {seed}); its output is meaningless")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_sampling_top_k(64)
    w.add_sampling_top_p(0.95)
    w.add_sampling_temp(1.0)

    w.add_block_count(s.layers)
    w.add_context_length(s.context)
    w.add_embedding_length(s.hidden)
    n_ff = [s.n_ff(il) for il in range(s.layers)]
    if len(set(n_ff)) > 1:
        w.add_feed_forward_length(n_ff)            # arr[i32] (double-wide MLP)
    else:
        w.add_feed_forward_length(n_ff[0])
    w.add_head_count(s.heads)
    n_kv = [s.n_kv_heads(il) for il in range(s.layers)]
    if len(set(n_kv)) > 1:
        w.add_head_count_kv(n_kv)                  # arr[i32]: sliding and global layers differ
    else:
        w.add_head_count_kv(n_kv[0])
    w.add_rope_freq_base(1_000_000.0)
    w.add_rope_freq_base_swa(10_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_key_length(s.head_dim)                   # global head dim
    w.add_value_length(s.head_dim)
    w.add_key_length_swa(s.head_dim_swa)
    w.add_value_length_swa(s.head_dim_swa)
    w.add_rope_dimension_count(s.head_dim)         # partiality lives in rope_freqs
    w.add_rope_dimension_count_swa(s.head_dim_swa)
    w.add_final_logit_softcapping(30.0)
    w.add_sliding_window(s.window)
    w.add_sliding_window_pattern([s.is_swa(il) for il in range(s.layers)])
    w.add_shared_kv_layers(s.shared_kv_layers)
    w.add_embedding_length_per_layer_input(s.ple)
    if s.experts:
        w.add_expert_count(s.experts)
        w.add_expert_used_count(s.experts_used)
        w.add_expert_feed_forward_length(s.expert_ffn)

    tokens, types, merges = make_vocab(s.vocab)
    w.add_tokenizer_model("gemma4")
    w.add_tokenizer_pre("gemma4")
    w.add_token_list(tokens)
    w.add_token_scores([-1000.0] * len(tokens))
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_mask_token_id(4)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)


def write(out_path, s: Shape = Shape(), seed: int = 0, log=print) -> int:
    """Write the file; returns its size in bytes."""
    s.validate()
    out = pathlib.Path(out_path)
    if out.is_dir():
        raise ValueError(f"{out} is a directory; give the path of the .gguf file to write")
    if not out.parent.is_dir():
        raise ValueError(f"cannot write {out}: directory {out.parent} does not exist")
    plans = plan_tensors(s)
    tmp = out.with_name(out.name + ".partial")
    w = gguf.GGUFWriter(str(tmp), "gemma4")
    add_metadata(w, s, seed)
    for tp in plans:
        # element shape in numpy order (ne reversed); the dtype argument is ignored with raw_dtype
        w.add_tensor_info(tp.name, tuple(reversed(tp.ne)), np.dtype(np.float32), tp.nbytes, raw_dtype=tp.qtype)
    t0 = time.perf_counter()
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        f = w.fout[0]
        align = w.data_alignment
        done = 0
        total = sum(tp.nbytes for tp in plans)
        for idx, tp in enumerate(plans):
            f.write(b"\0" * (-f.tell() % align))
            rng = np.random.default_rng([seed, idx])
            n = 0
            for chunk in tensor_chunks(tp, rng):
                f.write(memoryview(np.ascontiguousarray(chunk)).cast("B"))
                n += chunk.nbytes
            if n != tp.nbytes:
                raise AssertionError(f"{tp.name}: wrote {n} bytes, expected {tp.nbytes}")
            done += n
            if tp.nbytes > 100 << 20:
                log(f"  {tp.name}: {tp.nbytes / 1e6:.0f} MB ({done / total:.0%}, {time.perf_counter() - t0:.0f} s)")
        f.write(b"\0" * (-f.tell() % align))
        w.close()
        os.replace(tmp, out)
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    size = out.stat().st_size
    log(f"wrote {out}: {len(plans)} tensors, {size} bytes, {time.perf_counter() - t0:.1f} s")
    return size


# E2B's assistant (gemma4.md §5): 4 Q-only layers [S,S,S,F] of width 256 over the target's
# K/V, FFN 2048, 2048 centroids with top 32.
ASSISTANT = dict(layers=4, hidden=256, ffn=2048, heads=4, centroids=2048, top_k=32, pattern="SSSF")


def write_assistant(out_path, s: Shape = Shape(), seed: int = 0, outtype: str = "q4_0", log=print) -> None:
    """An assistant GGUF for target shape `s`, random weights (N(0, std) matrices, the norm
    ranges above, a random token ordering), through python/convert_hf_to_gguf.py's assistant
    path (gemma4-assistant, Q4_0 matrices by default)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import convert_hf_to_gguf as conv
    a = ASSISTANT
    rng = np.random.default_rng([seed, 4242])
    text = {
        "model_type": "gemma4_text", "num_hidden_layers": a["layers"], "hidden_size": a["hidden"],
        "intermediate_size": a["ffn"], "num_attention_heads": a["heads"], "num_key_value_heads": s.kv_heads,
        "head_dim": s.head_dim_swa, "global_head_dim": s.head_dim, "sliding_window": s.window,
        "layer_types": ["sliding_attention" if c == "S" else "full_attention" for c in a["pattern"]],
        "max_position_embeddings": s.context, "num_kv_shared_layers": a["layers"], "rms_norm_eps": 1e-6,
        "hidden_size_per_layer_input": 0, "use_double_wide_mlp": False, "tie_word_embeddings": True,
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "proportional", "rope_theta": 1e6,
                                               "partial_rotary_factor": s.partial_rotary}},
    }
    cfg = {"model_type": "gemma4_assistant", "architectures": ["Gemma4AssistantForCausalLM"],
           "backbone_hidden_size": s.hidden, "use_ordered_embeddings": True, "num_centroids": a["centroids"],
           "centroid_intermediate_top_k": a["top_k"], "text_config": text}

    def mat(rows, cols, std=0.03):
        return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)

    def norm(n, name):
        lo, hi = NORM_RANGE[name]
        return rng.uniform(lo, hi, n).astype(np.float32)

    d = a["hidden"]
    st = {"model.embed_tokens.weight": mat(s.vocab, d), "model.norm.weight": norm(d, "output_norm"),
          "pre_projection.weight": mat(d, 2 * s.hidden), "post_projection.weight": mat(s.hidden, d),
          "masked_embedding.centroids.weight": mat(a["centroids"], d),
          "masked_embedding.token_ordering": rng.permutation(s.vocab).astype(np.int64)}
    for il, c in enumerate(a["pattern"]):
        hd = s.head_dim_swa if c == "S" else s.head_dim
        p = f"model.layers.{il}."
        st.update({
            p + "self_attn.q_proj.weight": mat(a["heads"] * hd, d), p + "self_attn.o_proj.weight": mat(d, a["heads"] * hd),
            p + "self_attn.q_norm.weight": norm(hd, "attn_q_norm"), p + "input_layernorm.weight": norm(d, "attn_norm"),
            p + "post_attention_layernorm.weight": norm(d, "post_attention_norm"),
            p + "pre_feedforward_layernorm.weight": norm(d, "ffn_norm"),
            p + "post_feedforward_layernorm.weight": norm(d, "post_ffw_norm"),
            p + "mlp.gate_proj.weight": mat(a["ffn"], d), p + "mlp.up_proj.weight": mat(a["ffn"], d),
            p + "mlp.down_proj.weight": mat(d, a["ffn"], 0.02),
            p + "layer_scalar": norm(1, "layer_output_scale"),
        })
    conv.convert_state(cfg, st, out_path, outtype, name=f"{s.label}-shaped assistant", verbose=False)
    log(f"wrote {out_path} ({os.path.getsize(out_path) / 1e6:.1f} MB)")


def main(argv=None) -> int:
    d = Shape()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="GGUF file to write (e.g. models/gemma4-e2b-shaped-q4_0.gguf)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variant", choices=sorted(VARIANTS), default="e2b", help="which Gemma 4 shape (default e2b)")
    p.add_argument("--layers", type=int, help=f"(tests) number of layers (E2B: {d.layers})")
    p.add_argument("--shared-kv-layers", type=int, help="(tests)")
    p.add_argument("--hidden", type=int, help="(tests) multiple of 256")
    p.add_argument("--ffn", type=int, help="(tests) non-shared FFN width (shared layers get 2x with double-wide)")
    p.add_argument("--vocab", type=int, help=f"(tests) at least {MIN_VOCAB}")
    p.add_argument("--experts", type=int, help="(tests) MoE experts per layer (26b-a4b: 128)")
    p.add_argument("--expert-ffn", type=int, help="(tests) MoE expert width (26b-a4b: 704)")
    p.add_argument("--assistant", action="store_true",
                   help="write the variant's assistant (MTP drafter, gemma4.md §5) instead of the model")
    a = p.parse_args(argv)
    if a.seed < 0:
        p.error("--seed must be >= 0")
    shrink = {k: v for k, v in (("layers", a.layers), ("shared_kv_layers", a.shared_kv_layers), ("hidden", a.hidden),
                                ("ffn", a.ffn), ("vocab", a.vocab), ("experts", a.experts),
                                ("expert_ffn", a.expert_ffn)) if v is not None}
    s = dataclasses.replace(VARIANTS[a.variant], **shrink)
    try:
        if a.assistant:
            write_assistant(a.out, s, a.seed)
            return 0
        write(a.out, s, a.seed)
    except (ValueError, OSError) as e:
        print(f"make_e2b_shaped: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
