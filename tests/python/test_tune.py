"""`sluice tune` and the tuning cache (apps/sluice/tuner.h, src/tune/tune_cache.h): the record
is written atomically under XDG_CACHE_HOME, bench reads it back and says so, a corrupt file is
ignored with a warning and replaced, a calibration that ran out of its budget is remembered
(the next run does not calibrate) until `tune --force`, and --no-tune / SLUICE_NO_TUNE=1 keep the defaults and
write nothing. One thread, so the cache key's placement is the same in every run. No timing
is asserted: the tiny model only exercises the machinery."""
import json
import os

from conftest import ROOT, run

MODEL = ROOT / "tests/data/golden/tiny-gemma4.q4_0.gguf"
BENCH = ["bench", "-m", MODEL, "-t", "1", "-p", "8", "-n", "4", "--depths", "0", "--repeats", "1",
         "--bandwidth-gib", "0.0625", "--json"]


def env_for(cache, tune=True):
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_NO_TUNE"}
    env["XDG_CACHE_HOME"] = str(cache)
    if not tune:
        env["SLUICE_NO_TUNE"] = "1"
    return env


def cache_files(cache):
    d = cache / "sluice"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_tune_writes_a_record_that_bench_reads_from_the_cache(sluice_bin, tmp_path):
    r = run([sluice_bin, "tune", "-m", MODEL, "-t", "1", "--json"], env=env_for(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    files = cache_files(tmp_path)
    assert len(files) == 1 and files[0].startswith("tune-") and files[0].endswith(".json"), files  # no temporary
    assert json.loads((tmp_path / "sluice" / files[0]).read_text()) == rec
    assert rec["key"]["threads"] == 1 and rec["key"]["placement"] == "one thread"
    assert [p["tokens"] for p in rec["step_cost"]["curve"]] == [1, 2, 4, 8, 16, 32]
    assert rec["step_cost"]["curve"][0]["relative"] == 1.0
    assert all(p["relative"] > 0 for p in rec["step_cost"]["curve"])
    assert set(rec["tuning"]) == {"weight_ahead", "act_ahead", "streams", "interleave", "split_div"}

    b = run([sluice_bin, *BENCH], env=env_for(tmp_path), timeout=120)
    assert b.returncode == 0, b.stderr
    j = json.loads(b.stdout)
    assert j["tuning"]["source"] == "cache" and j["tuning"]["from_cache"] is True
    assert j["tuning"]["tuning"] == rec["tuning"]
    assert j["cpu_model"] == rec["key"]["cpu_model"] != ""
    assert j["placement"] == rec["key"]["placement"]  # bench and the cache key classify alike
    assert "tuning the kernels" not in b.stderr


def test_a_corrupt_cache_file_is_ignored_with_a_warning_and_replaced(sluice_bin, tmp_path):
    r = run([sluice_bin, "tune", "-m", MODEL, "-t", "1", "--json"], env=env_for(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "sluice" / cache_files(tmp_path)[0]
    path.write_text('{"version": 1, "key": {')
    b = run([sluice_bin, *BENCH], env=env_for(tmp_path), timeout=120)
    assert b.returncode == 0, b.stderr
    assert "ignoring the tuning cache" in b.stderr and str(path) in b.stderr, b.stderr
    assert json.loads(b.stdout)["tuning"]["source"] == "calibrated"
    assert json.loads(path.read_text())["key"] == json.loads(r.stdout)["key"]  # a whole record again


def test_no_tune_and_the_environment_keep_the_defaults_and_write_nothing(sluice_bin, tmp_path):
    defaults = {"weight_ahead": {"q4_0x16": 0, "q5_0x16": 0, "q8_0x16": 0, "q6_Kx16": 8192}, "act_ahead": 4,
                "streams": 1, "interleave": 1, "split_div": 4}
    for args, env in (([*BENCH, "--no-tune"], env_for(tmp_path)), (BENCH, env_for(tmp_path, tune=False))):
        b = run([sluice_bin, *args], env=env, timeout=120)
        assert b.returncode == 0, b.stderr
        t = json.loads(b.stdout)["tuning"]
        assert t["source"].startswith("defaults") and t["from_cache"] is False
        assert t["tuning"] == defaults
        assert cache_files(tmp_path) == []
    r = run([sluice_bin, "tune", "-m", MODEL, "--no-tune"], env=env_for(tmp_path), timeout=60)
    assert r.returncode != 0 and "contradicts" in r.stderr


def test_a_forward_is_bit_identical_under_cached_non_default_parameters(sluice_bin, tmp_path):
    """The whole model under other streaming parameters (read from the cache as a tuned host
    would) gives the same logits, bit for bit, as under the defaults."""
    r = run([sluice_bin, "tune", "-m", MODEL, "-t", "1", "--json"], env=env_for(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "sluice" / cache_files(tmp_path)[0]
    rec = json.loads(r.stdout)
    rec["tuning"] = {"weight_ahead": {"q4_0x16": 1024, "q5_0x16": 64, "q8_0x16": 4096, "q6_Kx16": 2048},
                     "act_ahead": 8, "streams": 3, "interleave": 2, "split_div": 1}
    path.write_text(json.dumps(rec))
    ids = ",".join(str(20 + 7 * i) for i in range(12))
    outs = []
    for extra in ([], ["--no-tune"]):
        out = tmp_path / f"logits{len(outs)}.bin"
        lr = run([sluice_bin, "logits", "-m", MODEL, "-t", "1", "--ids", ids, "--out", out, *extra],
                 env=env_for(tmp_path), timeout=120)
        assert lr.returncode == 0, lr.stderr
        outs.append(out.read_bytes())
    b = run([sluice_bin, *BENCH], env=env_for(tmp_path), timeout=120)
    assert json.loads(b.stdout)["tuning"]["tuning"]["streams"] == 3  # the edited record was used
    assert len(outs[0]) > 0 and outs[0] == outs[1]


def test_a_calibration_out_of_time_is_remembered_until_tune_force(sluice_bin, tmp_path):
    """A forced budget (SLUICE_TUNE_BUDGET_S) too small for one round: the run uses the defaults
    and caches the failure with its reason; the next run, with the normal budget, starts
    without calibrating; `sluice tune --force` calibrates and replaces the record."""
    starved = {**env_for(tmp_path), "SLUICE_TUNE_BUDGET_S": "0.000001"}
    b = run([sluice_bin, *BENCH], env=starved, timeout=120)
    assert b.returncode == 0, b.stderr
    assert "tuning the kernels" in b.stderr and "ran out of its 0 s budget" in b.stderr, b.stderr
    assert json.loads(b.stdout)["tuning"]["source"].startswith("defaults (calibration ran out")
    files = cache_files(tmp_path)
    assert len(files) == 1, files
    rec = json.loads((tmp_path / "sluice" / files[0]).read_text())
    assert "budget" in rec["failed"] and rec["key"]["placement"] == "one thread"

    again = run([sluice_bin, *BENCH], env=env_for(tmp_path), timeout=120)
    assert again.returncode == 0, again.stderr
    assert "tuning the kernels" not in again.stderr, again.stderr
    t = json.loads(again.stdout)["tuning"]
    assert "failed here before" in t["source"] and "--force" in t["source"] and t["from_cache"] is False

    r = run([sluice_bin, "tune", "-m", MODEL, "-t", "1", "--force", "--json"], env=env_for(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "failed" not in json.loads(r.stdout)
    assert "failed" not in json.loads((tmp_path / "sluice" / files[0]).read_text())
    last = run([sluice_bin, *BENCH], env=env_for(tmp_path), timeout=120)
    assert json.loads(last.stdout)["tuning"]["source"] == "cache"


def test_a_bad_budget_is_a_clear_error(sluice_bin, tmp_path):
    b = run([sluice_bin, *BENCH], env={**env_for(tmp_path), "SLUICE_TUNE_BUDGET_S": "soon"}, timeout=120)
    assert b.returncode != 0 and "SLUICE_TUNE_BUDGET_S must be a positive number" in b.stderr, b.stderr
