"""`sluice run --mmproj FILE --image PATH`: every way the files can be wrong is a clear error
(the success path is tests/unit/models/vision_test.cpp's, through the model and the engine:
the tiny vocabularies have no image markers)."""
from conftest import ROOT, run

GOLDEN = ROOT / "tests/data/golden"
MODEL = GOLDEN / "tiny-gemma4.f32.gguf"
MMPROJ = GOLDEN / "tiny-vision-e.mmproj.f32.gguf"
PNG = GOLDEN / "vision/decode/png_rgb.png"


def sluice_run(sluice_bin, *args):
    r = run([sluice_bin, "run", "-p", "hi", "-n", "1", *map(str, args)], timeout=120)
    assert r.returncode != 0, r.stdout
    assert "error" in r.stderr and "Segmentation" not in r.stderr, r.stderr
    return r.stderr


def test_image_needs_an_mmproj(sluice_bin):
    assert "--image needs --mmproj" in sluice_run(sluice_bin, "-m", MODEL, "--image", PNG)


def test_wrong_or_mismatched_mmproj(sluice_bin):
    assert "not an mmproj file" in sluice_run(sluice_bin, "-m", MODEL, "--mmproj", GOLDEN / "tiny-gemma3.f32.gguf",
                                              "--image", PNG)
    err = sluice_run(sluice_bin, "-m", GOLDEN / "tiny-gemma4-draft.f32.gguf", "--mmproj", MMPROJ, "--image", PNG)
    assert "outputs width 64 but the model's embedding width is 32" in err
    assert "feeds Gemma 4 models" in sluice_run(sluice_bin, "-m", GOLDEN / "tiny-gemma3.f32.gguf", "--mmproj", MMPROJ,
                                                "--image", PNG)
    assert "cannot open" in sluice_run(sluice_bin, "-m", MODEL, "--mmproj", GOLDEN / "missing.gguf", "--image", PNG)


def test_bad_images(sluice_bin, tmp_path):
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(PNG.read_bytes()[:200])
    bmp = tmp_path / "pic.bmp"
    bmp.write_bytes(b"BM" + bytes(60))
    for path, why in ((tmp_path / "none.png", "cannot open image file"), (truncated, "corrupt PNG"),
                      (bmp, "BMP images are not supported")):
        err = sluice_run(sluice_bin, "-m", MODEL, "--mmproj", MMPROJ, "--image", path)
        assert why in err and str(path) in err, err
    assert "--image-tokens 100" in sluice_run(sluice_bin, "-m", MODEL, "--mmproj", MMPROJ, "--image", PNG,
                                              "--image-tokens", "100")


def test_a_vocabulary_without_image_markers_is_named(sluice_bin):
    err = sluice_run(sluice_bin, "-m", MODEL, "--mmproj", MMPROJ, "--image", PNG)
    assert "has no '<|image|>' token" in err
