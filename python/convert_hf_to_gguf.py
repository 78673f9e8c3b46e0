#!/usr/bin/env python3
"""Convert a Hugging Face Gemma 4 / Gemma 3 text checkpoint directory to GGUF, with
llama.cpp's tensor names, shapes and metadata keys (the contract sluice's loader reads).

    python python/convert_hf_to_gguf.py CHECKPOINT_DIR OUT.gguf --outtype q8_0

Inputs: config.json plus model.safetensors (or sharded *.safetensors). Accepts the text-only
classes (Gemma4ForCausalLM / Gemma3ForCausalLM, tensors under `model.`) and the multimodal
ones (`model.language_model.` / `language_model.model.`; vision/audio tensors are skipped).
Needs only numpy and the PyPI `gguf` package (safetensors is parsed here), so it runs in
the main .venv as well as in .venv-golden.

Spec references: docs/spec/gemma4.md (§ numbers "G4 §x"), gemma3.md ("G3 §x"),
gguf.md §7 (dimension order), quants.md (Q8_0/Q4_0). Every mapping decision below cites
the section it follows.

--outtype: f32 | f16 | bf16 | q8_0 | q4_0. It applies to 2-D weight matrices (the token
embedding and the PLE table included, as llama.cpp's converter does). 1-D tensors (norms,
`layer_output_scale`, `rope_freqs`) are always F32 (G4 §3.3 "Tensor dtypes"). For q8_0/q4_0
a matrix whose row length (ne0, the input dim) is not a multiple of 32 falls back to F16,
as llama.cpp's converter does; the fallback is reported on stderr.

KV-shared layers (Gemma 4): by default no attn_k / attn_v / attn_k_norm tensors are written
for layers >= n_layer - shared_kv_layers (G4 §3.3 marks them optional; transformers >= 5
does not even create them). --keep-shared-kv writes them when the checkpoint has them
(Google's original checkpoints do; real llama.cpp files carry them, unused).

The tokenizer section is a self-describing stand-in (dummy vocabulary sized to the
embedding: <pad> <eos> <bos> <unk> <mask>, 256 byte tokens, printable ASCII, a few BPE
merges, <unusedN> fillers); real tokenizers are converted elsewhere.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
from dataclasses import dataclass, field

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

OUTTYPES = {
    "f32": (QT.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (QT.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (QT.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
}

# ---------------------------------------------------------------------------------------
# safetensors (parsed with numpy; format: u64 header size, JSON header, raw data)
# ---------------------------------------------------------------------------------------
_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64,
              "I64": np.int64, "I32": np.int32, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path) -> dict[str, np.ndarray]:
    """All tensors of one .safetensors file as numpy arrays (BF16 widened to float32)."""
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a: base + b]
        shape = tuple(info["shape"])
        if info["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<"))
        out[name] = arr.reshape(shape).copy()
    return out


def text_config(cfg: dict) -> dict:
    """The text model's config from a config.json dict (multimodal files nest it under
    `text_config`; architectures and tie_word_embeddings may sit at the top level)."""
    text_cfg = dict(cfg.get("text_config") or cfg)
    if "architectures" not in text_cfg and "architectures" in cfg:
        text_cfg["architectures"] = cfg["architectures"]
    if "tie_word_embeddings" not in text_cfg and "tie_word_embeddings" in cfg:
        text_cfg["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    return text_cfg


def text_tensors(raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{name without `model.`/`language_model.` prefix: array}; `lm_head.weight` keeps its
    name; vision/audio/projector tensors are dropped."""
    tensors: dict[str, np.ndarray] = {}
    for name, arr in raw.items():
        if any(s in name for s in ("vision_tower", "audio_tower", "embed_vision", "embed_audio",
                                   "multi_modal_projector", "multimodal_projector")):
            continue
        for prefix in ("model.language_model.", "language_model.model.", "language_model.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        tensors[name] = arr
    return tensors


def load_checkpoint(model_dir) -> tuple[dict, dict[str, np.ndarray]]:
    """(text config dict, text tensors) of a checkpoint directory."""
    d = pathlib.Path(model_dir)
    cfg = json.loads((d / "config.json").read_text())
    files = sorted(d.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {d}")
    raw: dict[str, np.ndarray] = {}
    for f in files:
        raw.update(read_safetensors(f))
    if is_assistant_config(cfg):
        return cfg, raw   # convert_assistant_state reads the top-level keys
    return text_config(cfg), text_tensors(raw)


# ---------------------------------------------------------------------------------------
# Name mapping (G4 §3.3 "Mapping from HF names"; G3 §3.3 table)
# ---------------------------------------------------------------------------------------
GLOBAL_NAMES = {
    "embed_tokens.weight": "token_embd.weight",
    "embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
    "per_layer_model_projection.weight": "per_layer_model_proj.weight",
    "per_layer_projection_norm.weight": "per_layer_proj_norm.weight",
    "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "per_layer_input_gate.weight": "inp_gate.weight",
    "per_layer_projection.weight": "proj.weight",
    "post_per_layer_input_norm.weight": "post_norm.weight",
    # HF buffer `layer_scalar` [1] -> `layer_output_scale.weight` [1] (G4 §3.3; llama.cpp
    # appends ".weight" in Gemma4Model.filter_tensors).
    "layer_scalar": "layer_output_scale.weight",
    # Mixture of experts (26B-A4B, G4 §2.9; llama.cpp conversion/gemma.py): the router's
    # projection, its input scale and the per-expert output scale (stored with the down
    # experts), the experts as 3-D tensors (HF [E, out, in] -> ne [in, out, E]; gate rows
    # before up rows in gate_up), and the three extra norms.
    "router.proj.weight": "ffn_gate_inp.weight",
    "router.scale": "ffn_gate_inp.scale",
    "router.per_expert_scale": "ffn_down_exps.scale",
    "experts.gate_up_proj": "ffn_gate_up_exps.weight",
    "experts.down_proj": "ffn_down_exps.weight",
    "pre_feedforward_layernorm_2.weight": "pre_ffw_norm_2.weight",
    "post_feedforward_layernorm_1.weight": "post_ffw_norm_1.weight",
    "post_feedforward_layernorm_2.weight": "post_ffw_norm_2.weight",
}
# --split-experts: gate_up written as llama.cpp's split pair (G4 §3.3), halves of each expert.
SPLIT_GATE_UP = ("ffn_gate_exps.weight", "ffn_up_exps.weight")
_LAYER_RE = re.compile(r"^layers\.(\d+)\.(.+)$")
_BLK_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


def hf_to_gguf_name(name: str) -> str | None:
    if name in GLOBAL_NAMES:
        return GLOBAL_NAMES[name]
    m = _LAYER_RE.match(name)
    if m and m.group(2) in LAYER_NAMES:
        return f"blk.{m.group(1)}.{LAYER_NAMES[m.group(2)]}"
    return None


def gguf_to_hf_name(name: str) -> str | None:
    """Inverse of hf_to_gguf_name, with the `model.` prefix of *ForCausalLM state dicts
    (`output.weight` -> `lm_head.weight`). None for generated tensors (rope_freqs)."""
    inv_g = {v: k for k, v in GLOBAL_NAMES.items()}
    if name in inv_g:
        hf = inv_g[name]
        return hf if hf == "lm_head.weight" else "model." + hf
    m = _BLK_RE.match(name)
    if m:
        inv_l = {v: k for k, v in LAYER_NAMES.items()}
        if m.group(2) in SPLIT_GATE_UP:
            return f"model.layers.{m.group(1)}.experts.gate_up_proj"
        if m.group(2) in inv_l:
            return f"model.layers.{m.group(1)}.{inv_l[m.group(2)]}"
    return None


# ---------------------------------------------------------------------------------------
# Hyper-parameters
# ---------------------------------------------------------------------------------------
@dataclass
class Hparams:
    arch: str                      # "gemma4" | "gemma3"
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_vocab: int
    n_ctx: int
    eps: float
    layer_types: list[str]
    sliding_window: int
    head_dim: int                  # Gemma 4: sliding layers; Gemma 3: all layers
    head_dim_global: int           # Gemma 4 global_head_dim (== head_dim for Gemma 3)
    n_ff: list[int]                # per layer
    rope_theta: float              # global (full_attention) layers
    rope_theta_swa: float
    final_softcap: float | None
    tied: bool
    # Gemma 4 only
    n_head_kv_layer: list[int] = field(default_factory=list)   # per layer (26B/31B global layers differ)
    n_expert: int = 0              # MoE (G4 §2.9): experts, used per token, expert FFN width
    n_expert_used: int = 0
    n_ff_exp: int = 0
    shared_kv_layers: int = 0
    ple_width: int = 0
    rope_full_type: str = "default"
    partial_rotary_factor: float = 1.0
    rope_full_factor: float = 1.0
    # Gemma 3 only
    rope_scaling_type: str | None = None
    rope_scaling_factor: float | None = None
    notes: list[str] = field(default_factory=list)

    def is_swa(self, il: int) -> bool:
        return self.layer_types[il] == "sliding_attention"

    def hd(self, il: int) -> int:
        return self.head_dim if self.is_swa(il) else self.head_dim_global

    @property
    def first_shared(self) -> int:
        return self.n_layer - self.shared_kv_layers

    def kv_source(self, il: int) -> int:
        """G4 §1.2: a layer >= first_shared reads the KV of the last non-shared layer of its
        own type (transformers `kv_sharing_modes`: the 'store' layer per type)."""
        if il < self.first_shared:
            return il
        for j in range(self.first_shared - 1, -1, -1):
            if self.layer_types[j] == self.layer_types[il]:
                return j
        raise ValueError(f"layer {il}: no non-shared layer of type {self.layer_types[il]}")


def _default_layer_types(n_layer: int, arch: str, period: int = 6) -> list[str]:
    t = ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(n_layer)]
    if arch == "gemma4":
        t[-1] = "full_attention"   # transformers Gemma4TextConfig forces the last layer full
    return t


def _rope_params(cfg: dict) -> dict:
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict) and ("full_attention" in rp or "sliding_attention" in rp):
        return rp
    # older flat configs: rope_theta (+ rope_scaling) for global, rope_local_base_freq for sliding
    full = {"rope_type": "default", "rope_theta": cfg.get("rope_theta", 1_000_000.0)}
    if cfg.get("rope_scaling"):
        full.update(cfg["rope_scaling"])
        full["rope_type"] = full.get("rope_type") or full.get("type", "default")
    return {"full_attention": full,
            "sliding_attention": {"rope_type": "default",
                                  "rope_theta": cfg.get("rope_local_base_freq", 10_000.0)}}


def detect_arch(cfg: dict) -> str:
    mt = str(cfg.get("model_type", ""))
    archs = " ".join(cfg.get("architectures") or [])
    if mt.startswith("gemma4") or "Gemma4" in archs:
        return "gemma4"
    if mt.startswith("gemma3") or "Gemma3" in archs:
        if mt.startswith("gemma3n") or "Gemma3n" in archs:
            raise ValueError("Gemma 3n is not supported")
        return "gemma3"
    raise ValueError(f"not a Gemma 3/4 config (model_type={mt!r}, architectures={archs!r})")


def _write_size_keys(w, hp, outtype: str, name: str):
    """general.* and the first architecture keys (G4 §3.2 / G3 §3.1): layers, context, width."""
    w.add_name(name)
    w.add_file_type(OUTTYPES[outtype][1])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_block_count(hp.n_layer)
    w.add_context_length(hp.n_ctx)
    w.add_embedding_length(hp.n_embd)


def _write_ff_and_attention_keys(w, hp, ff_array: bool):
    """FFN width, heads, epsilon, RoPE bases and the window. ff_array (Gemma 4, G4 §3.2):
    arr[i32, n_layer] when widths differ (double-wide MLP), like llama.cpp; else a u32
    scalar (G3 §3.1; G4 §3.2 note)."""
    if ff_array and len(set(hp.n_ff)) > 1:
        w.add_feed_forward_length([int(x) for x in hp.n_ff])
    else:
        w.add_feed_forward_length(int(hp.n_ff[0]))
    w.add_head_count(hp.n_head)
    if hp.n_head_kv_layer and len(set(hp.n_head_kv_layer)) > 1:
        w.add_head_count_kv([int(x) for x in hp.n_head_kv_layer])   # per layer (G4 §3.2)
    else:
        w.add_head_count_kv(hp.n_head_kv)
    w.add_layer_norm_rms_eps(hp.eps)
    w.add_rope_freq_base(hp.rope_theta)               # global (full-attention) layers
    w.add_rope_freq_base_swa(hp.rope_theta_swa)       # sliding layers (G4 §3.2; G3 §3.1 "newer converters")
    w.add_sliding_window(hp.sliding_window)


def _write_gemma4_head_keys(w, hp, swa_pattern: list[bool], shared_kv_layers: int):
    # G4 §3.2 / pitfall 5: key_length is the GLOBAL head dim, key_length_swa the sliding one.
    w.add_key_length(hp.head_dim_global)
    w.add_value_length(hp.head_dim_global)
    w.add_key_length_swa(hp.head_dim)
    w.add_value_length_swa(hp.head_dim)
    # G4 §3.2: dimension_count = full global head (partiality lives in rope_freqs).
    w.add_rope_dimension_count(hp.head_dim_global)
    w.add_rope_dimension_count_swa(hp.head_dim)
    w.add_sliding_window_pattern(swa_pattern)          # arr[bool], true = sliding
    w.add_shared_kv_layers(shared_kv_layers)


def _rope_freqs(hp):
    """Gemma 4 rope_freqs.weight (None: not needed). G4 §2.1 / §3.3 (llama.cpp
    Gemma4Model.generate_extra_tensors): global layers rotate over the full head
    (dimension_count = hd_global) with per-frequency DIVISORS: the first int(p*hd/2) pairs get
    the rope "factor" (1.0 for E2B, transformers divides inv_freq by it), the rest 1e30
    (theta/1e30 ~ 0: unrotated). transformers' count is int(partial_rotary_factor * head_dim // 2)."""
    if hp.rope_full_type != "proportional" or "full_attention" not in hp.layer_types:
        return None
    n_rot = int(hp.partial_rotary_factor * hp.head_dim_global // 2)
    n_half = hp.head_dim_global // 2
    return np.array([hp.rope_full_factor] * n_rot + [1e30] * (n_half - n_rot), dtype=np.float32)


def _finish(w, log, message: str):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    log(message)


def read_hparams(cfg: dict, tensors: dict[str, np.ndarray]) -> Hparams:
    """Hyper-parameters from config.json, cross-checked against the tensor shapes."""
    arch = detect_arch(cfg)
    n_layer = cfg["num_hidden_layers"]
    n_embd = cfg["hidden_size"]
    n_head = cfg["num_attention_heads"]
    n_head_kv = cfg.get("num_key_value_heads", n_head)
    head_dim = cfg.get("head_dim", 256)
    layer_types = list(cfg.get("layer_types") or _default_layer_types(
        n_layer, arch, cfg.get("sliding_window_pattern", 6)))
    if arch == "gemma4" and layer_types[-1] != "full_attention":
        layer_types[-1] = "full_attention"   # transformers does the same (with a warning)
    rp = _rope_params(cfg)
    full, swa = rp.get("full_attention", {}), rp.get("sliding_attention", {})
    emb = tensors["embed_tokens.weight"]
    tied = cfg.get("tie_word_embeddings", True) or "lm_head.weight" not in tensors
    # Fields both architectures read the same way.
    common = dict(
        arch=arch, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
        n_vocab=emb.shape[0], n_ctx=cfg.get("max_position_embeddings", 131072),
        eps=cfg.get("rms_norm_eps", 1e-6), layer_types=layer_types, head_dim=head_dim,
        n_ff=[tensors[f"layers.{il}.mlp.gate_proj.weight"].shape[0] for il in range(n_layer)],
        rope_theta=float(full.get("rope_theta", 1_000_000.0)),
        rope_theta_swa=float(swa.get("rope_theta", 10_000.0)),
        final_softcap=cfg.get("final_logit_softcapping") or None, tied=tied,
    )

    if arch == "gemma4":
        # attention_k_eq_v (31B/26B): global layers have no v_proj, so no attn_v is written;
        # a reader takes V from the K projection where a global layer has no attn_v.
        if cfg.get("use_bidirectional_attention"):
            raise NotImplementedError("use_bidirectional_attention")
        # global head dim: the released config.json has `global_head_dim`; transformers >= 5
        # serializes it as per_layer_config {layer: {"head_dim": ...}} instead; default 512.
        hdg = cfg.get("global_head_dim")
        if hdg is None:
            plc = cfg.get("per_layer_config") or {}
            for il, t in enumerate(layer_types):
                e = plc.get(str(il)) or plc.get(il)
                if t == "full_attention" and isinstance(e, dict) and "head_dim" in e:
                    hdg = e["head_dim"]
                    break
        hdg = hdg or 512
        shared = cfg.get("num_kv_shared_layers", 0) or 0
        ple = n_layer and (tensors["embed_tokens_per_layer.weight"].shape[1] // n_layer
                           if "embed_tokens_per_layer.weight" in tensors else 0)
        if "embed_tokens_per_layer.weight" in tensors and cfg.get("hidden_size_per_layer_input") not in (None, ple):
            raise ValueError(f"PLE width mismatch: config {cfg.get('hidden_size_per_layer_input')} vs tensor {ple}")
        if swa.get("rope_type", "default") != "default":
            raise NotImplementedError(f"sliding rope_type {swa.get('rope_type')}")
        moe = {}
        if cfg.get("enable_moe_block"):
            moe = dict(n_expert=int(cfg["num_experts"]), n_expert_used=int(cfg["top_k_experts"]),
                       n_ff_exp=int(cfg["moe_intermediate_size"]))
        hp = Hparams(
            **common, **moe, sliding_window=cfg.get("sliding_window", 512), head_dim_global=hdg,
            shared_kv_layers=shared, ple_width=ple,
            rope_full_type=full.get("rope_type", "default"),
            partial_rotary_factor=float(full.get("partial_rotary_factor", 1.0)),
            rope_full_factor=float(full.get("factor", 1.0) or 1.0),
        )
        if hp.rope_full_type not in ("default", "proportional"):
            raise NotImplementedError(f"full-attention rope_type {hp.rope_full_type}")
        # double-wide MLP (G4 §1.1): shared layers have 2x intermediate_size.
        inter = cfg.get("intermediate_size")
        dw = cfg.get("use_double_wide_mlp", False)
        for il in range(n_layer):
            want = inter * (2 if dw and il >= hp.first_shared else 1)
            if inter is not None and hp.n_ff[il] != want:
                raise ValueError(f"layer {il}: ffn width {hp.n_ff[il]} != expected {want}")
        for il in range(hp.first_shared, n_layer):
            hp.kv_source(il)   # raises if a type has no source
    else:
        if cfg.get("attn_logit_softcapping") is not None:
            raise ValueError("Gemma 3 has no attention softcap (llama.cpp asserts it is absent)")
        qpas = cfg.get("query_pre_attn_scalar", head_dim)
        # G3 §1.2: llama.cpp's scale is 1/sqrt(head_dim), except n_layer == 62 (27B) where
        # it is 1/sqrt(n_embd/n_head). GGUF has no key for anything else.
        if qpas != head_dim and not (n_layer == 62 and qpas == n_embd // n_head):
            raise ValueError(f"query_pre_attn_scalar={qpas} cannot be expressed in GGUF "
                             f"(llama.cpp uses head_dim={head_dim})")
        rs_type, rs_factor = None, None
        if full.get("rope_type", "default") == "linear":
            rs_type, rs_factor = "linear", float(full["factor"])
        elif full.get("rope_type", "default") != "default":
            raise NotImplementedError(f"Gemma 3 global rope_type {full.get('rope_type')}")
        hp = Hparams(
            **common, sliding_window=cfg.get("sliding_window", 4096), head_dim_global=head_dim,
            rope_scaling_type=rs_type, rope_scaling_factor=rs_factor,
        )
        if len(set(hp.n_ff)) != 1:
            raise ValueError("Gemma 3 with per-layer FFN widths")
    # Per-layer KV heads: transformers >= 5 keeps the global layers' count (26B/31B,
    # num_global_key_value_heads) in per_layer_config.
    plc = cfg.get("per_layer_config") or {}
    hp.n_head_kv_layer = [int((plc.get(str(il)) or plc.get(il) or {}).get("num_key_value_heads", n_head_kv))
                          for il in range(n_layer)]
    # Shape checks against the spec tables (G4 §3.3 / G3 §3.3, HF order [out, in]).
    for il in range(n_layer):
        q = tensors[f"layers.{il}.self_attn.q_proj.weight"]
        if q.shape != (n_head * hp.hd(il), n_embd):
            raise ValueError(f"layer {il}: q_proj {q.shape} != ({n_head}*{hp.hd(il)}, {n_embd})")
        k = tensors.get(f"layers.{il}.self_attn.k_proj.weight")
        kvh = hp.n_head_kv_layer[il]
        if k is not None and k.shape != (kvh * hp.hd(il), n_embd):
            raise ValueError(f"layer {il}: k_proj {k.shape} != ({kvh}*{hp.hd(il)}, {n_embd})")
        gu = tensors.get(f"layers.{il}.experts.gate_up_proj")
        if hp.n_expert and (gu is None or gu.shape != (hp.n_expert, 2 * hp.n_ff_exp, n_embd)):
            raise ValueError(f"layer {il}: experts.gate_up_proj {None if gu is None else gu.shape} != "
                             f"({hp.n_expert}, 2*{hp.n_ff_exp}, {n_embd})")
    return hp


# ---------------------------------------------------------------------------------------
# Dummy tokenizer (self-describing stand-in; G4 §4.1 / G3 §4 key names)
# ---------------------------------------------------------------------------------------
_BIGRAMS = ("th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as "
            "ou io le ve co me de hi ri ro ic ne ea ra ce").split()
_TRIGRAMS = [("▁t", "he"), ("▁a", "nd"), ("▁o", "f"), ("▁i", "n"), ("▁t", "o"), ("▁i", "s"),
             ("▁i", "t"), ("i", "ng"), ("▁o", "n"), ("▁a", "t"), ("▁h", "e"), ("e", "nt")]


def dummy_vocab(n_vocab: int):
    """tokens, scores, token types, merges: <pad> <eos> <bos> <unk> <mask> (ids 0..4, the
    Gemma ids of G4 §4.3), then <0x00>..<0xFF> byte tokens, '▁' and printable ASCII, merged
    tokens with their BPE merges (rank order), then <unusedN> fillers up to n_vocab."""
    T = gguf.TokenType
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    types = [T.CONTROL, T.CONTROL, T.CONTROL, T.UNKNOWN, T.CONTROL]
    scores = [-1000.0] * 5
    merges: list[str] = []
    if n_vocab < len(tokens):
        raise ValueError("vocab too small")

    def room(k):
        return len(tokens) + k <= n_vocab

    if room(256 + 95):
        for b in range(256):
            tokens.append(f"<0x{b:02X}>"); types.append(T.BYTE); scores.append(0.0)
        for ch in ["▁"] + [chr(c) for c in range(0x21, 0x7F)]:
            tokens.append(ch); types.append(T.NORMAL); scores.append(-1.0)
        pairs = [("▁", chr(c)) for c in range(ord("a"), ord("z") + 1)]
        pairs += [(bg[0], bg[1]) for bg in _BIGRAMS] + _TRIGRAMS
        for a, b in pairs:
            if not room(1):
                break
            if a + b in tokens:
                continue
            merges.append(f"{a} {b}")
            tokens.append(a + b); types.append(T.NORMAL)
            scores.append(-2.0 - len(merges))   # SPM-style: earlier merge = higher score
    k = 0
    while len(tokens) < n_vocab:
        tokens.append(f"<unused{k}>"); types.append(T.UNUSED); scores.append(-1000.0); k += 1
    assert len(set(tokens)) == len(tokens) == n_vocab
    return tokens, scores, [int(t) for t in types], merges


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------
def _encode(name: str, arr: np.ndarray, outtype: str, log) -> tuple[np.ndarray, QT]:
    """Choose the GGUF type of one tensor and encode it. Returns (data, type)."""
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    # G4 §3.3 "Tensor dtypes": norms, layer_output_scale and rope_freqs are F32; all 1-D
    # tensors stay F32 whatever the outtype (llama.cpp does the same).
    if arr.ndim == 1:
        return arr, QT.F32
    qt = OUTTYPES[outtype][0]
    if qt == QT.F32:
        return arr, QT.F32
    if qt == QT.F16:
        return arr.astype(np.float16), QT.F16
    if qt in (QT.Q8_0, QT.Q4_0) and arr.shape[-1] % 32 != 0:
        # quants.md §2: blocks of 32 run along ne0 (the row); llama.cpp's converter falls
        # back to F16 for rows that do not split into blocks.
        log(f"  {name}: row length {arr.shape[-1]} % 32 != 0 -> F16 instead of {outtype}")
        return arr.astype(np.float16), QT.F16
    return gguf.quants.quantize(arr, qt), qt   # uint8 [rows, row_bytes]; BF16 too


def convert(model_dir, out_path, outtype: str = "f32", keep_shared_kv: bool = False,
            name: str | None = None, verbose: bool = True, split_experts: bool = False) -> dict:
    """Convert one checkpoint directory. Returns a summary {tensor name: (ggml type name, ne)}."""
    cfg, tensors = load_checkpoint(model_dir)
    return convert_state(cfg, tensors, out_path, outtype, keep_shared_kv=keep_shared_kv,
                         name=name or pathlib.Path(model_dir).name, verbose=verbose,
                         split_experts=split_experts)


def convert_state(cfg: dict, tensors: dict[str, np.ndarray], out_path, outtype: str = "f32",
                  keep_shared_kv: bool = False, name: str = "model", verbose: bool = True,
                  split_experts: bool = False) -> dict:
    """Convert a checkpoint held in memory: `cfg` a config.json dict, `tensors` HF state
    (with or without the `model.` prefixes). Same bytes as convert() on the saved files."""
    def log(msg):
        if verbose:
            print(msg, file=sys.stderr)

    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {sorted(OUTTYPES)}")
    if is_assistant_config(cfg):
        return convert_assistant_state(cfg, tensors, out_path, outtype, name=name, log=log)
    cfg, tensors = text_config(cfg), text_tensors(tensors)
    hp = read_hparams(cfg, tensors)
    arch = hp.arch
    w = gguf.GGUFWriter(str(out_path), arch)   # writes general.architecture (G4 §3.1 / G3 §3.1)

    _write_size_keys(w, hp, outtype, name)
    _write_ff_and_attention_keys(w, hp, ff_array=arch == "gemma4")
    if hp.final_softcap:
        w.add_final_logit_softcapping(float(hp.final_softcap))   # absent = no softcap
    swa_pattern = [hp.is_swa(il) for il in range(hp.n_layer)]
    if arch == "gemma4":
        _write_gemma4_head_keys(w, hp, swa_pattern, hp.shared_kv_layers)
        w.add_embedding_length_per_layer_input(hp.ple_width)   # 0 = no PLE
        if hp.n_expert:   # G4 §2.9 / §3.2
            w.add_expert_count(hp.n_expert)
            w.add_expert_used_count(hp.n_expert_used)
            w.add_expert_feed_forward_length(hp.n_ff_exp)
    else:
        w.add_key_length(hp.head_dim)
        w.add_value_length(hp.head_dim)
        # G3 §3.2: llama.cpp hard-codes "sliding iff il % 6 < 5"; real files carry no
        # pattern key. Write the bool array only when the layout differs from that.
        if swa_pattern != [il % 6 < 5 for il in range(hp.n_layer)]:
            w.add_sliding_window_pattern(swa_pattern)
            hp.notes.append("non-default Gemma 3 layer pattern written as sliding_window_pattern")
        if hp.rope_scaling_type == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)   # global layers only (G3 §3.2)
            w.add_rope_scaling_factor(hp.rope_scaling_factor)

    # ---- tokenizer (G4 §4.1; G3 §4: SPM "llama") ----
    tokens, scores, types, merges = dummy_vocab(hp.n_vocab)
    w.add_tokenizer_model("gemma4" if arch == "gemma4" else "llama")
    if arch == "gemma4":
        w.add_tokenizer_pre("gemma4")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    if arch == "gemma4" and merges:
        w.add_token_merges(merges)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    if arch == "gemma4":
        w.add_mask_token_id(4)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)

    # ---- tensors ----
    summary: dict[str, tuple[str, list[int]]] = {}

    def put(gname: str, arr: np.ndarray):
        data, qt = _encode(gname, arr, outtype, log)
        if qt in (QT.F32, QT.F16):
            w.add_tensor(gname, data)
        else:
            w.add_tensor(gname, data, raw_dtype=qt)
        summary[gname] = (qt.name, list(reversed(arr.shape)))   # ne order (gguf.md §7)

    def norm(hf_name: str) -> np.ndarray:
        a = tensors[hf_name].astype(np.float32)
        # G3 §3.4: Gemma3RMSNorm multiplies by (1 + w); llama.cpp's converter folds the +1
        # (in f32) into every tensor whose name ends in "norm.weight" (the four layer
        # norms, q_norm, k_norm, final norm). G4 §3.3: no shift for Gemma 4.
        return a + np.float32(1.0) if arch == "gemma3" else a

    used = set()

    def take(hf_name: str) -> np.ndarray:
        used.add(hf_name)
        return tensors[hf_name]

    # Global tensors. numpy arrays are in HF order [out, in]; gguf-py writes ne reversed,
    # so a Linear weight lands as ne = [in, out] and an embedding as [n_embd, n_vocab]
    # (gguf.md §7; G4 §3.3 shapes).
    put("token_embd.weight", take("embed_tokens.weight"))
    if arch == "gemma4" and hp.ple_width:
        # [vocab, L*P] -> ne [L*P, vocab]; row t = 35 (here n_layer) consecutive P-slices.
        put("per_layer_token_embd.weight", take("embed_tokens_per_layer.weight"))
        # [L*P, n_embd] -> ne [n_embd, L*P]; output rows l*P.. belong to layer l.
        put("per_layer_model_proj.weight", take("per_layer_model_projection.weight"))
        used.add("per_layer_projection_norm.weight")
        put("per_layer_proj_norm.weight", norm("per_layer_projection_norm.weight"))
    if arch == "gemma4" and (vals := _rope_freqs(hp)) is not None:
        put("rope_freqs.weight", vals)
    used.add("norm.weight")
    put("output_norm.weight", norm("norm.weight"))
    if not hp.tied:
        put("output.weight", take("lm_head.weight"))   # optional; absent = tied (G4 §3.3)
    elif "lm_head.weight" in tensors:
        used.add("lm_head.weight")
        if not np.array_equal(tensors["lm_head.weight"], tensors["embed_tokens.weight"]):
            raise ValueError("tie_word_embeddings is set but lm_head differs from embed_tokens")

    # Per-layer tensors, in the order of the spec table (G4 §3.3 / G3 §3.3).
    for il in range(hp.n_layer):
        shared = arch == "gemma4" and il >= hp.first_shared
        for hf_leaf, g_leaf in LAYER_NAMES.items():
            hf = f"layers.{il}.{hf_leaf}"
            if hf not in tensors:
                continue
            if shared and hf_leaf in ("self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                      "self_attn.k_norm.weight"):
                used.add(hf)
                if not keep_shared_kv:
                    continue   # G4 §1.2 / pitfall 6: shared layers never use their own K/V
            gname = f"blk.{il}.{g_leaf}"
            if hf_leaf.endswith("norm.weight"):
                used.add(hf)
                put(gname, norm(hf))
            elif hf_leaf == "layer_scalar":
                put(gname, take(hf).reshape(1).astype(np.float32))   # [1] F32
            elif hf_leaf == "experts.gate_up_proj" and split_experts:
                gu = take(hf)                                       # [E, 2f, d]: gate rows, then up
                put(f"blk.{il}.{SPLIT_GATE_UP[0]}", gu[:, :hp.n_ff_exp, :])
                put(f"blk.{il}.{SPLIT_GATE_UP[1]}", gu[:, hp.n_ff_exp:, :])
            else:
                put(gname, take(hf))
    # Anything left is a tensor we do not understand: refuse rather than drop it silently.
    leftover = sorted(set(tensors) - used - {k for k in tensors if k.endswith("v_norm.weight")})
    if leftover:
        raise ValueError(f"unmapped checkpoint tensors: {leftover[:8]}{' ...' if len(leftover) > 8 else ''}")

    _finish(w, log, f"wrote {out_path}: {arch}, {len(summary)} tensors, outtype {outtype}")
    return summary


# ---------------------------------------------------------------------------------------
# Gemma 4 assistant (MTP drafter, G4 §5): arch "gemma4-assistant"
# ---------------------------------------------------------------------------------------
ASSISTANT_ARCH = "gemma4-assistant"
# G4 §5: the centroid head's shape; llama.cpp has no keys for them (it computes every logit),
# so these are sluice's names; readers default the count to the centroid tensor's rows and
# top-k to 32 (E2B) when a file lacks them.
KEY_CENTROID_COUNT = "centroid_count"
KEY_CENTROID_TOP_K = "centroid_top_k"
ASSISTANT_GLOBAL_NAMES = {
    "pre_projection.weight": "nextn.pre_projection.weight",
    "post_projection.weight": "nextn.post_projection.weight",
    "masked_embedding.centroids.weight": "masked_embd_centroids.weight",
    "masked_embedding.token_ordering": "masked_embd_ordering",
}


def is_assistant_config(cfg: dict) -> bool:
    return (str(cfg.get("model_type", "")) == "gemma4_assistant"
            or any("Gemma4Assistant" in a for a in cfg.get("architectures") or []))


def convert_assistant_state(cfg: dict, tensors: dict[str, np.ndarray], out_path, outtype: str,
                            name: str, log) -> dict:
    """HF Gemma4AssistantForCausalLM -> GGUF (G4 §5): llama.cpp's keys and tensor names, the
    Gemma 4 layer keys of its text config, and the centroid head's shape under
    KEY_CENTROID_COUNT / KEY_CENTROID_TOP_K."""
    tcfg = dict(cfg["text_config"])
    tcfg.setdefault("tie_word_embeddings", True)
    tensors = text_tensors(tensors)
    if tcfg.get("num_kv_shared_layers") not in (None, 0, tcfg["num_hidden_layers"]):
        raise ValueError("an assistant has every layer KV-shared (it reads the target's K/V)")
    tcfg["num_kv_shared_layers"] = 0   # no layer of its own to share from: skip those checks
    hp = read_hparams(tcfg, tensors)
    if hp.ple_width:
        raise ValueError("an assistant has no per-layer embeddings")
    backbone = int(cfg["backbone_hidden_size"])
    w = gguf.GGUFWriter(str(out_path), ASSISTANT_ARCH)
    _write_size_keys(w, hp, outtype, name)
    w.add_uint32(f"{ASSISTANT_ARCH}.embedding_length_out", backbone)
    w.add_uint32(f"{ASSISTANT_ARCH}.nextn_predict_layers", hp.n_layer)
    _write_ff_and_attention_keys(w, hp, ff_array=True)
    _write_gemma4_head_keys(w, hp, [hp.is_swa(il) for il in range(hp.n_layer)], hp.n_layer)
    ordered = bool(cfg.get("use_ordered_embeddings"))
    if ordered:
        w.add_uint32(f"{ASSISTANT_ARCH}.{KEY_CENTROID_COUNT}", int(cfg["num_centroids"]))
        w.add_uint32(f"{ASSISTANT_ARCH}.{KEY_CENTROID_TOP_K}", int(cfg["centroid_intermediate_top_k"]))
    summary: dict[str, tuple[str, list[int]]] = {}

    def put(gname: str, arr: np.ndarray):
        if arr.dtype.kind in "iu":
            data, qt = np.ascontiguousarray(arr, dtype=np.int32), QT.I32
            w.add_tensor(gname, data)
        else:
            data, qt = _encode(gname, arr, outtype, log)
            w.add_tensor(gname, data, raw_dtype=None if qt in (QT.F32, QT.F16) else qt)
        summary[gname] = (qt.name, list(reversed(arr.shape)))

    put("token_embd.weight", tensors["embed_tokens.weight"])   # also the output (tied)
    put("output_norm.weight", tensors["norm.weight"].astype(np.float32))
    used = {"embed_tokens.weight", "norm.weight", "lm_head.weight"}
    for hf, g in ASSISTANT_GLOBAL_NAMES.items():
        if hf in tensors:
            put(g, tensors[hf])
            used.add(hf)
    if ordered and "masked_embedding.centroids.weight" not in tensors:
        raise ValueError("use_ordered_embeddings is set but the checkpoint has no centroids")
    if (vals := _rope_freqs(hp)) is not None:
        put("rope_freqs.weight", vals)
    for il in range(hp.n_layer):
        for hf_leaf, g_leaf in LAYER_NAMES.items():
            hf = f"layers.{il}.{hf_leaf}"
            if hf not in tensors:
                continue
            used.add(hf)
            a = tensors[hf]
            put(f"blk.{il}.{g_leaf}", a.reshape(1).astype(np.float32) if hf_leaf == "layer_scalar" else a)
    leftover = sorted(set(tensors) - used)
    if leftover:
        raise ValueError(f"unmapped assistant tensors: {leftover[:8]}")
    _finish(w, log, f"wrote {out_path}: {ASSISTANT_ARCH}, {len(summary)} tensors, outtype {outtype}")
    return summary


# ---------------------------------------------------------------------------------------
# Reading back (used by make_golden.py for the "dequantized reference" and by tests)
# ---------------------------------------------------------------------------------------
def gguf_to_hf_state_dict(gguf_path) -> tuple[str, dict[str, np.ndarray]]:
    """(arch, {HF *ForCausalLM state-dict name: float32 array in HF shape}) from a GGUF
    written by this converter: quantized tensors dequantized with gguf.quants.dequantize,
    the Gemma 3 norm +1 undone, `rope_freqs` dropped (transformers derives it)."""
    r = gguf.GGUFReader(str(gguf_path))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    out = {}
    split = {}   # split expert gate/up halves, fused back below
    for t in r.tensors:
        hf = gguf_to_hf_name(t.name)
        if hf is None:
            if t.name == "rope_freqs.weight":
                continue
            raise ValueError(f"unknown GGUF tensor {t.name}")
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        a = a.reshape(tuple(int(x) for x in reversed(t.shape)))   # ne -> numpy order
        if arch == "gemma3" and hf.endswith("norm.weight"):
            a = a - np.float32(1.0)
        if hf.endswith("layer_scalar"):
            a = a.reshape(1)
        if t.name.endswith(SPLIT_GATE_UP):
            split.setdefault(hf, {})[t.name.endswith(SPLIT_GATE_UP[1])] = a
            continue
        out[hf] = a
    for hf, halves in split.items():
        out[hf] = np.concatenate([halves[False], halves[True]], axis=1)   # [E, f|f, d]
    return arch, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_dir")
    p.add_argument("out")
    p.add_argument("--outtype", default="f32", choices=sorted(OUTTYPES))
    p.add_argument("--keep-shared-kv", action="store_true",
                   help="also write attn_k/attn_v/attn_k_norm of KV-shared layers if the checkpoint has them")
    p.add_argument("--name", help="general.name (default: the directory name)")
    p.add_argument("--split-experts", action="store_true",
                   help="MoE: write ffn_gate_exps + ffn_up_exps instead of the fused ffn_gate_up_exps")
    p.add_argument("--mmproj", metavar="OUT",
                   help="also write the vision tower + projector (and the audio tower + projector, when the "
                        "checkpoint has one) of a Gemma 4 checkpoint as an mmproj GGUF "
                        "(llama.cpp's gemma4v / gemma4a layout; outtype f32, f16 or q8_0: python/convert_vision_mmproj.py)")
    p.add_argument("-q", "--quiet", action="store_true")
    a = p.parse_args(argv)
    convert(a.model_dir, a.out, a.outtype, keep_shared_kv=a.keep_shared_kv, name=a.name,
            verbose=not a.quiet, split_experts=a.split_experts)
    if a.mmproj:
        convert_mmproj(a.model_dir, a.mmproj, a.outtype, name=a.name, verbose=not a.quiet)
    return 0


def convert_mmproj(model_dir, out_path, outtype: str = "f32", name: str | None = None, verbose: bool = True) -> dict:
    """The mmproj GGUF of a multimodal Gemma 4 checkpoint directory (config.json with
    vision_config and text_config, *.safetensors); with an audio_config (E2B/E4B) the audio
    tower and its projector go into the same file (llama.cpp's gemma4a layout)."""
    import convert_vision_mmproj as cv
    model_dir = pathlib.Path(model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    if not cfg.get("vision_config"):
        raise SystemExit(f"{model_dir}: config.json has no vision_config (not a multimodal checkpoint)")
    raw = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        raw.update(read_safetensors(f))
    return cv.convert_vision_state(cfg["vision_config"], int(text_config(cfg)["hidden_size"]), raw, out_path,
                                   outtype, name=(name or model_dir.name) + "-mmproj", verbose=verbose,
                                   audio_config=cfg.get("audio_config"))


if __name__ == "__main__":
    sys.exit(main())
