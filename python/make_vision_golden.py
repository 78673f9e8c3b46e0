#!/usr/bin/env python3
"""Golden data for sluice's image path (src/media, docs/spec/gemma4.md §6), from transformers'
Gemma4ImageProcessor (torchvision backend) and PIL — implementations we did not write.

    PYTHONPATH=<torchvision+pillow> .venv-golden/bin/python python/make_vision_golden.py

Writes tests/data/golden/vision/:
  decode/<case>.<ext>   small encoded images (PNG/JPEG/WebP/GIF in many modes), made here
                        with PIL from fixed patterns;
  decode/<case>.rgb     what transformers' processor sees: convert_to_rgb(PIL.Image.open(f)),
                        raw [height][width][3] bytes;
  preprocess.json       a sweep of image sizes x token budgets: the processor's soft-token
                        count, patch grid, and digests of its pixel_values (the 8-bit codes
                        c = round(255 v), checked here to reproduce v exactly as float32(c) *
                        float32(1/255)) for the synthetic pattern `pattern()` below, which the
                        C++ test regenerates;
  towers/<id>.taps.bin  per-layer activations of the tiny towers (python/tiny_vision.py) on
                        two patch grids batched with padding, as transformers computes them:
                        per image k, `img<k>.embd` (patch embedding + positions), `img<k>.l_out.<i>`
                        (after layer i), `img<k>.pooled` (pooled, x sqrt(d), standardised),
                        `img<k>.soft` (the projector's soft tokens) — format SLTP v1 as
                        make_golden.py; the mmproj GGUFs are not committed (make fixtures
                        rebuilds them, checking the sha256 recorded here);
  manifest.json         versions, the decode cases and the towers.
"""
from __future__ import annotations

import io
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "golden" / "vision"


def pattern(width: int, height: int) -> np.ndarray:
    """[h, w, 3] uint8: gradients, a product term and a block xor texture (any size, exact in
    unsigned 64-bit arithmetic; tests/unit/media/media_golden_test.cpp computes the same)."""
    x = np.arange(width, dtype=np.uint64)[None, :, None]
    y = np.arange(height, dtype=np.uint64)[:, None, None]
    c = np.arange(3, dtype=np.uint64)[None, None, :]
    v = x * 13 + y * 29 + c * 71 + ((x * y) >> np.uint64(3)) + (((x >> np.uint64(2)) ^ (y >> np.uint64(2))) * 37)
    return (v & np.uint64(255)).astype(np.uint8)


# (width, height, budget): >= 40 sizes from 1x1 to 4000x3000, both orientations, every budget.
SWEEP = [
    (1, 1, 280), (2, 1, 280), (1, 2, 280), (3, 7, 280), (7, 3, 280), (16, 16, 280), (47, 48, 280),
    (48, 48, 280), (49, 50, 280), (100, 1, 280), (1, 100, 280), (4000, 1, 280), (1, 4000, 280),
    (3000, 2, 280), (2, 3000, 280), (911, 17, 280), (17, 911, 280), (224, 224, 280), (300, 200, 280),
    (200, 300, 280), (640, 480, 280), (480, 640, 280), (768, 768, 280), (800, 600, 280), (600, 800, 280),
    (1024, 768, 280), (768, 1024, 280), (1000, 1000, 280), (1280, 720, 280), (720, 1280, 280),
    (1920, 1080, 280), (1080, 1920, 280), (2048, 1536, 280), (1536, 2048, 280), (777, 333, 280),
    (333, 777, 280), (1234, 567, 280), (567, 1234, 280), (803, 803, 280), (804, 802, 280),
    (4000, 3000, 280), (3000, 4000, 280), (912, 672, 280), (672, 912, 280),
    (640, 480, 70), (480, 640, 70), (50, 4000, 70), (640, 480, 140), (333, 777, 140),
    (640, 480, 560), (777, 333, 560), (640, 480, 1120), (1920, 1080, 1120), (1, 1, 1120), (3000, 4000, 1120),
]


def code_digest(codes: np.ndarray) -> dict:
    """Digests of a flat uint8 array that the C++ test recomputes exactly (int64 arithmetic)."""
    c = codes.astype(np.int64).ravel()
    i = np.arange(c.size, dtype=np.int64)
    w = (i * 2654435761) % 1000003 + 1
    return {"n": int(c.size), "sum": int(c.sum()), "weighted": int((c * w).sum()), "head": c[:48].tolist()}


def preprocess_sweep(torch, Gemma4ImageProcessor, Image) -> list:
    inv255 = np.float32(1.0 / 255.0)
    cases = []
    for width, height, budget in SWEEP:
        proc = Gemma4ImageProcessor(max_soft_tokens=budget)
        out = proc(images=Image.fromarray(pattern(width, height), "RGB"), return_tensors="pt")
        pos = out["image_position_ids"][0].numpy()
        valid = (pos != -1).all(-1)
        px = int(pos[valid, 0].max()) + 1
        py = int(pos[valid, 1].max()) + 1
        pv = out["pixel_values"][0].numpy()[valid]  # [n_patches, 768] float32
        codes = np.rint(pv.astype(np.float64) * 255.0)
        assert codes.min() >= 0 and codes.max() <= 255
        assert np.array_equal(codes.astype(np.float32) * inv255, pv), "pixel values are not float32(c)/255"
        n_tok = int(out["num_soft_tokens_per_image"][0])
        assert n_tok == px * py // 9
        cases.append({"width": width, "height": height, "budget": budget, "soft_tokens": n_tok,
                      "patches_x": px, "patches_y": py, "codes": code_digest(codes.astype(np.uint8))})
        print(f"  {width}x{height} @{budget}: {px * 16}x{py * 16}, {n_tok} tokens", file=sys.stderr)
    return cases


def decode_cases(Image):
    """(name, ext, PIL save kwargs, PIL image) for the decode golden files."""
    rgb = Image.fromarray(pattern(23, 17), "RGB")
    a = pattern(23, 17)[:, :, 1]
    alpha = Image.fromarray(((a.astype(np.int32) * 7) % 256).astype(np.uint8), "L")
    rgba = rgb.copy()
    rgba.putalpha(alpha)
    grey = rgb.convert("L")
    la = grey.copy()
    la.putalpha(alpha)
    pal = rgb.quantize(colors=37)
    pal_t = pal.copy()
    pal_t.info["transparency"] = 5
    grey16 = Image.fromarray(pattern(23, 17)[:, :, 0].astype(np.uint16) * 3)
    bw = grey.point(lambda v: 255 if v > 128 else 0).convert("1")
    rgb_t = rgb.copy()
    rgb_t.info["transparency"] = tuple(int(v) for v in pattern(23, 17)[0, 0])
    big = Image.fromarray(pattern(64, 48), "RGB")
    return [
        ("png_rgb", "png", {}, rgb), ("png_rgba", "png", {}, rgba), ("png_grey", "png", {}, grey),
        ("png_grey_alpha", "png", {}, la), ("png_palette", "png", {}, pal),
        ("png_palette_trns", "png", {"transparency": 5}, pal), ("png_grey16", "png", {}, grey16),
        ("png_bilevel", "png", {}, bw), ("png_rgb_trns", "png", {"transparency": rgb_t.info["transparency"]}, rgb),
        ("png_interlaced", "png", {"interlace": 1}, rgba),
        ("jpeg_420", "jpg", {"quality": 85, "subsampling": 2}, big), ("jpeg_444", "jpg", {"quality": 90, "subsampling": 0}, big),
        ("jpeg_422", "jpg", {"quality": 75, "subsampling": 1}, rgb), ("jpeg_grey", "jpg", {"quality": 80}, grey),
        ("jpeg_progressive", "jpg", {"quality": 80, "progressive": True}, big),
        ("webp_lossy", "webp", {"quality": 80}, big), ("webp_lossless", "webp", {"lossless": True}, rgb),
        ("webp_alpha_lossy", "webp", {"quality": 70}, rgba), ("webp_alpha_lossless", "webp", {"lossless": True}, rgba),
        ("gif_palette", "gif", {}, pal), ("gif_transparent", "gif", {"transparency": 5}, pal),
        ("gif_grey", "gif", {}, grey), ("gif_interlaced", "gif", {"interlace": True}, pal),
    ]


def write_decode_cases(Image, convert_to_rgb) -> list:
    d = OUT / "decode"
    d.mkdir(parents=True, exist_ok=True)
    cases = []
    for name, ext, kw, im in decode_cases(Image):
        buf = io.BytesIO()
        im.save(buf, {"jpg": "JPEG", "png": "PNG", "webp": "WEBP", "gif": "GIF"}[ext], **kw)
        data = buf.getvalue()
        (d / f"{name}.{ext}").write_bytes(data)
        opened = Image.open(io.BytesIO(data))
        mode = opened.mode
        rgb = convert_to_rgb(opened, return_numpy=True)
        assert rgb.dtype == np.uint8 and rgb.ndim == 3 and rgb.shape[2] == 3
        (d / f"{name}.rgb").write_bytes(rgb.tobytes())
        cases.append({"name": name, "file": f"{name}.{ext}", "pil_mode": mode, "width": rgb.shape[1],
                      "height": rgb.shape[0], "bytes": len(data)})
        print(f"  {name}.{ext}: {len(data)} bytes, PIL mode {mode}", file=sys.stderr)
    return cases


# The tiny towers and the two patch grids (columns x rows, multiples of 3) they are run on.
TOWERS = [{"id": "tiny-vision-e", "preset": "e", "seed": 341},
          {"id": "tiny-vision-large", "preset": "large", "seed": 342}]
GRIDS = [(9, 6), (3, 12)]


def patch_grid(cols: int, rows: int) -> np.ndarray:
    """[rows*cols, 768] float32 patches of pattern(16 cols, 16 rows) / 255, raster order, each
    patch [py][px][channel] — what the processor makes of an image already at its target size."""
    img = pattern(cols * 16, rows * 16).astype(np.float32) * np.float32(1.0 / 255.0)
    p = img.reshape(rows, 16, cols, 16, 3).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(p.reshape(rows * cols, 768))


def batched_grids(torch):
    """Both GRIDS as one padded batch, as the processor pads: pixel_values [2, n_max, 768] and
    position ids [2, n_max, 2] ((column, row); padding (-1, -1))."""
    n_max = max(c * r for c, r in GRIDS)
    pix = torch.zeros(len(GRIDS), n_max, 768)
    pos = torch.full((len(GRIDS), n_max, 2), -1, dtype=torch.long)
    for k, (c, r) in enumerate(GRIDS):
        pix[k, : c * r] = torch.from_numpy(patch_grid(c, r))
        yy, xx = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
        pos[k, : c * r] = torch.from_numpy(np.stack([xx.ravel(), yy.ravel()], -1))
    return pix, pos


def write_taps(path: pathlib.Path, records: list) -> None:
    import struct
    with open(path, "wb") as f:
        f.write(b"SLTP" + struct.pack("<II", 1, len(records)))
        for name, arr in records:
            a = np.ascontiguousarray(arr, dtype=np.float32)
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<I", a.ndim))
            f.write(struct.pack(f"<{a.ndim}Q", *a.shape) + a.tobytes())


def load_tower_state(torch, model, embed, state: dict, prefix: str, proj: str) -> None:
    """Loads a tiny tower's drawn `state` (full HF names) into transformers' tower `model`
    (the names under `prefix`) and projector `embed` (`proj`), checking first that the tiny
    module's tensor list is exactly the model's."""
    sd = {k[len(prefix):]: torch.from_numpy(v) for k, v in state.items() if k.startswith(prefix)}
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert got == {k: tuple(v.shape) for k, v in sd.items()}, f"the tiny {prefix} tensor list differs from HF"
    model.load_state_dict(sd, strict=True)
    embed.load_state_dict({"embedding_projection.weight": torch.from_numpy(state[proj])}, strict=True)


def tower_golden(torch, tower: dict) -> dict:
    """Build one tiny tower in transformers from tiny_vision's weights, write its mmproj GGUF
    (not committed) and the taps of both grids batched with padding."""
    import hashlib

    import convert_vision_mmproj as cv
    import tiny_vision as tv
    from transformers import Gemma4TextConfig, Gemma4VisionConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4MultimodalEmbedder, Gemma4VisionModel

    opts = tv.PRESETS[tower["preset"]]
    vdict = tv.hf_vision_config(opts)
    vcfg = Gemma4VisionConfig(**{k: v for k, v in vdict.items() if k != "model_type"})
    vcfg._attn_implementation = "eager"
    model = Gemma4VisionModel(vcfg).float().eval()
    embed = Gemma4MultimodalEmbedder(vcfg, Gemma4TextConfig(hidden_size=opts["text_hidden"])).float().eval()
    state = tv.draw_state(tower["seed"], opts)
    load_tower_state(torch, model, embed, state, tv.VISION, tv.PROJ)

    pix, pos = batched_grids(torch)
    acts = {}
    hooks = [model.patch_embedder.register_forward_hook(lambda m, i, o: acts.__setitem__("embd", o.detach()))]
    for i, layer in enumerate(model.encoder.layers):
        hooks.append(layer.register_forward_hook(lambda m, inp, o, i=i: acts.__setitem__(f"l_out.{i}", o.detach())))
    with torch.no_grad():
        pooled = model(pixel_values=pix, pixel_position_ids=pos).last_hidden_state   # [sum tokens, d]
        soft = embed(pooled)
    for h in hooks:
        h.remove()
    records, t0 = [], 0
    for k, (c, r) in enumerate(GRIDS):
        n, t = c * r, c * r // 9
        records.append((f"img{k}.embd", acts["embd"][k, :n].numpy()))
        for i in range(opts["layers"]):
            records.append((f"img{k}.l_out.{i}", acts[f"l_out.{i}"][k, :n].numpy()))
        records += [(f"img{k}.pooled", pooled[t0: t0 + t].numpy()), (f"img{k}.soft", soft[t0: t0 + t].numpy())]
        t0 += t
    (OUT / "towers").mkdir(parents=True, exist_ok=True)
    write_taps(OUT / "towers" / f"{tower['id']}.taps.bin", records)
    gguf_path = ROOT / "tests" / "data" / "golden" / f"{tower['id']}.mmproj.f32.gguf"
    cv.convert_vision_state(vdict, opts["text_hidden"], state, gguf_path, "f32", name=tower["id"], verbose=False)
    sha = hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    print(f"  {tower['id']}: {len(records)} taps, {gguf_path.name} sha256 {sha[:12]}", file=sys.stderr)
    return {**tower, "options": opts, "grids": GRIDS, "gguf": gguf_path.name, "gguf_sha256": sha}


# End to end: tiny-gemma4 (the text fixture) + tiny-vision-e, a prompt with both grids as
# images. Placeholder ids must fit the tiny vocabulary (512), so the config names its own.
# The 31B-shaped text fixture with the large tower: use_bidirectional_attention = "vision", so
# each image is a bidirectional block on the sliding layers (mm_token_type_ids passed).
E2E_ALL = [{"id": "tiny-gemma4-vision", "text": "tiny-gemma4", "tower": "tiny-vision-e", "bidirectional": False,
            "image_token_id": 300, "boi_token_id": 301, "eoi_token_id": 302},
           {"id": "tiny-gemma4-k-eq-v-vision", "text": "tiny-gemma4-k-eq-v", "tower": "tiny-vision-large",
            "bidirectional": True, "image_token_id": 300, "boi_token_id": 301, "eoi_token_id": 302}]
E2E = E2E_ALL[0]


def e2e_prompt() -> list:
    boi, img, eoi = E2E["boi_token_id"], E2E["image_token_id"], E2E["eoi_token_id"]
    ids = [2, 17, 33, 108]
    for k, (c, r) in enumerate(GRIDS):
        ids += [boi] + [img] * (c * r // 9) + [eoi] + [45 + k, 99, 250 + 7 * k]
    return ids + [12, 5]


def e2e_golden(torch, manifest_models: dict, E2E: dict) -> dict:
    """Logits of Gemma4ForConditionalGeneration on a two-image prompt: the text weights are
    tiny-gemma4's (make_tiny_model.build_model from its manifest seed), the vision ones
    tiny-vision-e's. Checked: the multimodal model reproduces the text model on text alone."""
    import make_tiny_model as tiny
    import tiny_vision as tv
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration, Gemma4VisionConfig

    tentry = manifest_models[E2E["text"]]
    text_model, tcfg, _ = tiny.build_model("gemma4", tentry["seed"], **tentry["options"])
    tower = next(t for t in TOWERS if t["id"] == E2E["tower"])
    opts = tv.PRESETS[tower["preset"]]
    vcfg = Gemma4VisionConfig(**{k: v for k, v in tv.hf_vision_config(opts).items() if k != "model_type"})
    if E2E["bidirectional"]:
        tcfg.use_bidirectional_attention = "vision"
    cfg = Gemma4Config(text_config=tcfg, vision_config=vcfg, audio_config=None,
                       **{k: E2E[k] for k in ("image_token_id", "boi_token_id", "eoi_token_id")})
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    cfg.vision_config._attn_implementation = "eager"
    model = Gemma4ForConditionalGeneration(cfg).float().eval()
    model.model.language_model.load_state_dict(text_model.model.state_dict(), strict=True)
    state = tv.draw_state(tower["seed"], opts)
    model.model.vision_tower.load_state_dict(
        {k[len(tv.VISION):]: torch.from_numpy(v) for k, v in state.items() if k.startswith(tv.VISION)}, strict=True)
    model.model.embed_vision.load_state_dict({"embedding_projection.weight": torch.from_numpy(state[tv.PROJ])})
    model.tie_weights()
    with torch.no_grad():
        probe = torch.tensor([tentry["token_ids"][:16]])
        a = model(input_ids=probe, use_cache=False).logits
        b = text_model(input_ids=probe, use_cache=False).logits
        assert torch.equal(a, b), "the multimodal model does not reproduce the text model on text"
        pix, pos = batched_grids(torch)
        ids = e2e_prompt()
        mm = (torch.tensor([ids]) == E2E["image_token_id"]).long()
        logits = model(input_ids=torch.tensor([ids]), pixel_values=pix, image_position_ids=pos,
                       mm_token_type_ids=mm, use_cache=False).logits[0]
        causal = model(input_ids=torch.tensor([ids]), pixel_values=pix, image_position_ids=pos,
                       use_cache=False).logits[0]
        assert torch.equal(logits, causal) != E2E["bidirectional"], "the image blocks' mask is not what it should be"
        plain = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
        assert not torch.allclose(logits, plain), "the images changed nothing"
    out = OUT / "e2e" / f"{E2E['id']}.logits.f32"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(logits.numpy().astype("<f4").tobytes())
    print(f"  {E2E['id']}: {len(ids)} tokens, logits {tuple(logits.shape)}", file=sys.stderr)
    return {**E2E, "token_ids": ids, "grids": GRIDS, "logits": f"e2e/{E2E['id']}.logits.f32",
            "n_vocab": int(logits.shape[1])}


def main() -> None:
    import PIL
    import torch
    import torchvision
    import transformers
    from PIL import Image
    from transformers import Gemma4ImageProcessor
    from transformers.image_transforms import convert_to_rgb

    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["decode", "preprocess", "towers", "e2e"], action="append",
                    help="regenerate only these parts (default: all); the manifest keeps the others")
    parts = set(ap.parse_args().only or ["decode", "preprocess", "towers", "e2e"])
    OUT.mkdir(parents=True, exist_ok=True)
    old = json.loads((OUT / "manifest.json").read_text()) if (OUT / "manifest.json").exists() else {}
    decode = write_decode_cases(Image, convert_to_rgb) if "decode" in parts else old["decode_cases"]
    if "preprocess" in parts:
        sweep = preprocess_sweep(torch, Gemma4ImageProcessor, Image)
        (OUT / "preprocess.json").write_text(json.dumps({"cases": sweep}, indent=1) + "\n")
    sys.path.insert(0, str(ROOT / "python"))
    towers = [tower_golden(torch, t) for t in TOWERS] if "towers" in parts else old["towers"]
    text_models = json.loads((ROOT / "tests" / "data" / "golden" / "manifest.json").read_text())["models"]
    e2e = [e2e_golden(torch, text_models, e) for e in E2E_ALL] if "e2e" in parts else old.get("e2e", [])
    manifest = {
        "generator": "python/make_vision_golden.py",
        "transformers_version": transformers.__version__, "torch_version": torch.__version__,
        "torchvision_version": torchvision.__version__, "pillow_version": PIL.__version__,
        "pattern": "v(x,y,c) = (13x + 29y + 71c + (xy >> 3) + 37((x >> 2) ^ (y >> 2))) mod 256",
        "decode_cases": decode,
        "towers": towers,
        "e2e": e2e,
        "taps_semantics": {
            "img<k>.embd": "patch projection of 2x-1 plus the x and y position rows [n_patches, d]",
            "img<k>.l_out.<i>": "encoder layer i's output [n_patches, d]",
            "img<k>.pooled": "3x3 average by position, x sqrt(d), then (h - std_bias) * std_scale if standardize [n/9, d]",
            "img<k>.soft": "weightless RMSNorm then embedding_projection [n/9, text_hidden]",
        },
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
