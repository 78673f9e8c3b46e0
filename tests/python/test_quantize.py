"""`sluice quantize` writes the same tensor bytes as our Python converter (which quantizes with
the PyPI gguf package, an implementation we did not write)."""
import numpy as np
import pytest
from gguf import GGUFReader

from conftest import ROOT, run

GOLDEN = ROOT / "tests/data/golden"


@pytest.mark.parametrize("model", ["tiny-gemma4", "tiny-gemma3"])
@pytest.mark.parametrize("qtype", ["q8_0", "q4_0"])
def test_tensors_identical_to_gguf_package(sluice_bin, tmp_path, model, qtype):
    out = tmp_path / f"{model}.{qtype}.gguf"
    r = run([sluice_bin, "quantize", GOLDEN / f"{model}.f32.gguf", out, qtype])
    assert r.returncode == 0, r.stderr
    ours = {t.name: t for t in GGUFReader(out).tensors}
    ref = {t.name: t for t in GGUFReader(GOLDEN / f"{model}.{qtype}.gguf").tensors}
    assert set(ours) == set(ref)
    for name, t in ref.items():
        assert ours[name].tensor_type == t.tensor_type, name
        assert np.array_equal(np.asarray(ours[name].data).view(np.uint8), np.asarray(t.data).view(np.uint8)), name
    # The result is a valid file sluice inspects.
    assert run([sluice_bin, "inspect", out]).returncode == 0


def test_embedding_type_and_errors(sluice_bin, tmp_path):
    src = GOLDEN / "tiny-gemma4.f32.gguf"
    out = tmp_path / "mixed.gguf"
    r = run([sluice_bin, "quantize", src, out, "q4_0", "--embd-type", "q8_0"])
    assert r.returncode == 0, r.stderr
    types = {t.name: t.tensor_type.name for t in GGUFReader(out).tensors}
    assert types["token_embd.weight"] == "Q8_0" and types["blk.0.attn_q.weight"] == "Q4_0"
    assert types["blk.0.attn_norm.weight"] == "F32"
    for bad in (["q9_9"], ["iq2_xxs"]):
        r = run([sluice_bin, "quantize", src, tmp_path / "x.gguf", *bad])
        assert r.returncode != 0 and "error" in r.stderr
