#!/usr/bin/env python3
"""A tiny random Gemma 4 audio tower (+ projector) for golden tests: the E2B/E4B conformer
of docs/spec/gemma4.md §10 in miniature (2 layers of width 32, 2 heads, clipped linears whose
clamps bite), weights drawn with numpy only, so python/make_fixtures.py rebuilds its GGUF
without torch and make_audio_tower_golden.py runs transformers on the same weights.

What stays at the real values: 128 mel bins and 128 channels in the first subsampling stage
(transformers sizes the input projection as (channels[0] // 4) * channels[1], which is the
frequency width only when channels[0] is 128), the attention chunk of 12 with 12 past frames,
the depthwise kernel 5, the logit cap 50 (llama.cpp's GGUF carries none of these).
"""
from __future__ import annotations

import math

import numpy as np

import tiny_vision

PRESETS = {
    "e": dict(hidden=32, layers=2, heads=2, conv_channels=(128, 8), output_proj_dims=48, clipped=True,
              text_hidden=64),
    # The real E2B tower's shapes (random weights): python/audio_bench.py, never the tests.
    "e2b": dict(hidden=1024, layers=12, heads=8, conv_channels=(128, 32), output_proj_dims=1536, clipped=True,
                text_hidden=1536),
}
AUDIO = "model.audio_tower."
PROJ = "model.embed_audio.embedding_projection.weight"
CLAMPS = ("input_min", "input_max", "output_min", "output_max")
N_MEL = 128
CONV_KERNEL = 5


def hf_audio_config(opts: dict) -> dict:
    """The Gemma4AudioConfig fields (a config.json `audio_config`)."""
    return dict(hidden_size=opts["hidden"], num_hidden_layers=opts["layers"], num_attention_heads=opts["heads"],
                hidden_act="silu", subsampling_conv_channels=list(opts["conv_channels"]),
                conv_kernel_size=CONV_KERNEL, residual_weight=0.5, attention_chunk_size=12,
                attention_context_left=13, attention_context_right=0, attention_logit_cap=50.0,
                attention_invalid_logits_value=-1.0e9, use_clipped_linears=opts["clipped"], rms_norm_eps=1e-6,
                gradient_clipping=1e10, output_proj_dims=opts["output_proj_dims"], model_type="gemma4_audio")


def tensor_shapes(opts: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Every HF tensor of the tower and projector: (name, shape), as Gemma4AudioModel and
    Gemma4MultimodalEmbedder hold them (make_audio_tower_golden.py checks it against their state dicts)."""
    d, h = opts["hidden"], opts["heads"]
    c0, c1 = opts["conv_channels"]
    hd = d // h
    s = AUDIO + "subsample_conv_projection."
    out = [(s + "layer0.conv.weight", (c0, 1, 3, 3)), (s + "layer0.norm.weight", (c0,)),
           (s + "layer1.conv.weight", (c1, c0, 3, 3)), (s + "layer1.norm.weight", (c1,)),
           (s + "input_proj_linear.weight", (d, (c0 // 4) * c1)),
           (AUDIO + "output_proj.weight", (opts["output_proj_dims"], d)),
           (AUDIO + "output_proj.bias", (opts["output_proj_dims"],)),
           (PROJ, (opts["text_hidden"], opts["output_proj_dims"]))]
    for i in range(opts["layers"]):
        p = f"{AUDIO}layers.{i}."
        lin = {"feed_forward1.ffw_layer_1": (4 * d, d), "feed_forward1.ffw_layer_2": (d, 4 * d),
               "feed_forward2.ffw_layer_1": (4 * d, d), "feed_forward2.ffw_layer_2": (d, 4 * d),
               "self_attn.q_proj": (d, d), "self_attn.k_proj": (d, d), "self_attn.v_proj": (d, d),
               "self_attn.post": (d, d), "lconv1d.linear_start": (2 * d, d), "lconv1d.linear_end": (d, d)}
        for name, shape in lin.items():
            out.append((p + name + ".linear.weight", shape))
            if opts["clipped"]:
                out += [(p + name + "." + c, ()) for c in CLAMPS]
        out += [(p + "self_attn.relative_k_proj.weight", (d, d)), (p + "self_attn.per_dim_scale", (hd,)),
                (p + "lconv1d.depthwise_conv1d.weight", (d, 1, CONV_KERNEL))]
        out += [(p + n + ".weight", (d,)) for n in (
            "feed_forward1.pre_layer_norm", "feed_forward1.post_layer_norm", "feed_forward2.pre_layer_norm",
            "feed_forward2.post_layer_norm", "lconv1d.pre_layer_norm", "lconv1d.conv_norm", "norm_pre_attn",
            "norm_post_attn", "norm_out")]
    return out


def _init(name: str, shape, rng) -> np.ndarray:
    """One tensor's random value: tiny_vision's rules (linear weights N(0, 1/in), norms
    N(1, 0.35), clamps at ~±1.5-2.5 so that a few percent of the values are clipped) and,
    for what only the audio tower has: convolutions N(0, 1/fan_in), per_dim_scale around 0
    (softplus ~0.7), the output projection's bias N(0, 0.5)."""
    def normal(mean, std):
        return np.asarray(rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean))

    if name.endswith("per_dim_scale") or name.endswith("output_proj.bias"):
        return normal(0.0, 0.5)
    if len(shape) in (3, 4):
        return normal(0.0, 1.0 / math.sqrt(int(np.prod(shape[1:]))))
    return tiny_vision._init(name, shape, rng)


def draw_state(seed: int, opts: dict) -> dict[str, np.ndarray]:
    """{HF name: float32 array}, drawn in sorted-name order from numpy.random.default_rng(seed)."""
    rng = np.random.default_rng(seed)
    return {name: _init(name, shape, rng) for name, shape in sorted(tensor_shapes(opts))}
