#!/usr/bin/env python3
"""Golden data for sluice's Gemma 4 audio tower (src/models/gemma4/audio.cpp, docs/spec/gemma4.md
§10), from transformers' Gemma4AudioModel and Gemma4MultimodalEmbedder — code we did not write.

    .venv-golden/bin/python python/make_audio_tower_golden.py

Writes, in tests/data/golden/audio/ (whose other files are make_audio_golden.py's: decoding
and features):
  towers/<id>.taps.bin  the tiny tower of python/tiny_audio.py on three mel inputs batched with
                        padding, as transformers computes them, per input k:
                        `aud<k>.mel` the input [frames, 128] (padded frames hold noise, which
                        the mask must keep out), `aud<k>.sscp` the two subsampling stages
                        and the input projection [T/4, d], `aud<k>.l_out.<i>` conformer
                        layer i's output [T/4, d], `aud<k>.out` output_proj [T/4, out_dims]
                        (every position, padded ones too), `aud<k>.soft` the projector's soft
                        tokens for the valid positions only [n_tokens, text_hidden]. Format
                        SLTP v1 (make_golden.py). The mmproj GGUF is not committed (make
                        fixtures rebuilds it, checking the sha256 recorded here);
  e2e/<id>.logits.f32   Gemma4ForConditionalGeneration's logits (tiny-gemma4 + the tiny tower)
                        on a prompt with the three inputs as clips, <|audio> n x <|audio|> <audio|>;
  towers.json           versions, the towers, the inputs' frame counts and valid frames, the
                        end-to-end prompt.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "golden" / "audio"
sys.path.insert(0, str(ROOT / "python"))

TOWERS = [{"id": "tiny-audio-e", "preset": "e", "seed": 351}]
# (frames in the batch, valid frames) per input: the second is padded (its valid frames give
# 31 then 16 positions after the two stride-2 stages, 25 in the batch), so a chunk that
# straddles the end is exercised; the third keeps 6 positions, so positions 17-24 see no valid
# key at all (transformers' softmax is then uniform over the window).
INPUTS = [(100, 100), (100, 61), (100, 21)]
INPUT_SEED = 352
TAPS = {
    "aud<k>.mel": "the input features [frames, 128], padded frames included",
    "aud<k>.sscp": "two stages of (3x3 stride-2 conv, LayerNorm over channels, ReLU), the second's output "
                   "flattened (frequency-major, channel fastest) and input_proj_linear [T/4, d]",
    "aud<k>.l_out.<i>": "conformer layer i's output [T/4, d]",
    "aud<k>.out": "output_proj (with bias) [T/4, out_dims]",
    "aud<k>.soft": "valid positions only: weightless RMSNorm then embedding_projection [n, text_hidden]",
}


def mel_inputs() -> np.ndarray:
    """[len(INPUTS), frames, 128] float32 log-mel-like values (mean -2, sd 1.5); the padded
    frames are noise too (transformers' mask zeroes them before each convolution)."""
    rng = np.random.default_rng(INPUT_SEED)
    n = max(f for f, _ in INPUTS)
    return (rng.standard_normal((len(INPUTS), n, 128), dtype=np.float32) * np.float32(1.5) - np.float32(2.0))


def n_tokens(valid: int) -> int:
    """Soft tokens of `valid` frames: transformers' mask[::2] twice (Gemma4Processor's
    _compute_audio_num_tokens says the same: t = (t + 2 - 3) // 2 + 1, twice)."""
    for _ in range(2):
        valid = (valid + 2 - 3) // 2 + 1
    return valid


def build_tower(torch, tower: dict):
    """transformers' audio model and embedder with tiny_audio's weights for `tower`."""
    import tiny_audio as ta
    from transformers import Gemma4AudioConfig, Gemma4TextConfig
    from make_vision_golden import load_tower_state
    from transformers.models.gemma4.modeling_gemma4 import Gemma4AudioModel, Gemma4MultimodalEmbedder

    opts = ta.PRESETS[tower["preset"]]
    acfg = Gemma4AudioConfig(**{k: v for k, v in ta.hf_audio_config(opts).items() if k != "model_type"})
    acfg._attn_implementation = "eager"
    model = Gemma4AudioModel(acfg).float().eval()
    embed = Gemma4MultimodalEmbedder(acfg, Gemma4TextConfig(hidden_size=opts["text_hidden"])).float().eval()
    state = ta.draw_state(tower["seed"], opts)
    load_tower_state(torch, model, embed, state, ta.AUDIO, ta.PROJ)
    return model, embed, opts, state


def tower_golden(torch, tower: dict) -> dict:
    """Runs one tiny tower on INPUTS (one padded batch), writes its taps and its mmproj GGUF."""
    import convert_audio_mmproj as ca
    import tiny_audio as ta
    from make_vision_golden import write_taps

    model, embed, opts, state = build_tower(torch, tower)
    mel = torch.from_numpy(mel_inputs())
    mask = torch.zeros(mel.shape[:2], dtype=torch.bool)
    for k, (_, valid) in enumerate(INPUTS):
        mask[k, :valid] = True
    acts = {}

    def keep(name):
        return lambda m, i, o: acts.__setitem__(name, (o[0] if isinstance(o, tuple) else o).detach())

    sscp = model.subsample_conv_projection
    hooks = [sscp.register_forward_hook(keep("sscp")),
             model.output_proj.register_forward_hook(keep("out"))]
    hooks += [layer.register_forward_hook(keep(f"l_out.{i}")) for i, layer in enumerate(model.layers)]
    with torch.no_grad():
        out = model(mel, mask, return_dict=True)
        soft = embed(out.last_hidden_state)
    for h in hooks:
        h.remove()
    assert torch.equal(out.last_hidden_state, acts["out"])
    records = []
    for k, (_, valid) in enumerate(INPUTS):
        keep_k = out.attention_mask[k]
        assert int(keep_k.sum()) == n_tokens(valid), "the encoder's mask disagrees with the processor's count"
        records.append((f"aud{k}.mel", mel[k].numpy()))
        records.append((f"aud{k}.sscp", acts["sscp"][k].numpy()))
        records += [(f"aud{k}.l_out.{i}", acts[f"l_out.{i}"][k].numpy()) for i in range(opts["layers"])]
        records.append((f"aud{k}.out", acts["out"][k].numpy()))
        records.append((f"aud{k}.soft", soft[k][keep_k].numpy()))
    (OUT / "towers").mkdir(parents=True, exist_ok=True)
    write_taps(OUT / "towers" / f"{tower['id']}.taps.bin", records)
    gguf_path = ROOT / "tests" / "data" / "golden" / f"{tower['id']}.mmproj.f32.gguf"
    ca.convert_audio_state(ta.hf_audio_config(opts), opts["text_hidden"], state, gguf_path, "f32",
                           name=tower["id"], verbose=False)
    sha = hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    print(f"  {tower['id']}: {len(records)} taps, {gguf_path.name} sha256 {sha[:12]}", file=sys.stderr)
    return {**tower, "options": opts, "gguf": gguf_path.name, "gguf_sha256": sha,
            "inputs": [{"frames": f, "valid": v, "tokens": n_tokens(v)} for f, v in INPUTS]}


# End to end: tiny-gemma4 (the text fixture) + tiny-audio-e, a prompt with the INPUTS as clips
# (<|audio> n x <|audio|> <audio|>, causal). Placeholder ids must fit the tiny vocabulary (512).
E2E = {"id": "tiny-gemma4-audio", "text": "tiny-gemma4", "tower": "tiny-audio-e", "audio_token_id": 303,
       "boa_token_id": 304, "eoa_token_index": 305}


def e2e_prompt() -> list:
    ids = [2, 17, 33, 108]
    for k, (_, valid) in enumerate(INPUTS):
        ids += [E2E["boa_token_id"]] + [E2E["audio_token_id"]] * n_tokens(valid) + [E2E["eoa_token_index"]]
        ids += [45 + k, 99, 250 + 7 * k]
    return ids + [12, 5]


def e2e_golden(torch) -> dict:
    """Logits of Gemma4ForConditionalGeneration on the clip prompt: the text weights are
    tiny-gemma4's (make_tiny_model.build_model from its manifest seed), the audio ones
    tiny-audio-e's. Checked: the multimodal model reproduces the text model on text alone, and
    the clips change the logits."""
    import make_tiny_model as tiny
    import tiny_audio as ta
    from make_vision_golden import load_tower_state
    from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration

    text_models = json.loads((ROOT / "tests" / "data" / "golden" / "manifest.json").read_text())["models"]
    tentry = text_models[E2E["text"]]
    text_model, tcfg, _ = tiny.build_model("gemma4", tentry["seed"], **tentry["options"])
    tower = next(t for t in TOWERS if t["id"] == E2E["tower"])
    opts = ta.PRESETS[tower["preset"]]
    acfg = Gemma4AudioConfig(**{k: v for k, v in ta.hf_audio_config(opts).items() if k != "model_type"})
    cfg = Gemma4Config(text_config=tcfg, vision_config=None, audio_config=acfg,
                       **{k: E2E[k] for k in ("audio_token_id", "boa_token_id", "eoa_token_index")})
    for c in (cfg, cfg.text_config, cfg.audio_config):
        c._attn_implementation = "eager"
    model = Gemma4ForConditionalGeneration(cfg).float().eval()
    model.model.language_model.load_state_dict(text_model.model.state_dict(), strict=True)
    load_tower_state(torch, model.model.audio_tower, model.model.embed_audio, ta.draw_state(tower["seed"], opts),
                     ta.AUDIO, ta.PROJ)
    model.tie_weights()
    mel = torch.from_numpy(mel_inputs())
    mask = torch.zeros(mel.shape[:2], dtype=torch.bool)
    for k, (_, valid) in enumerate(INPUTS):
        mask[k, :valid] = True
    ids = torch.tensor([e2e_prompt()])
    with torch.no_grad():
        probe = torch.tensor([tentry["token_ids"][:16]])
        assert torch.equal(model(input_ids=probe, use_cache=False).logits, text_model(input_ids=probe, use_cache=False).logits)
        logits = model(input_ids=ids, input_features=mel, input_features_mask=mask, use_cache=False).logits[0]
        plain = model(input_ids=ids, use_cache=False).logits[0]
        assert not torch.allclose(logits, plain), "the clips changed nothing"
    out = OUT / "e2e" / f"{E2E['id']}.logits.f32"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(logits.numpy().astype("<f4").tobytes())
    print(f"  {E2E['id']}: {ids.shape[1]} tokens, logits {tuple(logits.shape)}", file=sys.stderr)
    return {**E2E, "token_ids": ids[0].tolist(), "logits": f"e2e/{E2E['id']}.logits.f32",
            "n_vocab": int(logits.shape[1])}


def main() -> None:
    import torch
    import transformers

    OUT.mkdir(parents=True, exist_ok=True)
    towers = [tower_golden(torch, t) for t in TOWERS]
    e2e = [e2e_golden(torch)]
    manifest = {
        "generator": "python/make_audio_tower_golden.py",
        "transformers_version": transformers.__version__, "torch_version": torch.__version__,
        "towers": towers,
        "e2e": e2e,
        "taps_semantics": TAPS,
    }
    (OUT / "towers.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
