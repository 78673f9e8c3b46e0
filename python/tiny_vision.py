#!/usr/bin/env python3
"""Tiny random Gemma 4 vision towers (+ projector) for golden tests: the two shapes of
docs/spec/gemma4.md §9.1 in miniature, weights drawn with numpy only (so python/make_fixtures.py
rebuilds their GGUFs without torch, and make_vision_golden.py runs transformers on the same
weights).

  e      E2B/E4B-shaped: clipped linears (finite clamps that bite), no standardisation
  large  26B/31B-shaped: no clamps, std_bias/std_scale, head_dim not a power of two
"""
from __future__ import annotations

import math

import numpy as np

PRESETS = {
    "e": dict(hidden=48, layers=2, heads=3, head_dim=16, intermediate=96, clipped=True,
              standardize=False, position_embedding_size=64, text_hidden=64),
    "large": dict(hidden=40, layers=2, heads=2, head_dim=20, intermediate=72, clipped=False,
                  standardize=True, position_embedding_size=64, text_hidden=64),
    # The real E2B/E4B tower's shapes (random weights): python/make_e2b_mmproj.py, never the tests.
    "e2b": dict(hidden=768, layers=16, heads=12, head_dim=64, intermediate=3072, clipped=True,
                standardize=False, position_embedding_size=10240, text_hidden=1536),
}
VISION = "model.vision_tower."
PROJ = "model.embed_vision.embedding_projection.weight"
CLAMPS = ("input_min", "input_max", "output_min", "output_max")


def hf_vision_config(opts: dict) -> dict:
    """The Gemma4VisionConfig fields (a config.json `vision_config`)."""
    return dict(hidden_size=opts["hidden"], intermediate_size=opts["intermediate"],
                num_hidden_layers=opts["layers"], num_attention_heads=opts["heads"],
                num_key_value_heads=opts["heads"], head_dim=opts["head_dim"],
                hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                rope_parameters={"rope_theta": 100.0, "rope_type": "axial"}, pooling_kernel_size=3,
                patch_size=16, position_embedding_size=opts["position_embedding_size"],
                use_clipped_linears=opts["clipped"], standardize=opts["standardize"],
                model_type="gemma4_vision")


def tensor_shapes(opts: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Every HF tensor of the tower and projector: (name, shape), as Gemma4VisionModel and
    Gemma4MultimodalEmbedder hold them (make_vision_golden.py checks it against their state dicts)."""
    d, hd, h, ff = opts["hidden"], opts["head_dim"], opts["heads"], opts["intermediate"]
    out = [(VISION + "patch_embedder.input_proj.weight", (d, 768)),
           (VISION + "patch_embedder.position_embedding_table", (2, opts["position_embedding_size"], d)),
           (PROJ, (opts["text_hidden"], d))]
    if opts["standardize"]:
        out += [(VISION + "std_bias", (d,)), (VISION + "std_scale", (d,))]
    for i in range(opts["layers"]):
        p = f"{VISION}encoder.layers.{i}."
        lin = {"self_attn.q_proj": (h * hd, d), "self_attn.k_proj": (h * hd, d), "self_attn.v_proj": (h * hd, d),
               "self_attn.o_proj": (d, h * hd), "mlp.gate_proj": (ff, d), "mlp.up_proj": (ff, d),
               "mlp.down_proj": (d, ff)}
        for name, shape in lin.items():
            out.append((p + name + ".linear.weight", shape))
            if opts["clipped"]:
                out += [(p + name + "." + c, ()) for c in CLAMPS]
        out += [(p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
        out += [(p + n + ".weight", (d,)) for n in ("input_layernorm", "post_attention_layernorm",
                                                   "pre_feedforward_layernorm", "post_feedforward_layernorm")]
    return out


def _init(name: str, shape, rng) -> np.ndarray:
    """One tensor's random value. Linear weights N(0, 1/in) keep pre-activations ~N(0, 1);
    the clamps sit at ~±1.5-2.5 on the inputs and outputs, so a few percent of the values are
    clipped (each bound matters); q/k norms as in the text fixtures (attention scale is 1)."""
    def normal(mean, std):
        return np.asarray(rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean))

    def uniform(lo, hi):
        return np.asarray(rng.random(shape, dtype=np.float32) * np.float32(hi - lo) + np.float32(lo))

    leaf = name.split(".")[-1]
    if leaf in ("input_min", "output_min"):
        return uniform(-2.5, -1.5)
    if leaf in ("input_max", "output_max"):
        return uniform(1.5, 2.5)
    if leaf == "position_embedding_table":
        return normal(0.0, 0.5)
    if leaf == "std_bias":
        return normal(0.0, 1.0)
    if leaf == "std_scale":
        return uniform(0.5, 1.5)
    if name.endswith("q_norm.weight"):
        return normal(1.0, 0.3)
    if name.endswith("k_norm.weight"):
        return normal(0.35, 0.1)
    if len(shape) == 1:
        return normal(1.0, 0.35)
    if len(shape) == 2:
        return normal(0.0, 1.0 / math.sqrt(shape[1]))
    raise ValueError(f"no init rule for {name} {shape}")


def draw_state(seed: int, opts: dict) -> dict[str, np.ndarray]:
    """{HF name: float32 array}, drawn in sorted-name order from numpy.random.default_rng(seed)."""
    rng = np.random.default_rng(seed)
    return {name: _init(name, shape, rng) for name, shape in sorted(tensor_shapes(opts))}
