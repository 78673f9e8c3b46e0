"""One copy of the weights (docs/architecture.md, "One copy of the weights"): once `sluice
inspect --load` or `sluice bench` has loaded (repacked) a model, the process holds each weight
once, and the load's peak is no higher. The file is E2B-shaped with random weights
(python/make_e2b_shaped.py, ~190 MB, a few seconds to write): a second copy of its matrices
(the file's pages beside the repacked bytes, as before the loader released them) is ~150 MB
over the bound, far past what the process itself holds (binary, libraries, heap, stacks,
metadata pages: ~20 MB)."""
import json
import sys

import pytest

from conftest import ROOT, run

GEN = [sys.executable, str(ROOT / "python" / "make_e2b_shaped.py")]
# 10 layers (4 of them KV-shared) of width 1024, FFN 4096, vocabulary 16384: 188 MB, of which
# 140 MB repacked matrices, a tied Q6_K embedding table and a 40 MB PLE table read in place.
SHAPE = ["--layers", "10", "--shared-kv-layers", "4", "--hidden", "1024", "--ffn", "4096", "--vocab", "16384"]
ALLOWANCE = 48 << 20  # the process's own memory, beside the weights


@pytest.fixture(scope="module")
def medium(tmp_path_factory):
    path = tmp_path_factory.mktemp("one_copy") / "medium.gguf"
    r = run(GEN + [path] + SHAPE)
    assert r.returncode == 0, r.stderr
    return path


def bound(size):
    return 1.1 * size + ALLOWANCE


def test_inspect_load_holds_the_weights_once(medium, sluice_bin):
    size = medium.stat().st_size
    r = run([sluice_bin, "inspect", medium, "--load", "--json", "--no-tensors", "-t", "2"])
    assert r.returncode == 0, r.stderr
    load = json.loads(r.stdout)["load"]
    mem = load["memory"]
    assert mem["file_bytes"] == size
    assert mem["rss_after_load"] <= bound(size), (mem, size)
    assert mem["peak_rss"] <= bound(size), (mem, size)
    # The weights are resident (the bound is not met by leaving them on disk): every matrix is
    # repacked into anonymous memory and the PLE table is mapped in.
    assert mem["rss_after_load"] - mem["rss_before"] >= 0.8 * size, (mem, size)
    assert any("q4_0x16" in w for w in load["weights"])
    r = run([sluice_bin, "inspect", medium, "--load", "--no-tensors", "-t", "2"])
    assert r.returncode == 0 and "resident after load" in r.stdout and "x the file" in r.stdout, r.stdout


def test_bench_reports_resident_memory_and_its_peak(medium, sluice_bin):
    size = medium.stat().st_size
    r = run([sluice_bin, "bench", "-m", medium, "-t", "2", "-p", "8", "-n", "2", "--depths", "0", "--repeats", "1",
             "--bandwidth-gib", "0.0625", "--json"])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    mem = j["memory"]
    assert mem["file_bytes"] == size
    assert mem["rss_after_load"] <= mem["peak_rss_after_load"] <= mem["peak_rss"]
    assert mem["peak_rss_after_load"] <= bound(size), (mem, size)
    # the run adds step buffers, not a copy of the weights: its bandwidth probe reads them
    assert j["bandwidth_probe_reads_weights"] and j["bandwidth_probe_bytes"] == 64 << 20
    assert mem["peak_rss"] <= bound(size), (mem, size)
    r = run([sluice_bin, "bench", "-m", medium, "-t", "2", "-p", "8", "-n", "2", "--depths", "0", "--repeats", "1",
             "--bandwidth-gib", "0.0625"])
    assert r.returncode == 0 and "memory: resident after load" in r.stdout, r.stdout
