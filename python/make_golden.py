#!/usr/bin/env python3
"""Build the golden fixtures for sluice's Gemma 4 / Gemma 3 forward passes.

    .venv-golden/bin/python python/make_golden.py            # writes tests/data/golden/

For each tiny model (fixed seeds, python/make_tiny_model.py presets):
  1. build the random HF checkpoint (weights drawn with numpy from the seed,
     make_tiny_model.draw_state), reload it with transformers (float32, eager attention)
     and check the reload is bit-identical to what was generated;
  2. convert it with python/convert_hf_to_gguf.py to f32, q8_0 and q4_0 GGUFs, through the
     same function python/make_fixtures.py uses to rebuild them at test time (numpy + gguf
     only), and check converting transformers' saved checkpoint gives the same bytes;
  3. reference logits [n_tokens x n_vocab] from transformers:
       f32   -> on the original weights,
       q8_0/q4_0 -> on weights DEQUANTIZED FROM THE GGUF (gguf.quants.dequantize, names
                    mapped back) so an engine comparison isolates the engine from
                    quantization error;
  4. per-layer taps (embd, ple, attn_out.i, ffn_out.i, l_out.i, result_norm) for the f32
     models;
  5. self-checks: an independent numpy forward written from the spec text
     (docs/spec/gemma4.md §2, gemma3.md §2) that reads ONLY the GGUF must match
     transformers; facts about transformers' implementation (attention scale, V-norm, KV
     sharing, mask boundary, proportional RoPE, embed scale) are asserted and recorded.
Outputs (all little-endian): <id>.<type>.logits.f32 (raw float32, row-major
[n_tokens, n_vocab]), <id>.f32.taps.bin (format below), manifest.json (with each model's
config, tensor list and seed, and each GGUF's sha256), all committed; <id>.<type>.gguf,
not committed (.gitignore): `make fixtures` rebuilds them and checks the hashes.

taps.bin format v1: b"SLTP", u32 version=1, u32 n_records, then per record:
  u32 name_len, name (utf-8), u32 ndim, u64 dims[ndim] (row-major, outermost first),
  float32 data[prod(dims)].
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import pathlib
import struct
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import gguf  # noqa: E402

import convert_hf_to_gguf as conv  # noqa: E402
import make_fixtures as fixtures  # noqa: E402
import make_tiny_model as tiny  # noqa: E402

MOE_OPTIONS = {"layers": 6, "layer_pattern": "SSF", "heads": 4, "kv_heads": 2, "global_kv_heads": 1,
               "intermediate": 96, "moe_intermediate": 32, "attention_k_eq_v": True,
               "kv_shared_layers": 0, "ple_width": 0, "double_wide_mlp": False}
# Fixed seeds: changing anything here changes every committed fixture.
MODELS = [
    {"id": "tiny-gemma4", "arch": "gemma4", "seed": 4, "prompt_seed": 40, "n_tokens": 64},
    {"id": "tiny-gemma3", "arch": "gemma3", "seed": 3, "prompt_seed": 30, "n_tokens": 64},
    # 31B-shaped (gemma4.md §1.3): global layers share K and V (no v_proj), no KV-shared
    # layers, no PLE, no double-wide MLP.
    {"id": "tiny-gemma4-k-eq-v", "arch": "gemma4", "seed": 31, "prompt_seed": 310, "n_tokens": 64,
     "options": {"attention_k_eq_v": True, "kv_shared_layers": 0, "ple_width": 0, "double_wide_mlp": False}},
    # 26B-A4B-shaped (gemma4.md §2.9): every layer has routed experts beside a dense MLP
    # (0.75x hidden, as 2112/2816), global layers are K=V with their own KV-head count. The
    # second writes the experts' gate and up as llama.cpp's split pair and routes 3 of 6.
    {"id": "tiny-gemma4-moe", "arch": "gemma4", "seed": 26, "prompt_seed": 260, "n_tokens": 64,
     "options": {**MOE_OPTIONS, "moe_experts": 8, "moe_top_k": 2}},
    {"id": "tiny-gemma4-moe-split", "arch": "gemma4", "seed": 27, "prompt_seed": 270, "n_tokens": 64,
     "options": {**MOE_OPTIONS, "moe_experts": 6, "moe_top_k": 3},
     "convert_options": {"split_experts": True}},
]
# Draft models for the speculative-decoding tests (`--spec draft`): random, smaller, other
# seeds, the same vocabulary size (the converter's stand-in tokenizer depends on n_vocab only,
# so the token texts match too). Only an f32 GGUF each, no logits: manifest "drafts".
DRAFTS = [
    {"id": "tiny-gemma3-draft", "arch": "gemma3", "seed": 33,
     "options": {"layers": 6, "hidden": 32, "intermediate": 64, "heads": 2, "kv_heads": 1}},
    {"id": "tiny-gemma4-draft", "arch": "gemma4", "seed": 44,
     "options": {"layers": 5, "hidden": 32, "intermediate": 64, "heads": 4, "kv_heads": 1,
                 "kv_shared_layers": 0, "ple_width": 16, "double_wide_mlp": False}},
]
OUTTYPES = ["f32", "q8_0", "q4_0"]
TAPS_MAGIC, TAPS_VERSION = b"SLTP", 1
FORMAT_VERSION = 2   # manifest "format_version"; bump when file layouts change
# (2: weights drawn with numpy, "hf_tensors" recorded, GGUFs rebuilt by make_fixtures.py)


# ---------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------
def nmse(a, b) -> float:
    """mse(a, b) / mse(b, 0), as in ggml test-backend-ops (conventions.md §6.2); b = reference."""
    a = np.asarray(a, np.float64); b = np.asarray(b, np.float64)
    return float(np.sum((a - b) ** 2) / max(np.sum(b ** 2), 1e-300))


def write_taps(path, records: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        f.write(TAPS_MAGIC + struct.pack("<II", TAPS_VERSION, len(records)))
        for name, arr in records.items():
            arr = np.ascontiguousarray(arr, dtype="<f4")
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<I", arr.ndim))
            f.write(struct.pack(f"<{arr.ndim}Q", *arr.shape))
            f.write(arr.tobytes())


def read_taps(path) -> dict[str, np.ndarray]:
    raw = pathlib.Path(path).read_bytes()
    assert raw[:4] == TAPS_MAGIC, "bad magic"
    ver, n = struct.unpack_from("<II", raw, 4)
    assert ver == TAPS_VERSION
    off, out = 12, {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", raw, off); off += 4
        name = raw[off:off + ln].decode(); off += ln
        (nd,) = struct.unpack_from("<I", raw, off); off += 4
        dims = struct.unpack_from(f"<{nd}Q", raw, off); off += 8 * nd
        cnt = int(np.prod(dims)) if nd else 1
        out[name] = np.frombuffer(raw, "<f4", cnt, off).reshape(dims).copy(); off += 4 * cnt
    assert off == len(raw)
    return out


def sha256(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------
# transformers side
# ---------------------------------------------------------------------------------------
def _eager_experts() -> dict:
    """MoE models: the plain per-expert loop of Gemma4TextExperts.forward (gemma4.md §2.9),
    not a fused kernel."""
    return {"experts_implementation": "eager"}


def load_hf(ckpt_dir):
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(ckpt_dir, dtype=torch.float32, attn_implementation="eager",
                                             **_eager_experts())
    return m.eval()


def hf_from_state(config, state: dict[str, np.ndarray]):
    """A fresh HF model from `config` with `state` (numpy, HF names) loaded strictly."""
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager",
                                         **_eager_experts()).eval()
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"state mismatch: missing {missing} unexpected {unexpected}")
    if config.tie_word_embeddings:
        assert m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr()
    return m


def run_hf(model, ids: np.ndarray, taps: bool = False):
    """logits [T, V] float32 (+ taps dict) for one sequence."""
    import torch
    rec: dict[str, np.ndarray] = {}
    hooks = []
    inner = model.model

    def save(name):
        def hook(_mod, _inp, out):
            t = out[0] if isinstance(out, tuple) else out
            rec[name] = t.detach()[0].float().numpy().copy()
        return hook

    def save_flat(name):   # modules that see the tokens flattened to [T, ...] (MoE)
        def hook(_mod, _inp, out):
            rec[name] = out.detach().float().numpy().copy()
        return hook

    def save_router(i):    # Gemma4TextRouter returns (probabilities, top-k weights, top-k ids)
        def hook(_mod, _inp, out):
            rec[f"moe_experts.{i}"] = out[2].detach().float().numpy().copy()
            rec[f"moe_weights.{i}"] = out[1].detach().float().numpy().copy()
        return hook

    orig_proj = getattr(inner, "project_per_layer_inputs", None)
    overridden = False
    if taps:
        hooks.append(inner.embed_tokens.register_forward_hook(save("embd")))
        for i, layer in enumerate(inner.layers):
            hooks.append(layer.self_attn.register_forward_hook(save(f"attn_out.{i}")))
            hooks.append(layer.mlp.register_forward_hook(save(f"ffn_out.{i}")))
            if getattr(layer, "enable_moe_block", False):
                hooks.append(layer.router.register_forward_hook(save_router(i)))
                hooks.append(layer.experts.register_forward_hook(save_flat(f"moe_out.{i}")))
            hooks.append(layer.register_forward_hook(save(f"l_out.{i}")))
        hooks.append(inner.norm.register_forward_hook(save("result_norm")))
        if orig_proj is not None and inner.hidden_size_per_layer_input:
            def proj(*a, **k):
                out = orig_proj(*a, **k)
                rec["ple"] = out.detach()[0].float().numpy().copy()
                return out
            inner.project_per_layer_inputs = proj
            overridden = True
    try:
        with torch.no_grad():
            # output_hidden_states=True turns off transformers' "slice to logits_to_keep before
            # the KV-shared layers" shortcut, which crashes in 5.24 when a model has KV-shared
            # layers but no PLE (it slices per_layer_inputs=None). No numerical effect.
            out = model(torch.from_numpy(ids.astype(np.int64))[None], use_cache=False,
                        output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
        if overridden:
            del inner.project_per_layer_inputs   # drop the instance override
    logits = out.logits[0].float().numpy().copy()
    if not taps:
        return logits
    # record order: embd, ple, per layer attn_out/ffn_out/l_out, result_norm
    order = ["embd"] + (["ple"] if "ple" in rec else [])
    for i in range(len(inner.layers)):
        order += [f"attn_out.{i}", f"ffn_out.{i}"]
        if f"moe_out.{i}" in rec:
            order += [f"moe_experts.{i}", f"moe_weights.{i}", f"moe_out.{i}"]
        order += [f"l_out.{i}"]
    order += ["result_norm"]
    return logits, {k: rec[k] for k in order}


@contextlib.contextmanager
def act_q8_0(model):
    """Round the input of every nn.Linear to Q8_0 blocks of 32 along the last dim (ggml's
    quantize_row_q8_0: d = amax/127 stored as f16, q = round-half-away(x/d)) — what a
    llama.cpp-style engine does to activations before a Q8_0/Q4_0 dot product. Used only
    to size the quantized-model tolerances."""
    import torch
    hooks = []

    def pre(_mod, args):
        x = args[0]
        k = x.shape[-1]
        if k % 32:
            return None
        b = x.reshape(*x.shape[:-1], k // 32, 32)
        d = (b.abs().amax(-1, keepdim=True) / 127.0).to(torch.float16).float()
        inv = torch.where(d > 0, 1.0 / (b.abs().amax(-1, keepdim=True) / 127.0), torch.zeros_like(d))
        q = torch.sign(b * inv) * torch.floor((b * inv).abs() + 0.5)
        return (q * d).reshape(x.shape),

    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            hooks.append(mod.register_forward_pre_hook(pre))
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


# ---------------------------------------------------------------------------------------
# Independent numpy forward, written from the spec text, reading only the GGUF
# ---------------------------------------------------------------------------------------
def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _rms(x, w=None, eps=1e-6):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def _rope_neox(x, pos, base, freq_factors=None, scale=1.0):
    """x [T, H, D]; NeoX pairs (i, i + D/2); theta = pos * base^(-2i/D) * scale / ff_i
    (G4 §2.1, G3 §2.1; ggml divides by rope_freqs)."""
    d = x.shape[-1]
    half = d // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / d) * scale
    if freq_factors is not None:
        inv = inv / freq_factors.astype(np.float64)
    th = pos[:, None].astype(np.float64) * inv[None, :]          # [T, half]
    c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def _spec_experts(W, il, x, k, eps, taps):
    """The routed-expert branch of layer il (G4 §2.9) for the residual x [T, d], before
    post_ffw_norm_2; records the moe_* taps."""
    p = f"blk.{il}."
    d = x.shape[1]
    r = _rms(x) * W[p + "ffn_gate_inp.scale"] * d ** -0.5
    z = r @ W[p + "ffn_gate_inp.weight"].T                          # [T, E]
    pr = np.exp(z - z.max(-1, keepdims=True)); pr /= pr.sum(-1, keepdims=True)
    idx = np.argsort(-pr, axis=-1, kind="stable")[:, :k]             # top-k, ties to the lower id
    w = np.take_along_axis(pr, idx, -1)
    w = w / w.sum(-1, keepdims=True) * W[p + "ffn_down_exps.scale"][idx]
    if p + "ffn_gate_up_exps.weight" in W:
        gu = W[p + "ffn_gate_up_exps.weight"]                       # [E, 2f, d]
    else:
        gu = np.concatenate([W[p + "ffn_gate_exps.weight"], W[p + "ffn_up_exps.weight"]], axis=1)
    down = W[p + "ffn_down_exps.weight"]                            # [E, d, f]
    f = down.shape[2]
    xe = _rms(x, W[p + "pre_ffw_norm_2.weight"], eps)
    y = np.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(k):
            h = gu[idx[t, j]] @ xe[t]
            y[t] += w[t, j] * (down[idx[t, j]] @ (_gelu_tanh(h[:f]) * h[f:]))
    taps[f"moe_experts.{il}"] = idx.astype(np.float64)
    taps[f"moe_weights.{il}"] = w.copy()
    taps[f"moe_out.{il}"] = y.copy()
    return y


def spec_forward(gguf_path, ids: np.ndarray):
    """logits [T, V] float64 and taps, from the GGUF alone, following gemma4.md §2 /
    gemma3.md §2 literally (llama.cpp conventions: rope_freqs divisors, stored +1 norms)."""
    r = gguf.GGUFReader(str(gguf_path))
    arch = r.fields["general.architecture"].contents()

    def kv(key, default=None):
        f = r.fields.get(f"{arch}.{key}")
        return default if f is None else f.contents()

    W = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        W[t.name] = a.reshape(tuple(int(x) for x in reversed(t.shape)))

    n_layer, n_embd = kv("block_count"), kv("embedding_length")
    n_head, n_head_kv = kv("attention.head_count"), kv("attention.head_count_kv")
    kv_heads = list(n_head_kv) if isinstance(n_head_kv, list) else [n_head_kv] * n_layer
    n_expert, n_used = kv("expert_count", 0), kv("expert_used_count", 0)
    eps, window = kv("attention.layer_norm_rms_epsilon"), kv("attention.sliding_window")
    softcap = kv("final_logit_softcapping")
    base, base_swa = kv("rope.freq_base"), kv("rope.freq_base_swa", 10000.0)
    if arch == "gemma4":
        pattern = list(kv("attention.sliding_window_pattern"))
        hd_g, hd_s = kv("attention.key_length"), kv("attention.key_length_swa")
        assert kv("rope.dimension_count") == hd_g and kv("rope.dimension_count_swa", hd_s) == hd_s
        n_shared = kv("attention.shared_kv_layers", 0)
        ple_w = kv("embedding_length_per_layer_input", 0)
        rope_freqs = W.get("rope_freqs.weight")
        scale_attn = lambda d: 1.0                    # G4 §2.4: no 1/sqrt(hd)
    else:
        pat = kv("attention.sliding_window_pattern")
        pattern = list(pat) if isinstance(pat, list) else [il % 6 < 5 for il in range(n_layer)]
        hd_g = hd_s = kv("attention.key_length")
        n_shared, ple_w, rope_freqs = 0, 0, None
        scale_attn = lambda d: 1.0 / math.sqrt(d)     # G3 §3.2 (not the 27B special case)
        rs_factor = kv("rope.scaling.factor") if kv("rope.scaling.type") is not None else None
    first_shared = n_layer - n_shared
    T = len(ids)
    pos = np.arange(T)
    E = W["token_embd.weight"]
    taps = {}
    x = E[ids] * np.float64(np.float32(math.sqrt(n_embd)))        # G4 §2.2 / G3 §2.2
    taps["embd"] = x.copy()
    if ple_w:
        L, P = n_layer, ple_w
        tok = W["per_layer_token_embd.weight"][ids] * np.float64(np.float32(math.sqrt(P)))
        proj = (x @ W["per_layer_model_proj.weight"].T) * (1.0 / math.sqrt(n_embd))
        proj = _rms(proj.reshape(T, L, P), W["per_layer_proj_norm.weight"], eps)
        ple = (proj + tok.reshape(T, L, P)) * (1.0 / math.sqrt(2.0))   # G4 §2.3
        taps["ple"] = ple.copy()
    idx = np.arange(T)
    cache = {}
    for il in range(n_layer):
        swa = pattern[il]
        D = hd_s if swa else hd_g
        blk = lambda n: W[f"blk.{il}.{n}.weight"]
        h_in = x
        a = _rms(x, blk("attn_norm"), eps)
        q = (a @ blk("attn_q").T).reshape(T, n_head, D)
        q = _rms(q, blk("attn_q_norm"), eps)
        if arch == "gemma4":
            rope = (lambda t: _rope_neox(t, pos, base_swa)) if swa else \
                   (lambda t: _rope_neox(t, pos, base, rope_freqs))
        else:
            rope = (lambda t: _rope_neox(t, pos, base_swa)) if swa else \
                   (lambda t: _rope_neox(t, pos, base, None, 1.0 / rs_factor if rs_factor else 1.0))
        q = rope(q)
        n_head_kv = kv_heads[il]
        if il < first_shared:
            k = (a @ blk("attn_k").T).reshape(T, n_head_kv, D)
            # K=V (31B global layers): no attn_v, V is the K projection before k-norm/RoPE
            v = k if f"blk.{il}.attn_v.weight" not in W else (a @ blk("attn_v").T).reshape(T, n_head_kv, D)
            k = rope(_rms(k, blk("attn_k_norm"), eps))
            if arch == "gemma4":
                v = _rms(v, None, eps)                                 # V-norm, no weight
            cache[il] = (k, v)
            src = il
        else:   # G4 §1.2: last non-shared layer of the same type
            src = max(j for j in range(first_shared) if pattern[j] == swa)
        K, V = cache[src]
        allowed = (idx[None, :] <= idx[:, None])
        if swa:
            allowed &= (idx[:, None] - idx[None, :]) < window          # G4 §2.5: i - j < W
        grp = n_head // n_head_kv
        o = np.empty((T, n_head, D))
        for h in range(n_head):
            s = (q[:, h, :] @ K[:, h // grp, :].T) * scale_attn(D)
            s = np.where(allowed, s, -np.inf)
            s = s - s.max(-1, keepdims=True)
            p = np.exp(s); p /= p.sum(-1, keepdims=True)
            o[:, h, :] = p @ V[:, h // grp, :]
        att = o.reshape(T, n_head * D) @ blk("attn_output").T
        taps[f"attn_out.{il}"] = att.copy()
        x = h_in + _rms(att, blk("post_attention_norm"), eps)
        m = _rms(x, blk("ffn_norm"), eps)
        f = (_gelu_tanh(m @ blk("ffn_gate").T) * (m @ blk("ffn_up").T)) @ blk("ffn_down").T
        taps[f"ffn_out.{il}"] = f.copy()
        if n_expert:
            f = _rms(f, blk("post_ffw_norm_1"), eps) + _rms(_spec_experts(W, il, x, n_used, eps, taps),
                                                          blk("post_ffw_norm_2"), eps)
        x = x + _rms(f, blk("post_ffw_norm"), eps)
        if ple_w:
            g = _gelu_tanh(x @ blk("inp_gate").T) * ple[:, il, :]
            x = x + _rms(g @ blk("proj").T, blk("post_norm"), eps)
        if f"blk.{il}.layer_output_scale.weight" in W:
            x = x * blk("layer_output_scale")[0]                      # whole stream
        taps[f"l_out.{il}"] = x.copy()
    y = _rms(x, W["output_norm.weight"], eps)
    taps["result_norm"] = y.copy()
    logits = y @ W.get("output.weight", E).T
    if softcap:
        logits = softcap * np.tanh(logits / softcap)
    return logits, taps


# ---------------------------------------------------------------------------------------
# Facts about transformers' implementation, asserted (they go into the manifest/README)
# ---------------------------------------------------------------------------------------
def check_facts_gemma4(model, ids, window: int) -> dict:
    import torch
    import transformers
    cfg = model.config
    inner = model.model
    facts = {"transformers_version": transformers.__version__}
    atts = [l.self_attn for l in inner.layers]
    assert all(a.scaling == 1.0 for a in atts)
    facts["attention_scaling"] = 1.0
    own = [a for a in atts if not a.is_kv_shared_layer]
    assert all(not a.v_norm.with_scale and not hasattr(a.v_norm, "weight") for a in own)
    facts["v_norm"] = "RMSNorm over head_dim without weight (with_scale=False), applied before caching"
    assert all(not hasattr(a, "k_proj") for a in atts if a.is_kv_shared_layer)
    k_eq_v = [not a.is_sliding and cfg.attention_k_eq_v for a in atts]
    assert all((a.v_proj is None) == kv for a, kv in zip(own, k_eq_v))
    facts["k_eq_v_layers"] = [i for i, kv in enumerate(k_eq_v) if kv]
    if any(k_eq_v):
        facts["k_eq_v"] = "global layers have no v_proj: V = v_norm(k_proj(x)), before k_norm and RoPE"
    modes = cfg.kv_sharing_modes
    store = {cfg.layer_types[i]: i for i, mde in enumerate(modes) if mde == "store"}
    src = [i if modes[i] != "reuse" else store[cfg.layer_types[i]] for i in range(len(modes))]
    facts["kv_sharing_modes"] = modes
    facts["kv_source"] = src
    # Mask boundary, measured: eager attention weights of a sliding layer are > 0 exactly
    # where 0 <= i - j < window.
    with torch.no_grad():
        out = model(torch.from_numpy(ids.astype(np.int64))[None], output_attentions=True, use_cache=False)
    T = len(ids)
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    for il, t in enumerate(cfg.layer_types):
        w = out.attentions[il][0].numpy()                  # [H, T, T]
        nz = (w > 0).all(0)
        want = (j <= i) & (((i - j) < window) if t == "sliding_attention" else True)
        assert np.array_equal(nz, want), f"layer {il} mask"
    facts["sliding_mask"] = f"key j visible from query i iff 0 <= i - j < sliding_window ({window}), measured"
    re = inner.rotary_emb
    hd_g = atts[[k for k, t in enumerate(cfg.layer_types) if t == "full_attention"][0]].head_dim
    rp = cfg.rope_parameters["full_attention"]
    n_rot = int(rp["partial_rotary_factor"] * hd_g // 2)
    want = np.zeros(hd_g // 2, np.float32)
    want[:n_rot] = 1.0 / (rp["rope_theta"] ** (np.arange(0, 2 * n_rot, 2, dtype=np.float32) / hd_g))
    got = re.full_attention_inv_freq.numpy()
    assert np.allclose(got, want, rtol=1e-6, atol=0), (got, want)
    facts["proportional_rope"] = (f"global inv_freq[i] = theta^(-2i/{hd_g}) for i < {n_rot} "
                                  f"(= int(p*hd//2)), 0 for the other {hd_g // 2 - n_rot}")
    es = inner.embed_tokens.embed_scale
    facts["embed_scale"] = float(es)
    facts["embed_scale_dtype_rule"] = "embed_scale buffer (float32 sqrt(hidden)) is cast to the weight dtype before the multiply"
    return facts


def check_facts_gemma3(model) -> dict:
    import transformers
    atts = [l.self_attn for l in model.model.layers]
    hd = model.config.head_dim
    assert all(abs(a.scaling - hd ** -0.5) < 1e-12 for a in atts)
    return {"transformers_version": transformers.__version__, "attention_scaling": hd ** -0.5,
            "norm": "Gemma3RMSNorm: x_hat * (1 + w); converter folds the +1"}


# ---------------------------------------------------------------------------------------
def build_one(spec: dict, out_dir: pathlib.Path, work: pathlib.Path) -> dict:
    import torch
    arch, mid = spec["arch"], spec["id"]
    print(f"== {mid}", file=sys.stderr)
    model0, config, opts = tiny.build_model(arch, seed=spec["seed"], **spec.get("options", {}))
    ckpt = tiny.save_model(model0, work / mid)
    model = load_hf(ckpt)
    # the reload must be bit-identical to what was generated (incl. layer_scalar buffers)
    s0, s1 = model0.state_dict(), model.state_dict()
    assert set(s0) == set(s1)
    for k in s0:
        assert torch.equal(s0[k], s1[k]), k
    hf_state = conv.read_safetensors(ckpt / "model.safetensors")
    # The tests rebuild the GGUFs from the seed with numpy alone (make_fixtures.py): the
    # saved checkpoint must hold exactly what draw_state gives for the recorded tensor list.
    hf_tensors = tiny.checkpoint_tensors(model0)
    drawn = tiny.draw_state(arch, spec["seed"], hf_tensors, opts)
    assert set(drawn) == set(hf_state), (sorted(set(drawn) ^ set(hf_state)))
    for k, arr in drawn.items():
        assert hf_state[k].dtype == arr.dtype and np.array_equal(hf_state[k], arr), k

    rng = np.random.default_rng(spec["prompt_seed"])
    ids = rng.integers(0, opts["vocab"], size=spec["n_tokens"]).astype(np.int64)
    ids[0] = 2   # <bos>
    entry = {
        "arch": arch, "seed": spec["seed"], "prompt_seed": spec["prompt_seed"],
        "token_ids": [int(t) for t in ids], "n_tokens": int(len(ids)), "n_vocab": int(opts["vocab"]),
        "options": opts, "hf_config": json.loads((ckpt / "config.json").read_text()),
        "hf_tensors": [[n, list(sh)] for n, sh in hf_tensors],
        "variants": {},
    }
    if spec.get("convert_options"):
        entry["convert_options"] = spec["convert_options"]
    entry["facts"] = (check_facts_gemma4(model, ids, opts["sliding_window"]) if arch == "gemma4"
                      else check_facts_gemma3(model))

    ref_f32 = None
    for ot in OUTTYPES:
        gpath = out_dir / f"{mid}.{ot}.gguf"
        summary = fixtures.write_gguf(mid, entry, ot, gpath, drawn)
        # the same bytes as converting the checkpoint transformers saved and reloaded
        conv.convert(ckpt, work / f"{mid}.{ot}.check.gguf", ot, name=mid, verbose=False,
                     **spec.get("convert_options", {}))
        assert sha256(gpath) == sha256(work / f"{mid}.{ot}.check.gguf"), f"{mid}.{ot}: converter paths differ"
        got_arch, deq = conv.gguf_to_hf_state_dict(gpath)
        assert got_arch == arch
        if ot == "f32":
            # f32 round trip: every tensor identical (Gemma 3 norms within 1 ulp of +1/-1)
            for k, v in hf_state.items():
                d = np.abs(deq[k] - v.reshape(deq[k].shape)).max()
                assert d == 0 or (arch == "gemma3" and "norm" in k and d < 1e-6), (k, d)
            logits, taps = run_hf(model, ids, taps=True)
            ref_f32 = logits
            write_taps(out_dir / f"{mid}.f32.taps.bin", taps)
        else:
            qmodel = hf_from_state(model.config, deq)
            logits = run_hf(qmodel, ids)
            with act_q8_0(qmodel):
                logits_aq = run_hf(qmodel, ids)
        lpath = out_dir / f"{mid}.{ot}.logits.f32"
        logits.astype("<f4").tofile(lpath)

        # spec cross-check from the GGUF alone
        sl, staps = spec_forward(gpath, ids)
        v = {
            "gguf": gpath.name, "gguf_bytes": gpath.stat().st_size, "gguf_sha256": sha256(gpath),
            "logits": lpath.name, "logits_shape": [int(len(ids)), int(opts["vocab"])],
            "logits_dtype": "float32-le", "logits_sha256": sha256(lpath),
            "reference": ("transformers on the original float32 weights" if ot == "f32" else
                          "transformers on weights dequantized from this GGUF"),
            "tensor_types": {k: v[0] for k, v in summary.items()},
            "spec_numpy_vs_transformers_nmse": nmse(sl, logits),
            "spec_numpy_vs_transformers_max_abs": float(np.abs(sl - logits).max()),
            "argmax_agreement_spec_numpy": float(np.mean(sl.argmax(-1) == logits.argmax(-1))),
        }
        assert v["spec_numpy_vs_transformers_nmse"] < 1e-9, v["spec_numpy_vs_transformers_nmse"]
        if ot == "f32":
            v["taps"] = f"{mid}.f32.taps.bin"
            v["taps_names"] = list(taps)
            v["taps_shapes"] = {k: list(t.shape) for k, t in taps.items()}
            v["taps_spec_numpy_vs_transformers_max_nmse"] = max(nmse(staps[k], taps[k]) for k in taps)
            assert v["taps_spec_numpy_vs_transformers_max_nmse"] < 1e-9
            # Suggested engine tolerance (f32 engine vs these logits).
            v["tolerance"] = {"nmse": 1e-6, "max_abs": 1e-2, "argmax_agreement_min": 0.98}
        else:
            qn = nmse(logits, ref_f32)
            an = nmse(logits_aq, logits)
            v["quantization_nmse_vs_f32_reference"] = qn
            v["activation_q8_0_nmse"] = an
            v["activation_q8_0_note"] = ("nmse of the same model when every Linear input is "
                                         "rounded to Q8_0 blocks (llama.cpp-style kernels)")
            # An engine comparing to these logits sees only its own error; allow generous
            # room for Q8_0 activation rounding, yet stay far below the quantization error.
            # The same rounding flips some greedy choices of a model with small top-2 gaps:
            # allow twice the flips it causes here (and never require more than 90%).
            aq_agree = float(np.mean(logits_aq.argmax(-1) == logits.argmax(-1)))
            v["activation_q8_0_argmax_agreement"] = aq_agree
            v["tolerance"] = {"nmse": float(max(1e-5, 5 * an)),
                              "argmax_agreement_min": float(min(0.9, 1 - 2 * (1 - aq_agree)))}
        margin = np.sort(logits, -1)
        v["min_top2_gap"] = float(np.min(margin[:, -1] - margin[:, -2]))
        entry["variants"][ot] = v
        print(f"   {ot}: {gpath.stat().st_size} B, spec-numpy nmse {v['spec_numpy_vs_transformers_nmse']:.2e}"
              + (f", quant nmse {v['quantization_nmse_vs_f32_reference']:.2e}, act-q8 nmse {v['activation_q8_0_nmse']:.2e}"
                 if ot != "f32" else ""), file=sys.stderr)
    return entry


def build_draft(spec: dict, out_dir: pathlib.Path, work: pathlib.Path) -> dict:
    """A DRAFTS entry: the f32 GGUF of a random model, rebuilt from the seed like the others."""
    arch, mid = spec["arch"], spec["id"]
    print(f"== {mid} (draft)", file=sys.stderr)
    model0, _, opts = tiny.build_model(arch, seed=spec["seed"], **spec["options"])
    ckpt = tiny.save_model(model0, work / mid)
    entry = {"arch": arch, "seed": spec["seed"], "n_vocab": int(opts["vocab"]), "options": opts,
             "hf_config": json.loads((ckpt / "config.json").read_text()),
             "hf_tensors": [[n, list(sh)] for n, sh in tiny.checkpoint_tensors(model0)], "variants": {}}
    gpath = out_dir / f"{mid}.f32.gguf"
    fixtures.write_gguf(mid, entry, "f32", gpath)
    conv.convert(ckpt, work / f"{mid}.check.gguf", "f32", name=mid, verbose=False)
    assert sha256(gpath) == sha256(work / f"{mid}.check.gguf"), f"{mid}: converter paths differ"
    entry["variants"]["f32"] = {"gguf": gpath.name, "gguf_bytes": gpath.stat().st_size, "gguf_sha256": sha256(gpath)}
    return entry


def rebuild_drafts(out: pathlib.Path) -> int:
    """--drafts-only: rewrite the manifest's "drafts" section, keep everything else."""
    manifest = json.loads((out / "manifest.json").read_text())
    with tempfile.TemporaryDirectory() as work:
        manifest["drafts"] = {d["id"]: build_draft(d, out, pathlib.Path(work)) for d in DRAFTS}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(ROOT / "tests" / "data" / "golden"))
    p.add_argument("--keep-hf", help="keep the generated HF checkpoints in this directory")
    p.add_argument("--only", action="append", metavar="ID",
                   help="rebuild only this model (repeatable); the manifest keeps the others' entries")
    p.add_argument("--drafts-only", action="store_true", help="rebuild only the draft models (DRAFTS)")
    a = p.parse_args(argv)
    import torch
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.drafts_only:
        return rebuild_drafts(out)
    ids = [m["id"] for m in MODELS]
    only = a.only or ids
    if set(only) - set(ids):
        p.error(f"unknown model id(s) {sorted(set(only) - set(ids))}; known: {ids}")
    kept, assistants = {}, None
    if a.only:
        old_manifest = json.loads((out / "manifest.json").read_text())
        kept = {k: v for k, v in old_manifest["models"].items() if k not in only}
        assistants = old_manifest.get("assistants")   # make_assistant_golden.py's entries
    for old in [f for f in out.iterdir() if f.is_file() and f.name.split(".")[0] in only]:
        old.unlink()
    if not a.only and (out / "manifest.json").exists():
        (out / "manifest.json").unlink()
    ctx = tempfile.TemporaryDirectory() if not a.keep_hf else contextlib.nullcontext(a.keep_hf)
    with ctx as work:
        work = pathlib.Path(work)
        built = {m["id"]: build_one(m, out, work) for m in MODELS if m["id"] in only}
        drafts = (json.loads((out / "manifest.json").read_text()).get("drafts", {}) if a.only
                  else {d["id"]: build_draft(d, out, work) for d in DRAFTS})
    models = {mid: built[mid] if mid in built else kept[mid] for mid in ids if mid in built or mid in kept}
    import transformers
    manifest = {
        "format_version": FORMAT_VERSION,
        "generator": "python/make_golden.py",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "gguf_py_version": getattr(gguf, "__version__", "0.19.0"),
        "attention": "eager, float32, use_cache=False, one sequence, positions 0..n_tokens-1",
        "logits_layout": "raw little-endian float32, row-major [n_tokens, n_vocab] (after final softcap if any)",
        "taps_layout": "SLTP v1: magic, u32 version, u32 n; per record u32 len, name, u32 ndim, u64 dims, f32 data",
        "taps_semantics": {
            "embd": "token embedding x sqrt(hidden) [T, d]",
            "ple": "Gemma 4 per-layer inputs (proj + tok) / sqrt(2) [T, n_layer, ple_width]",
            "attn_out.i": "o_proj output, before post_attention_norm [T, d]",
            "ffn_out.i": "down_proj output, before post_ffw_norm [T, d] (MoE layers: the dense MLP's, before post_ffw_norm_1)",
            "moe_experts.i": "MoE layers: the router's top-k expert ids, descending probability [T, k]",
            "moe_weights.i": "MoE layers: their weights, renormalised and times per_expert_scale [T, k]",
            "moe_out.i": "MoE layers: the experts' weighted sum, before post_ffw_norm_2 [T, d]",
            "l_out.i": "layer output after all residual adds and layer_output_scale [T, d]",
            "result_norm": "after output_norm [T, d]",
        },
        "models": models,
        "drafts": drafts,
    }
    if assistants:
        manifest["assistants"] = assistants
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    print(f"wrote {out} ({total / 1e6:.2f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
