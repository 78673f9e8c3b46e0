#!/usr/bin/env python3
"""Write a Gemma 4 audio tower + projector into an mmproj GGUF the way llama.cpp's converter
does (`Gemma4VisionAudioModel`, docs/spec/gemma4.md §10.7): `clip.audio.projector_type =
gemma4a`, `a.*` tensors and `mm.a.input_projection.weight`, softplus applied to per_dim_scale,
the depthwise kernel as [d, 5], clamp scalars as 1-element F32 tensors, the convolutions F32.

llama.cpp's tensor map swaps two names: lconv1d.pre_layer_norm (the norm BEFORE the
light conv's first linear) is written as `a.blk.N.conv_norm`, and lconv1d.conv_norm (the norm
AFTER the depthwise conv) as `a.blk.N.norm_conv`; its loader reads them back swapped. We write
the same names so that files are interchangeable. numpy + gguf only.
"""
from __future__ import annotations

import sys

import numpy as np

import gguf
from convert_vision_mmproj import add_tensors, block_tensor_name

QT = gguf.GGMLQuantizationType
AUDIO = "model.audio_tower."
PROJ = "model.embed_audio.embedding_projection.weight"
_LINEARS = {"feed_forward1.ffw_layer_1": "ffn_up", "feed_forward1.ffw_layer_2": "ffn_down",
            "feed_forward2.ffw_layer_1": "ffn_up_1", "feed_forward2.ffw_layer_2": "ffn_down_1",
            "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.post": "attn_out", "lconv1d.linear_start": "conv_pw1", "lconv1d.linear_end": "conv_pw2"}
_NORMS = {"feed_forward1.pre_layer_norm": "ffn_norm", "feed_forward1.post_layer_norm": "ffn_post_norm",
          "feed_forward2.pre_layer_norm": "ffn_norm_1", "feed_forward2.post_layer_norm": "ffn_post_norm_1",
          "lconv1d.pre_layer_norm": "conv_norm", "lconv1d.conv_norm": "norm_conv",   # swapped, as llama.cpp
          "norm_pre_attn": "attn_pre_norm", "norm_post_attn": "attn_post_norm", "norm_out": "ln2"}
_FIXED = {"subsample_conv_projection.layer0.conv.weight": "a.conv1d.0.weight",
          "subsample_conv_projection.layer0.norm.weight": "a.conv1d.0.norm.weight",
          "subsample_conv_projection.layer1.conv.weight": "a.conv1d.1.weight",
          "subsample_conv_projection.layer1.norm.weight": "a.conv1d.1.norm.weight",
          "subsample_conv_projection.input_proj_linear.weight": "a.input_projection.weight",
          "output_proj.weight": "a.pre_encode.out.weight", "output_proj.bias": "a.pre_encode.out.bias"}
# Always F32 (llama.cpp forces the convolutions; the position-free tower has no tables).
_F32 = ("a.conv1d.", ".conv_dw.")


def gguf_name(hf: str) -> str | None:
    """The mmproj name of one HF tensor (None: not part of the audio path)."""
    if hf == PROJ:
        return "mm.a.input_projection.weight"
    if not hf.startswith(AUDIO):
        return None
    n = hf[len(AUDIO):]
    if n in _FIXED:
        return _FIXED[n]
    parts = n.split(".")
    if parts[0] != "layers":
        return None
    bid, rest = parts[1], ".".join(parts[2:])
    name = block_tensor_name("a", bid, rest, _LINEARS, _NORMS)
    if name:
        return name
    other = {"self_attn.relative_k_proj.weight": "attn_k_rel.weight", "self_attn.per_dim_scale": "per_dim_scale.weight",
             "lconv1d.depthwise_conv1d.weight": "conv_dw.weight"}
    return f"a.blk.{bid}.{other[rest]}" if rest in other else None


def _softplus(x: np.ndarray) -> np.ndarray:
    """float32 softplus as torch computes it (threshold 20: x itself above it)."""
    x = np.asarray(x, dtype=np.float32)
    return np.where(x > 20, x, np.log1p(np.exp(x.astype(np.float64)))).astype(np.float32)


def _prepare(gname: str, arr: np.ndarray) -> np.ndarray:
    if gname.endswith(".per_dim_scale.weight"):
        return _softplus(arr)
    if gname.endswith(".conv_dw.weight"):   # [d, 1, k] -> [d, k]
        return arr.reshape(arr.shape[0], arr.shape[2])
    return arr


def _encode(gname: str, arr: np.ndarray, outtype: str):
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if arr.ndim <= 1 or outtype == "f32" or any(s in gname for s in _F32):
        return arr, QT.F32
    if outtype == "f16" or arr.shape[-1] % 32 != 0:
        return arr.astype(np.float16), QT.F16
    if outtype == "bf16":
        return gguf.quants.quantize(arr, QT.BF16), QT.BF16
    if outtype == "q8_0":
        return gguf.quants.quantize(arr, QT.Q8_0), QT.Q8_0
    raise ValueError(f"outtype must be f32, f16, bf16 or q8_0, not {outtype}")


def add_audio(w, acfg: dict, text_hidden: int, tensors: dict[str, np.ndarray], outtype: str = "f32",
              verbose: bool = True) -> dict:
    """Adds the audio keys and tensors of one checkpoint to GGUFWriter `w` (an mmproj being
    written; the caller writes it out). `acfg` is its `audio_config`, `tensors` its HF state
    (full names). Returns {gguf name: (type name, shape)}."""
    d, heads = int(acfg["hidden_size"]), int(acfg["num_attention_heads"])
    if d % heads != 0:
        raise ValueError(f"audio width {d} is not a multiple of {heads} heads")
    w.add_bool(gguf.Keys.Clip.HAS_AUDIO_ENCODER, True)
    w.add_string(gguf.Keys.ClipAudio.PROJECTOR_TYPE, "gemma4a")
    w.add_uint32(gguf.Keys.ClipAudio.NUM_MEL_BINS, int(acfg.get("input_feat_size", 128)))
    w.add_uint32(gguf.Keys.ClipAudio.EMBEDDING_LENGTH, d)
    w.add_uint32(gguf.Keys.ClipAudio.FEED_FORWARD_LENGTH, 4 * d)
    w.add_uint32(gguf.Keys.ClipAudio.PROJECTION_DIM, int(text_hidden))
    w.add_uint32(gguf.Keys.ClipAudio.BLOCK_COUNT, int(acfg["num_hidden_layers"]))
    w.add_uint32(gguf.Keys.ClipAudio.Attention.HEAD_COUNT, heads)
    w.add_float32(gguf.Keys.ClipAudio.Attention.LAYERNORM_EPS, float(acfg.get("rms_norm_eps", 1e-6)))
    return add_tensors(w, tensors, gguf_name, _prepare, _encode, outtype, verbose,
                       ("a.conv1d.0.weight", "a.input_projection.weight", "a.pre_encode.out.weight",
                        "mm.a.input_projection.weight"))


def convert_audio_state(acfg: dict, text_hidden: int, tensors: dict[str, np.ndarray], out_path,
                        outtype: str = "f32", name: str = "mmproj", verbose: bool = True) -> dict:
    """An audio-only mmproj GGUF (llama.cpp writes audio and vision into one file for a
    checkpoint that has both: python/convert_hf_to_gguf.py --mmproj does that)."""
    w = gguf.GGUFWriter(str(out_path), "clip")
    w.add_name(name)
    w.add_file_type({"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}[outtype])
    w.add_bool(gguf.Keys.Clip.HAS_VISION_ENCODER, False)
    summary = add_audio(w, acfg, text_hidden, tensors, outtype, verbose)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return summary
