"""The audio part of the mmproj GGUF (python/convert_audio_mmproj.py) is what llama.cpp writes:
every tensor name equals the one llama.cpp's own tensor map (the PyPI `gguf` package's
TensorNameMap, after the renames of its Gemma4VisionAudioModel converter) gives — the two
swapped light-conv norm names included — and the tiny fixture carries llama.cpp's keys, the
softplus of per_dim_scale, the [d, 5] depthwise kernel and F32 clamp scalars. numpy + gguf only."""
import math
import pathlib
import sys

import numpy as np
import gguf
from gguf import GGUFReader

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden"
sys.path.insert(0, str(ROOT / "python"))

import convert_audio_mmproj as ca  # noqa: E402
import tiny_audio as ta  # noqa: E402

SUFFIXES = (".weight", ".bias", ".input_max", ".input_min", ".output_max", ".output_min")


def llamacpp_name(hf: str, n_blocks: int) -> str:
    """The name llama.cpp's converter gives an HF audio tensor: its renames (audio tower →
    `conformer.`, `.linear.` dropped, `.weight` added to per_dim_scale), then the tensor map."""
    name = hf.replace("model.audio_tower.", "conformer.").replace(".linear.", ".")
    if name.endswith("per_dim_scale"):
        name += ".weight"
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, n_blocks)
    got = tmap.get_name(name, try_suffixes=SUFFIXES)
    assert got is not None, name
    return got


def test_names_are_llamacpp_names():
    opts = ta.PRESETS["e"]
    names = [n for n, _ in ta.tensor_shapes(opts)]
    assert len(names) > 100
    for hf in names:
        assert ca.gguf_name(hf) == llamacpp_name(hf, opts["layers"]), hf
    # the swap: transformers' pre-conv norm is written as conv_norm, its post-conv norm as norm_conv
    assert ca.gguf_name("model.audio_tower.layers.0.lconv1d.pre_layer_norm.weight") == "a.blk.0.conv_norm.weight"
    assert ca.gguf_name("model.audio_tower.layers.0.lconv1d.conv_norm.weight") == "a.blk.0.norm_conv.weight"
    assert ca.gguf_name("model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight") is None


def test_fixture_file_layout():
    opts = ta.PRESETS["e"]
    r = GGUFReader(GOLDEN / "tiny-audio-e.mmproj.f32.gguf")
    kv = {f.name: f.contents() for f in r.fields.values()}
    assert kv["general.architecture"] == "clip"
    assert kv["clip.audio.projector_type"] == "gemma4a"
    assert kv["clip.has_audio_encoder"] is True
    expect = {"clip.audio.num_mel_bins": 128, "clip.audio.embedding_length": opts["hidden"],
              "clip.audio.feed_forward_length": 4 * opts["hidden"], "clip.audio.block_count": opts["layers"],
              "clip.audio.attention.head_count": opts["heads"], "clip.audio.projection_dim": opts["text_hidden"]}
    for k, v in expect.items():
        assert kv[k] == v, k
    tensors = {t.name: t for t in r.tensors}
    state = ta.draw_state(351, opts)
    d, hd = opts["hidden"], opts["hidden"] // opts["heads"]
    pds = tensors["a.blk.1.per_dim_scale.weight"]
    raw = state["model.audio_tower.layers.1.self_attn.per_dim_scale"]
    assert list(pds.shape) == [hd]
    assert np.allclose(pds.data, [math.log1p(math.exp(float(x))) for x in raw], rtol=1e-6)
    assert list(tensors["a.blk.0.conv_dw.weight"].shape) == [ta.CONV_KERNEL, d]
    assert list(tensors["a.conv1d.1.weight"].shape) == [3, 3, 128, opts["conv_channels"][1]]
    assert list(tensors["a.blk.0.attn_q.input_max"].shape) == [1]
    assert tensors["a.pre_encode.out.bias"].data.shape == (opts["output_proj_dims"],)
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in r.tensors)


def _write_safetensors(path: pathlib.Path, tensors: dict) -> None:
    """A minimal .safetensors file (F32 only): 8-byte header length, JSON header, data."""
    import json
    header, blobs, at = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(arr)), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    path.write_bytes(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def test_checkpoint_with_vision_and_audio_gives_one_mmproj(tmp_path):
    """convert_hf_to_gguf.py --mmproj on an E2B-like checkpoint (vision and audio configs):
    one file with both projector types, the vision tensors and exactly the audio tensors (same
    bytes) the audio-only fixture holds."""
    import json
    import convert_hf_to_gguf as conv
    import tiny_vision as tv
    vopts, aopts = tv.PRESETS["e"], ta.PRESETS["e"]
    state = {**tv.draw_state(341, vopts), **ta.draw_state(351, aopts)}
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({
        "text_config": {"hidden_size": aopts["text_hidden"]}, "vision_config": tv.hf_vision_config(vopts),
        "audio_config": ta.hf_audio_config(aopts)}))
    _write_safetensors(ckpt / "model.safetensors", state)
    out = tmp_path / "mmproj.gguf"
    conv.convert_mmproj(ckpt, out, "f32", verbose=False)
    r = GGUFReader(out)
    kv = {f.name: f.contents() for f in r.fields.values()}
    assert kv["clip.vision.projector_type"] == "gemma4v" and kv["clip.audio.projector_type"] == "gemma4a"
    both = {t.name: t for t in r.tensors}
    audio_only = {t.name: t for t in GGUFReader(GOLDEN / "tiny-audio-e.mmproj.f32.gguf").tensors}
    vision_only = {t.name for t in GGUFReader(GOLDEN / "tiny-vision-e.mmproj.f32.gguf").tensors}
    assert set(both) == set(audio_only) | vision_only
    for name, t in audio_only.items():
        assert np.array_equal(both[name].data, t.data), name
