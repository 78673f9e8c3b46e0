#!/usr/bin/env python3
"""Write a tiny, fully random Hugging Face Gemma 4 / Gemma 3 checkpoint (config.json +
model.safetensors, no tokenizer) for golden tests.

    .venv-golden/bin/python python/make_tiny_model.py --arch gemma4 --out /tmp/tiny-gemma4
    .venv-golden/bin/python python/make_tiny_model.py --arch gemma3 --out /tmp/tiny-gemma3 --layers 6

Every parameter and every persistent buffer is drawn from a seeded numpy generator: all RMSNorm
weights (Gemma 4 uses w as is, Gemma 3 stores w and uses 1+w), q/k norms, the per-layer
`layer_scalar` buffers, the PLE tables, untied LM head if asked. Magnitudes are chosen so
that activations stay in a sane range in float32 and every feature changes the logits
(see `_init_tensor`). Non-persistent buffers (rotary inv_freq, embed_scale) are derived
from the config by transformers itself and are not part of the checkpoint.

Building the HF model needs torch + transformers (the .venv-golden environment,
python/requirements-golden.txt); the weights themselves (draw_state) need numpy only.
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys

import numpy as np

# Presets. gemma4: E2B structure in miniature (spec gemma4.md §1.1/§1.2): [S,S,S,S,F]x2,
# the last 5 layers KV-shared so layer 3 (sliding) and layer 4 (global) are the KV sources
# (same "first_shared-2 / first_shared-1" layout as E2B, so llama.cpp's shortcut holds too),
# double-wide MLP on the shared layers, sliding head_dim 32 != global 64, 8 q heads : 2 kv
# heads (4:1 GQA with two KV groups), PLE width 32, proportional RoPE 0.25 on global layers,
# softcap 30, window 16 (a 64-token prompt crosses it 4x).
# gemma3: gemma-3-270m in miniature (spec gemma3.md §1.1): period-6 pattern (globals 5, 11),
# head_dim 32 != hidden/heads (16), 4 q heads : 2 kv heads, window 16, no softcap.
PRESETS = {
    "gemma4": dict(
        layers=10, hidden=64, intermediate=128, heads=8, kv_heads=2,
        head_dim=32, global_head_dim=64, sliding_window=16,
        layer_pattern="SSSSF", kv_shared_layers=5, ple_width=32, vocab=512,
        double_wide_mlp=True, final_softcap=30.0, rope_theta=1_000_000.0,
        rope_theta_swa=10_000.0, partial_rotary_factor=0.25, tie_embeddings=True,
        max_position=2048, rope_scaling_factor=None, attention_k_eq_v=False,
        moe_experts=0, moe_top_k=0, moe_intermediate=0, global_kv_heads=None,
    ),
    # gemma4_assistant: the Gemma 4 assistant (MTP drafter, spec gemma4.md §5) of the tiny gemma4
    # above, E2B's assistant in miniature: 4 Q-only layers [S,S,S,F] reading the target's K/V
    # (so head dims, KV heads, window and RoPE are the target's), its own width 32, backbone
    # width = the target's 64, a centroid head of 16 clusters of 32 tokens, top 4 (128 candidates).
    "gemma4_assistant": dict(
        layers=4, hidden=32, intermediate=64, heads=4, kv_heads=2,
        head_dim=32, global_head_dim=64, sliding_window=16, layer_pattern="SSSF", vocab=512,
        rope_theta=1_000_000.0, rope_theta_swa=10_000.0, partial_rotary_factor=0.25,
        max_position=2048, rope_scaling_factor=None, backbone_hidden=64, centroids=16,
        centroid_top_k=4, ordered_embeddings=True,
    ),
    "gemma3": dict(
        layers=12, hidden=64, intermediate=128, heads=4, kv_heads=2,
        head_dim=32, global_head_dim=None, sliding_window=16,
        layer_pattern="SSSSSF", kv_shared_layers=0, ple_width=0, vocab=512,
        double_wide_mlp=False, final_softcap=None, rope_theta=1_000_000.0,
        rope_theta_swa=10_000.0, partial_rotary_factor=None, tie_embeddings=True,
        max_position=2048, rope_scaling_factor=None,
    ),
}


def expand_pattern(pattern: str, n_layers: int) -> list[str]:
    """'SSSSF' repeated to n_layers -> HF layer_types (S = sliding_attention, F = full)."""
    pattern = pattern.upper().replace(",", "").replace(" ", "")
    if not pattern or set(pattern) - {"S", "F"}:
        raise ValueError(f"layer pattern must be a string of S/F, got {pattern!r}")
    names = {"S": "sliding_attention", "F": "full_attention"}
    return [names[pattern[i % len(pattern)]] for i in range(n_layers)]


# Assistant options that must equal the target's: it attends to the target's K/V and reads
# its embedding and hidden state.
ASSISTANT_FROM_TARGET = {
    "vocab": "vocab", "kv_heads": "kv_heads", "head_dim": "head_dim",
    "global_head_dim": "global_head_dim", "sliding_window": "sliding_window",
    "rope_theta": "rope_theta", "rope_theta_swa": "rope_theta_swa",
    "partial_rotary_factor": "partial_rotary_factor", "max_position": "max_position",
    "rope_scaling_factor": "rope_scaling_factor", "backbone_hidden": "hidden",
}


def assistant_overrides(target_opts: dict) -> dict:
    """The gemma4_assistant options a target (resolved gemma4 options) dictates."""
    return {k: target_opts[v] for k, v in ASSISTANT_FROM_TARGET.items()}


def resolve_options(arch: str, **overrides) -> dict:
    """Preset for `arch` with the non-None overrides applied."""
    if arch not in PRESETS:
        raise ValueError(f"unknown arch {arch!r} (choose gemma4 or gemma3)")
    opts = dict(PRESETS[arch])
    for k, v in overrides.items():
        if k not in opts:
            raise ValueError(f"unknown option {k!r}")
        if v is not None:
            opts[k] = v
    return opts


def make_config(arch: str, opts: dict):
    """Build the transformers config object for the options."""
    layer_types = expand_pattern(opts["layer_pattern"], opts["layers"])
    if arch == "gemma4_assistant":
        return _assistant_config(opts, layer_types)
    common = dict(
        vocab_size=opts["vocab"], hidden_size=opts["hidden"],
        intermediate_size=opts["intermediate"], num_hidden_layers=opts["layers"],
        num_attention_heads=opts["heads"], num_key_value_heads=opts["kv_heads"],
        head_dim=opts["head_dim"], layer_types=layer_types,
        sliding_window=opts["sliding_window"], max_position_embeddings=opts["max_position"],
        final_logit_softcapping=opts["final_softcap"] or None, tie_word_embeddings=opts["tie_embeddings"],
        rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
        pad_token_id=0, eos_token_id=1, bos_token_id=2, attention_bias=False,
    )
    if arch == "gemma4":
        from transformers import Gemma4TextConfig
        if layer_types[-1] != "full_attention":
            raise ValueError("transformers forces the last Gemma 4 layer to full_attention; "
                             "choose a pattern/layer count that ends with F")
        full_rope = {"rope_type": "proportional", "rope_theta": opts["rope_theta"],
                     "partial_rotary_factor": opts["partial_rotary_factor"]}
        if opts["rope_scaling_factor"]:
            full_rope["factor"] = opts["rope_scaling_factor"]
        return Gemma4TextConfig(
            **common,
            global_head_dim=opts["global_head_dim"],
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": opts["rope_theta_swa"]},
                "full_attention": full_rope,
            },
            num_kv_shared_layers=opts["kv_shared_layers"],
            hidden_size_per_layer_input=opts["ple_width"],
            vocab_size_per_layer_input=opts["vocab"],
            use_double_wide_mlp=opts["double_wide_mlp"],
            attention_k_eq_v=opts.get("attention_k_eq_v", False),
            **_moe_config(opts),
        )
    if arch == "gemma3":
        from transformers import Gemma3TextConfig
        full_rope = {"rope_type": "default", "rope_theta": opts["rope_theta"]}
        if opts["rope_scaling_factor"]:
            full_rope = {"rope_type": "linear", "rope_theta": opts["rope_theta"],
                         "factor": opts["rope_scaling_factor"]}
        return Gemma3TextConfig(
            **common,
            # GGUF has no key for query_pre_attn_scalar; llama.cpp uses 1/sqrt(head_dim)
            # (gemma3.md §1.2), so the tiny model must use head_dim here.
            query_pre_attn_scalar=opts["head_dim"],
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": opts["rope_theta_swa"]},
                "full_attention": full_rope,
            },
            attn_logit_softcapping=None,
        )
    raise ValueError(arch)


def _moe_config(opts: dict) -> dict:
    """Gemma4TextConfig arguments for the 26B-A4B structure (gemma4.md §2.9): routed experts
    beside the dense MLP in every layer, and global layers with their own KV-head count."""
    out = {"enable_moe_block": bool(opts.get("moe_experts"))}
    if opts.get("moe_experts"):
        out.update(num_experts=opts["moe_experts"], top_k_experts=opts["moe_top_k"],
                   moe_intermediate_size=opts["moe_intermediate"])
    if opts.get("global_kv_heads"):
        out["num_global_key_value_heads"] = opts["global_kv_heads"]
    return out


def _assistant_config(opts: dict, layer_types: list[str]):
    """Gemma4AssistantConfig: a Q-only Gemma 4 text decoder (every layer KV-shared, no PLE,
    no double-wide MLP, no MoE) plus the backbone width and the centroid head."""
    from transformers import Gemma4AssistantConfig, Gemma4TextConfig
    if opts["vocab"] % opts["centroids"]:
        raise ValueError(f"vocab {opts['vocab']} is not a multiple of centroids {opts['centroids']}")
    full_rope = {"rope_type": "proportional", "rope_theta": opts["rope_theta"],
                 "partial_rotary_factor": opts["partial_rotary_factor"]}
    if opts["rope_scaling_factor"]:
        full_rope["factor"] = opts["rope_scaling_factor"]
    text = Gemma4TextConfig(
        vocab_size=opts["vocab"], hidden_size=opts["hidden"], intermediate_size=opts["intermediate"],
        num_hidden_layers=opts["layers"], num_attention_heads=opts["heads"],
        num_key_value_heads=opts["kv_heads"], head_dim=opts["head_dim"],
        global_head_dim=opts["global_head_dim"], layer_types=layer_types,
        sliding_window=opts["sliding_window"], max_position_embeddings=opts["max_position"],
        final_logit_softcapping=None, tie_word_embeddings=True, rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", pad_token_id=0, eos_token_id=1, bos_token_id=2,
        attention_bias=False,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": opts["rope_theta_swa"]},
            "full_attention": full_rope,
        },
        num_kv_shared_layers=opts["layers"], hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=0, use_double_wide_mlp=False, attention_k_eq_v=False,
        enable_moe_block=False,
    )
    return Gemma4AssistantConfig(
        text_config=text, backbone_hidden_size=opts["backbone_hidden"],
        use_ordered_embeddings=opts["ordered_embeddings"], num_centroids=opts["centroids"],
        centroid_intermediate_top_k=opts["centroid_top_k"], tie_word_embeddings=True,
    )


def _init_tensor(arch: str, name: str, shape, rng, opts: dict) -> np.ndarray:
    """A random value for one HF parameter/buffer, by name: a float32 numpy array drawn from
    `rng` (numpy's PCG64 generator, whose streams are the same on every platform).

    Magnitude plan (every branch of a Gemma block ends in an RMSNorm, so the norm weights
    set each branch's contribution; matrices only set the shape of the nonlinearity):
      * linear weights N(0, 1/in): pre-activations ~N(0,1) -> GELU in its curved range;
      * token embedding N(0, 0.25^2): x0 = E*sqrt(d) has rms ~2;
      * PLE table N(0, 1/P): x sqrt(P) lookup gives ~N(0,1), same scale as the normed
        projection part, so both PLE halves matter;
      * generic norm weights ~N(1, 0.35^2) (effective value; Gemma 3 stores w = eff - 1);
      * q_norm ~N(1, 0.3^2), k_norm ~N(0.35, 0.1^2) on Gemma 4 (attention scale is 1.0, so
        scores have std ~2-3: softmax is neither flat nor one-hot); Gemma 3 (scale
        1/sqrt(hd)) uses effective ~N(1.5, 0.3^2) for both;
      * final norm: Gemma 4 effective ~N(5, 1.2^2) so logits reach the +-30 softcap region;
      * layer_scalar ~U(0.5, 1.5).
    Every step is a float32 multiply/add of exactly rounded values, so the bytes do not
    depend on the machine (the fixtures' sha256 in the manifest relies on it).
    """
    shape = tuple(int(x) for x in shape)

    def normal(mean, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)

    def uniform(lo, hi):
        return rng.random(shape, dtype=np.float32) * np.float32(hi - lo) + np.float32(lo)

    shift = np.float32(1.0 if arch == "gemma3" else 0.0)   # Gemma 3 RMSNorm uses (1 + w)
    leaf = name.split(".")[-2] if name.endswith(".weight") else name.split(".")[-1]
    if name.endswith("layer_scalar"):
        return uniform(0.5, 1.5)
    if name.endswith("token_ordering"):
        # the assistant's centroid head: a permutation of the vocabulary (int64 buffer)
        return rng.permutation(opts["vocab"]).astype(np.int64)
    if name.endswith("embed_tokens.weight"):
        return normal(0.0, 0.25)
    if name.endswith("embed_tokens_per_layer.weight"):
        return normal(0.0, 1.0 / math.sqrt(opts["ple_width"]))
    if name.endswith("lm_head.weight"):
        return normal(0.0, 0.25)
    if leaf == "q_norm":
        return (normal(1.0, 0.3) if arch != "gemma3" else normal(1.5, 0.3)) - shift
    if leaf == "k_norm":
        return (normal(0.35, 0.1) if arch != "gemma3" else normal(1.5, 0.3)) - shift
    if name.endswith("centroids.weight"):
        # centroid logits ~N(0, 4): a clear top-k, yet clusters near the cut still compete
        return normal(0.0, 2.0 / math.sqrt(shape[1]))
    if name in ("model.norm.weight", "norm.weight"):
        return (normal(5.0, 1.2) if arch != "gemma3" else normal(1.5, 0.4)) - shift
    if "norm" in leaf and len(shape) == 1:
        return normal(1.0, 0.35) - shift
    # MoE (gemma4.md §2.9). The router's input has norm ~1 (RMSNorm x scale x d^-1/2), so
    # weights N(0, 2^2) give logits of std ~2: clear top-k choices that still move with the input.
    if name.endswith("router.proj.weight"):
        return normal(0.0, 2.0)
    if name.endswith("router.scale") or name.endswith("router.per_expert_scale"):
        return normal(1.0, 0.3)
    if len(shape) == 2:
        return normal(0.0, 1.0 / math.sqrt(shape[1]))
    if len(shape) == 3:   # experts [E, out, in]
        return normal(0.0, 1.0 / math.sqrt(shape[2]))
    raise ValueError(f"no init rule for {name} {shape}")


def draw_state(arch: str, seed: int, tensors, opts: dict) -> dict[str, np.ndarray]:
    """{HF name: float32 array} for `tensors` ([(name, shape)], the checkpoint's own
    tensors: a tied lm_head is not among them), drawn in sorted-name order from
    numpy.random.default_rng(seed). Needs numpy only, so the tests rebuild the same weights
    (and GGUFs) without torch: python/make_fixtures.py."""
    rng = np.random.default_rng(seed)
    return {name: _init_tensor(arch, name, shape, rng, opts)
            for name, shape in sorted((n, tuple(s)) for n, s in tensors)}


def checkpoint_tensors(model) -> list[tuple[str, list[int]]]:
    """[(name, shape)] of a HF model's state dict, sorted, without storage-tied aliases
    (the tied lm_head): exactly what save_pretrained writes."""
    seen, out = set(), []
    # lm_head last: when tied, the checkpoint keeps the embedding's name
    for name, t in sorted(model.state_dict().items(), key=lambda kv: (kv[0] == "lm_head.weight", kv[0])):
        if t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        out.append((name, list(t.shape)))
    return out


def build_model(arch: str, seed: int = 0, **overrides):
    """Return (model, config, opts): a float32 HF *ForCausalLM whose parameters and
    persistent buffers all come from draw_state(arch, seed, ...)."""
    import torch

    opts = resolve_options(arch, **overrides)
    config = make_config(arch, opts)
    if arch == "gemma4":
        from transformers import Gemma4ForCausalLM as cls
    elif arch == "gemma4_assistant":
        from transformers import Gemma4AssistantForCausalLM as cls
    else:
        from transformers import Gemma3ForCausalLM as cls
    torch.manual_seed(seed)   # only the throwaway default init uses it
    model = cls(config).to(torch.float32).eval()

    state = model.state_dict()   # persistent buffers (layer_scalar) are in here too
    drawn = draw_state(arch, seed, checkpoint_tensors(model), opts)
    with torch.no_grad():
        for name, arr in drawn.items():
            state[name].copy_(torch.from_numpy(arr).to(state[name].dtype))
    # Every non-tied tensor was visited; check nothing kept its default init.
    for name, t in model.state_dict().items():
        if name.endswith("layer_scalar"):
            assert not torch.all(t == 1.0), name
        if "norm" in name and arch != "gemma3":
            assert not torch.all(t == 1.0), name
        if "norm" in name and arch == "gemma3":
            assert not torch.all(t == 0.0), name
    return model, config, opts


def save_model(model, out_dir) -> pathlib.Path:
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layers", type=int, help="num_hidden_layers")
    p.add_argument("--hidden", type=int, help="hidden_size")
    p.add_argument("--intermediate", type=int, help="intermediate_size (non-shared layers)")
    p.add_argument("--heads", type=int, help="num_attention_heads")
    p.add_argument("--kv-heads", type=int, help="num_key_value_heads")
    p.add_argument("--head-dim", type=int, help="head_dim (sliding layers on Gemma 4; all on Gemma 3)")
    p.add_argument("--global-head-dim", type=int, help="Gemma 4 global_head_dim (full layers)")
    p.add_argument("--sliding-window", type=int)
    p.add_argument("--layer-pattern", help="S/F string repeated over the layers, e.g. SSSSF")
    p.add_argument("--kv-shared-layers", type=int, help="Gemma 4 num_kv_shared_layers")
    p.add_argument("--ple-width", type=int, help="Gemma 4 hidden_size_per_layer_input (0 = no PLE)")
    p.add_argument("--vocab", type=int, help="vocab_size (also the PLE table rows)")
    p.add_argument("--double-wide-mlp", type=_bool, help="Gemma 4 use_double_wide_mlp (true/false)")
    p.add_argument("--final-softcap", type=float, help="final_logit_softcapping (0 = none)")
    p.add_argument("--rope-theta", type=float, help="global-layer rope_theta")
    p.add_argument("--rope-theta-swa", type=float, help="sliding-layer rope_theta")
    p.add_argument("--partial-rotary-factor", type=float, help="Gemma 4 proportional RoPE factor (global)")
    p.add_argument("--rope-scaling-factor", type=float,
                   help="global-layer scaling factor (Gemma 3: linear; Gemma 4: proportional 'factor')")
    p.add_argument("--tie-embeddings", type=_bool, help="tie_word_embeddings (true/false)")
    p.add_argument("--max-position", type=int, help="max_position_embeddings")
    p.add_argument("--moe-experts", type=int, help="Gemma 4 num_experts (0 = dense)")
    p.add_argument("--moe-top-k", type=int, help="Gemma 4 top_k_experts")
    p.add_argument("--moe-intermediate", type=int, help="Gemma 4 moe_intermediate_size")
    p.add_argument("--global-kv-heads", type=int, help="Gemma 4 num_global_key_value_heads")
    p.add_argument("--attention-k-eq-v", type=_bool,
                   help="Gemma 4 attention_k_eq_v: global layers without v_proj, V = K projection (true/false)")


def _bool(s: str) -> bool:
    if s.lower() in ("1", "true", "yes", "on"):
        return True
    if s.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {s!r}")


def overrides_from_args(args) -> dict:
    keys = PRESETS["gemma4"].keys()
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, choices=sorted(PRESETS))
    p.add_argument("--out", required=True, help="output checkpoint directory")
    p.add_argument("--seed", type=int, default=0)
    add_arguments(p)
    args = p.parse_args(argv)
    model, config, opts = build_model(args.arch, seed=args.seed, **overrides_from_args(args))
    out = save_model(model, args.out)
    n = sum(t.numel() for t in model.state_dict().values())
    print(json.dumps({"out": str(out), "arch": args.arch, "seed": args.seed, "elements": n,
                      "options": opts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
