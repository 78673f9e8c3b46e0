#!/usr/bin/env python3
"""Write a Gemma 4 vision tower + projector as an mmproj GGUF the way llama.cpp's converter
does (`Gemma4VisionAudioModel`, docs/spec/gemma4.md §9.5): `general.architecture = clip`,
`clip.vision.projector_type = gemma4v`, `v.*` tensors, `mm.input_projection.weight`, clamp
scalars as 1-element F32 tensors, the patch projection as a [16, 16, 3, d] kernel and the
position table always F32. numpy + gguf only; python/convert_hf_to_gguf.py --mmproj calls it.
"""
from __future__ import annotations

import sys

import numpy as np

import gguf

QT = gguf.GGMLQuantizationType
VISION = "model.vision_tower."
PROJ = "model.embed_vision.embedding_projection.weight"
_LINEARS = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_out", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down"}
_NORMS = {"input_layernorm": "ln1", "post_attention_layernorm": "attn_post_norm",
          "pre_feedforward_layernorm": "ln2", "post_feedforward_layernorm": "ffn_post_norm",
          "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}


def gguf_name(hf: str) -> str | None:
    """The mmproj name of one HF tensor (None: not part of the vision path)."""
    if hf == PROJ:
        return "mm.input_projection.weight"
    if not hf.startswith(VISION):
        return None
    n = hf[len(VISION):]
    fixed = {"patch_embedder.input_proj.weight": "v.patch_embd.weight",
             "patch_embedder.position_embedding_table": "v.position_embd.weight",
             "std_bias": "v.std_bias", "std_scale": "v.std_scale"}
    if n in fixed:
        return fixed[n]
    parts = n.split(".")
    if parts[:2] != ["encoder", "layers"]:
        return None
    bid, rest = parts[2], ".".join(parts[3:])
    if rest == "layer_scalar":
        return f"v.blk.{bid}.out_scale.weight"
    return block_tensor_name("v", bid, rest, _LINEARS, _NORMS)


def block_tensor_name(prefix: str, bid: str, rest: str, linears: dict, norms: dict) -> str | None:
    """`<prefix>.blk.<bid>.<short>…` for a layer tensor `rest` of the HF name: a clippable
    linear's weight (`<module>.linear.weight`) or clamp scalar (`<module>.input_min` …), or a
    norm's weight; `linears` and `norms` map HF modules to llama.cpp's short names."""
    for hf_mod, short in linears.items():
        if rest == hf_mod + ".linear.weight":
            return f"{prefix}.blk.{bid}.{short}.weight"
        for c in ("input_min", "input_max", "output_min", "output_max"):
            if rest == f"{hf_mod}.{c}":
                return f"{prefix}.blk.{bid}.{short}.{c}"
    for hf_mod, short in norms.items():
        if rest == hf_mod + ".weight":
            return f"{prefix}.blk.{bid}.{short}.weight"
    return None


def _encode(gname: str, arr: np.ndarray, outtype: str):
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if arr.ndim <= 1 or gname == "v.position_embd.weight" or outtype == "f32":
        return arr, QT.F32
    if outtype == "f16" or gname == "v.patch_embd.weight" or arr.shape[-1] % 32 != 0:
        return arr.astype(np.float16), QT.F16
    if outtype == "q8_0":
        return gguf.quants.quantize(arr, QT.Q8_0), QT.Q8_0
    raise ValueError(f"outtype must be f32, f16 or q8_0, not {outtype}")


def _prepare(gname: str, arr: np.ndarray) -> np.ndarray:
    if gname == "v.patch_embd.weight":   # [d, 768] ([py][px][c]) -> [d, 3, 16, 16]
        p = int(round((arr.shape[1] // 3) ** 0.5))
        return arr.reshape(arr.shape[0], p, p, 3).transpose(0, 3, 1, 2)
    return arr


def add_tensors(w, tensors: dict, name_of, prepare, encode, outtype: str, verbose: bool, required) -> dict:
    """Adds every HF tensor that `name_of` names to GGUFWriter `w`: float32, scalars as 1-D
    (the clamps), reshaped by `prepare(gguf name, array)`, stored as `encode(name, array,
    outtype)` says. Raises unless all `required` names were written. Returns {gguf name:
    (type name, GGUF shape)}."""
    summary = {}
    for hf in sorted(tensors):
        gname = name_of(hf)
        if gname is None:
            continue
        arr = np.asarray(tensors[hf], dtype=np.float32)
        if arr.ndim == 0:
            arr = arr.reshape(1)   # clamp scalars -> 1-D
        arr = prepare(gname, arr)
        data, qt = encode(gname, arr, outtype)
        w.add_tensor(gname, data, raw_dtype=qt if qt != QT.F32 else None)
        summary[gname] = (qt.name, list(reversed(arr.shape)))
        if verbose:
            print(f"  {hf} -> {gname} {qt.name} {list(reversed(arr.shape))}", file=sys.stderr)
    for need in required:
        if need not in summary:
            raise ValueError(f"the checkpoint has no tensor for {need}")
    return summary


def convert_vision_state(vcfg: dict, text_hidden: int, tensors: dict[str, np.ndarray], out_path,
                         outtype: str = "f32", name: str = "mmproj", verbose: bool = True,
                         audio_config: dict | None = None, audio_outtype: str | None = None) -> dict:
    """Write the mmproj GGUF of one checkpoint's vision tower. `vcfg` is its `vision_config`,
    `tensors` its HF state (full names, `model.vision_tower.*` and the projector). With
    `audio_config` (E2B/E4B), the audio tower goes into the same file, as llama.cpp writes it
    (python/convert_audio_mmproj.py), in `audio_outtype` (default: `outtype`; llama.cpp
    recommends BF16 for the audio tower). Returns {gguf name: (type name, shape)}."""
    d, heads = int(vcfg["hidden_size"]), int(vcfg["num_attention_heads"])
    head_dim = int(vcfg.get("head_dim") or d // heads)
    if head_dim * heads != d:
        raise ValueError(f"head_dim {head_dim} x {heads} heads != width {d}: llama.cpp derives head_dim = d / heads")
    w = gguf.GGUFWriter(str(out_path), "clip")
    w.add_name(name)
    w.add_file_type({"f32": 0, "f16": 1, "q8_0": 7}[outtype])
    w.add_bool(gguf.Keys.Clip.HAS_VISION_ENCODER, True)
    w.add_string(gguf.Keys.ClipVision.PROJECTOR_TYPE, "gemma4v")
    w.add_uint32(gguf.Keys.ClipVision.IMAGE_SIZE, 224)   # a dummy, as llama.cpp writes it
    w.add_uint32(gguf.Keys.ClipVision.PATCH_SIZE, int(vcfg.get("patch_size", 16)))
    w.add_uint32(gguf.Keys.ClipVision.EMBEDDING_LENGTH, d)
    w.add_uint32(gguf.Keys.ClipVision.FEED_FORWARD_LENGTH, int(vcfg["intermediate_size"]))
    w.add_uint32(gguf.Keys.ClipVision.PROJECTION_DIM, int(text_hidden))
    w.add_uint32(gguf.Keys.ClipVision.BLOCK_COUNT, int(vcfg["num_hidden_layers"]))
    w.add_uint32(gguf.Keys.ClipVision.Attention.HEAD_COUNT, heads)
    w.add_float32(gguf.Keys.ClipVision.Attention.LAYERNORM_EPS, float(vcfg.get("rms_norm_eps", 1e-6)))
    w.add_array(gguf.Keys.ClipVision.IMAGE_MEAN, [0.0, 0.0, 0.0])
    w.add_array(gguf.Keys.ClipVision.IMAGE_STD, [1.0, 1.0, 1.0])
    summary = add_tensors(w, tensors, gguf_name, _prepare, _encode, outtype, verbose,
                          ("v.patch_embd.weight", "v.position_embd.weight", "mm.input_projection.weight"))
    if audio_config:
        import convert_audio_mmproj
        summary.update(convert_audio_mmproj.add_audio(w, audio_config, text_hidden, tensors,
                                                      audio_outtype or outtype, verbose))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return summary
