#!/usr/bin/env python3
"""Golden data for the Gemma 4 assistant (MTP drafter, docs/spec/gemma4.md §5): a random tiny
assistant for the tiny Gemma 4 fixture, and transformers' draft steps on it.

    .venv-golden/bin/python python/make_assistant_golden.py     # part of `make golden`

Writes tests/data/golden/tiny-gemma4-assistant.f32.steps.bin (SLTP v1, make_golden.py's taps
format) and the manifest entry assistants["tiny-gemma4-assistant"] (seed, options, HF config and tensor
list, so python/make_fixtures.py rebuilds tiny-gemma4-assistant.f32.gguf and checks its hash).
The entry goes under the manifest's "assistants" (not "models": it is no decoder with logits
of its own); make_golden.py must run first (it rewrites the file).

For each case (a prompt prefix of the tiny-gemma4 fixture's token ids, one shorter and one
longer than the sliding window) the target runs the prefix (eager, f32, no cache) and its
greedy token t is the first draft input; then `n_steps` draft steps run as transformers'
Gemma4AssistantCandidateGenerator does: inputs_embeds = concat(E_target[t]·sqrt(d), h),
the constant position n_prompt, the target's shared K/V of the prefix, next t = argmax of the
(centroid-head) logits, next h = the assistant's projected state. Records per case <c>:
  <c>.target_hidden   [1, d_target]   the h of the first step (what transformers feeds)
  <c>.target_prenorm  [1, d_target]   the last layer's output before the final norm
  <c>.full_logits     [K, V]          lm_head · y (the full head; no softcap)
  <c>.centroid_logits [K, V]          transformers' centroid-head logits (others = min − 1)
  <c>.centroid_scores [K, C]          the centroid logits (for near-tie checks)
  <c>.next_hidden     [K, d_target]   post_projection(y)
The manifest records each case's tokens [t, d1 .. dK] (d_k the argmax of step k).
"""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import convert_hf_to_gguf as conv  # noqa: E402
import make_golden  # noqa: E402
import make_tiny_model as tiny  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden"
MODEL_ID = "tiny-gemma4-assistant"
TARGET_ID = "tiny-gemma4"
SEED = 44
N_STEPS = 4
CASES = {"short": 12, "long": 40}   # prompt lengths; the target's window is 16


def build_target(entry: dict):
    import torch
    model, _, opts = tiny.build_model("gemma4", seed=entry["seed"], **entry["options"])
    drawn = tiny.draw_state("gemma4", entry["seed"], entry["hf_tensors"], entry["options"])
    state = model.state_dict()
    for name, arr in drawn.items():   # the fixture's weights, exactly
        assert torch.equal(state[name], torch.from_numpy(arr)), name
    model.config._attn_implementation = "eager"
    return model, opts


def run_case(target, assistant, ids: list[int], n_steps: int) -> tuple[dict, list[int], dict]:
    import torch
    x = torch.tensor([ids])
    with torch.no_grad():
        out = target(input_ids=x, use_cache=False, output_hidden_states=True, return_shared_kv_states=True)
        base = target.model(input_ids=x, use_cache=False, output_hidden_states=True)
    h_fed = out.hidden_states[-1][:, -1:]
    post = base.last_hidden_state[:, -1:]
    # The last decoder layer's output, before the final norm: the norm's input.
    pre_holder = {}
    hook = target.model.norm.register_forward_hook(lambda m, i, o: pre_holder.__setitem__("x", i[0]))
    with torch.no_grad():
        target.model(input_ids=x, use_cache=False)
    hook.remove()
    pre = pre_holder["x"][:, -1:]
    facts = {"fed_equals_post_norm": bool(torch.equal(h_fed, post)),
             "fed_vs_pre_norm_max_abs": float((h_fed - pre).abs().max())}
    t = int(out.logits[0, -1].argmax())
    kv = {k: (v[0][:, :, :len(ids)], v[1][:, :, :len(ids)]) for k, v in out.shared_kv_states.items()}
    pos = torch.tensor([[len(ids)]])
    embed = target.get_input_embeddings()   # scaled: E[t]·sqrt(d)
    y_holder = {}
    hook = assistant.model.register_forward_hook(lambda m, i, o: y_holder.__setitem__("y", o.last_hidden_state))
    tokens, rec = [t], {k: [] for k in ("full_logits", "centroid_logits", "centroid_scores", "next_hidden")}
    h = h_fed
    for _ in range(n_steps):
        with torch.no_grad():
            emb = torch.cat([embed(torch.tensor([[tokens[-1]]])), h], dim=-1)
            o = assistant(inputs_embeds=emb, attention_mask=torch.ones(1, len(ids) + 1, dtype=torch.long),
                          position_ids=pos, shared_kv_states=kv, use_cache=False)
            y = y_holder["y"]
            rec["full_logits"].append(assistant.lm_head(y)[0])
            rec["centroid_logits"].append(o.logits[0])
            rec["centroid_scores"].append(assistant.masked_embedding.centroids(y)[0])
            rec["next_hidden"].append(o.last_hidden_state[0])
        tokens.append(int(o.logits[0, -1].argmax()))
        h = o.last_hidden_state
    hook.remove()
    arrays = {k: torch.cat(v, 0).numpy() for k, v in rec.items()}
    arrays["target_hidden"] = h_fed[0].numpy()
    arrays["target_prenorm"] = pre[0].numpy()
    return arrays, tokens, facts


def main() -> int:
    import torch
    import transformers
    manifest = json.loads((GOLDEN / "manifest.json").read_text())
    t_entry = manifest["models"][TARGET_ID]
    target, t_opts = build_target(t_entry)
    assistant, cfg, opts = tiny.build_model("gemma4_assistant", seed=SEED, **tiny.assistant_overrides(t_opts))
    assistant.config.get_text_config()._attn_implementation = "eager"
    assistant.model.config._attn_implementation = "eager"
    hf_tensors = tiny.checkpoint_tensors(assistant)
    hf_config = json.loads(cfg.to_json_string())
    gguf_name = f"{MODEL_ID}.f32.gguf"
    state = tiny.draw_state("gemma4_assistant", SEED, hf_tensors, opts)
    summary = conv.convert_state(hf_config, state, GOLDEN / gguf_name, "f32", name=MODEL_ID, verbose=False)
    records, cases, facts = {}, [], {}
    ids_all = t_entry["token_ids"]
    for name, n in CASES.items():
        arrays, tokens, f = run_case(target, assistant, ids_all[:n], N_STEPS)
        for k, v in arrays.items():
            records[f"{name}.{k}"] = v
        cases.append({"name": name, "n_prompt": n, "tokens": tokens})
        facts[name] = f
        print(f"{name}: n={n} tokens {tokens} {f}", file=sys.stderr)
    steps = f"{MODEL_ID}.f32.steps.bin"
    make_golden.write_taps(GOLDEN / steps, records)
    manifest.setdefault("assistants", {})[MODEL_ID] = {
        "arch": "gemma4_assistant", "seed": SEED, "target": TARGET_ID, "options": opts,
        "hf_config": hf_config, "hf_tensors": hf_tensors,
        "variants": {"f32": {
            "gguf": gguf_name, "gguf_sha256": make_golden.sha256(GOLDEN / gguf_name),
            "gguf_bytes": (GOLDEN / gguf_name).stat().st_size,
            "tensor_types": {k: v[0] for k, v in summary.items()},
            "steps": steps, "steps_sha256": make_golden.sha256(GOLDEN / steps),
            "reference": f"transformers {transformers.__version__} (torch {torch.__version__}) eager f32, "
                         "Gemma4AssistantCandidateGenerator's loop",
        }},
        "cases": cases, "n_steps": N_STEPS, "facts": facts,
    }
    (GOLDEN / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
