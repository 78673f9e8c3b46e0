"""python/bench.py (the `make bench` harness) driven by stand-in tools written by this test:
a fake `sluice bench` printing the JSON contract of python/README.md "Benchmarks", a fake
llamacpp_bench.py and a fake llama-bench printing `-o json`'s list of tests. They are test
doubles for the harness's interleaving, argument passing, parsing and arithmetic; nothing is timed."""
import json
import os
import sys
import textwrap

from conftest import ROOT, run

BENCH = [sys.executable, str(ROOT / "python" / "bench.py")]

FAKE = textwrap.dedent("""\
    #!{py}
    # TEST DOUBLE ({who}): records its arguments and prints fixed numbers.
    import json, sys
    args = sys.argv[1:]
    with open({log!r}, "a") as f:
        f.write(json.dumps([{who!r}] + args) + "\\n")
    if {fail!r}:
        print("The following argument was not expected: bench", file=sys.stderr)
        sys.exit(109)
    depths = [int(x) for x in args[args.index("--depths") + 1].split(",")]
    n_prompt = int(args[args.index("-p") + 1])
    ms = {decode_ms!r}
    batch = int(args[args.index("--batch") + 1]) if "--batch" in args else 1
    out = {{"prefill": {{"tokens": n_prompt, "ms": 1000.0, "tokens_per_s": {prefill_tps!r}}},
           "decode": [{{"depth": d, "ms_per_token": (ms + d / 512) / batch, "ms_per_step": ms + d / 512,
                       "tokens_per_s": batch * 1e3 / (ms + d / 512)}} for d in depths]}}
    if {who!r} == "sluice":
        held = b"x" * (200 << 20)   # 200 MB written, so resident: the harness reports the peak RSS
        out.update({{"model": "fake", "threads": 2, "isa": "avx512", "kv_type": "f16", "bandwidth_gbs": 27.0,
                     "core_round_trip_ns": 300.0, "bytes_per_token": 1.35e9, "floor_ms": 50.0}})
        for d in out["decode"]:
            d["floor_ms"] = 50.0
            d["efficiency"] = 50.0 / d["ms_per_token"]
            d["classes"] = {{"ffn_gate_up": {{"ms": 20.0, "bytes": 5.4e8, "gbs": 27.0}}}}
        print("a log line before the object")
    print(json.dumps(out))
""")


def fake(tmp_path, who, log, fail=False, decode_ms=50.0, prefill_tps=250.0):
    p = tmp_path / f"fake-{who}"
    p.write_text(FAKE.format(py=sys.executable, who=who, log=str(log), fail=fail, decode_ms=decode_ms,
                             prefill_tps=prefill_tps))
    p.chmod(0o755)
    return p


def setup(tmp_path, sluice_fail=False):
    log = tmp_path / "calls.log"
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    s = fake(tmp_path, "sluice", log, fail=sluice_fail, decode_ms=50.0, prefill_tps=250.0)
    ll = fake(tmp_path, "llama", log, decode_ms=60.0, prefill_tps=100.0)
    return log, model, s, ll


def test_interleaves_and_reports_speedups(tmp_path):
    log, model, s, ll = setup(tmp_path)
    out = tmp_path / "res.json"
    r = run(BENCH + ["--model", model, "--sluice", s, "--peer", "llama-cpp-python", "--llamacpp", str(ll), "--rounds", "3", "--threads", "2",
                     "--prompt", "128", "--depths", "0,512", "--n-decode", "8", "--kv-type", "f16", "--out", out])
    assert r.returncode == 0, r.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[0] for c in calls] == ["sluice", "llama"] * 3
    # The file is read into the page cache once, before the first round of either engine.
    assert 0 <= r.stderr.index("[m.gguf] read 0.00 GB into the page cache") < r.stderr.index("round 1/3")
    for c in calls:
        args = c[1:]
        if c[0] == "sluice":
            assert args[:3] == ["bench", "-m", str(model)]
        else:
            assert args[:2] == ["--model", str(model)]
        tail = args[-13:]   # same settings for both engines
        assert tail == ["-t", "2", "-p", "128", "-n", "8", "--depths", "0,512", "--repeats", "1",
                        "--kv-type", "f16", "--json"]
    res = json.loads(out.read_text())
    summ = res["models"][0]["summary"]
    assert summ["speedup"]["prefill"] == 2.5
    assert abs(summ["speedup"]["decode"]["0"] - 60 / 50) < 1e-12
    assert abs(summ["speedup"]["decode"]["512"] - 61 / 51) < 1e-12
    assert summ["sluice"]["bandwidth_gbs"] == 27.0
    assert summ["sluice"]["core_round_trip_ns"] == 300.0
    assert abs(summ["sluice"]["efficiency"]["512"] - 50 / 51) < 1e-12
    assert abs(summ["llama.cpp"]["efficiency_vs_sluice_floor"]["0"] - 50 / 60) < 1e-12
    assert len(res["models"][0]["runs"]) == 6
    assert "1.20x" in r.stdout and "2.50x" in r.stdout and "27.0 GB/s" in r.stdout
    assert "core-to-core round trip 300 ns" in r.stdout
    # peak RSS of every run, from the kernel's account of each child
    rss = {e: [x["peak_rss_mb"] for x in res["models"][0]["runs"] if x["engine"] == e] for e in ("sluice", "llama.cpp")}
    assert all(200 < x < 400 for x in rss["sluice"]) and all(1 < x < 150 for x in rss["llama.cpp"]), rss
    assert summ["sluice"]["peak_rss_mb"] == max(rss["sluice"])
    assert "peak RSS, MB" in r.stdout


def test_missing_binaries_are_named(tmp_path):
    log, model, s, ll = setup(tmp_path)
    r = run(BENCH + ["--model", model, "--sluice", tmp_path / "nope", "--peer", "llama-cpp-python",
                     "--llamacpp", f"{tmp_path / 'nopy'} x.py"])
    assert r.returncode == 1
    assert "make build" in r.stderr and "make bench-venv" in r.stderr
    r = run(BENCH + ["--model", model, "--sluice", s, "--llama-bench", tmp_path / "no-llama-bench"])
    assert r.returncode == 1 and "make llamacpp-tools" in r.stderr
    r = run(BENCH + ["--model", tmp_path / "none.gguf", "--sluice", s, "--llamacpp", str(ll)])
    assert r.returncode == 1 and "none.gguf does not exist" in r.stderr
    assert not log.exists()


def test_failing_tool_stops_with_its_message(tmp_path):
    log, model, s, ll = setup(tmp_path, sluice_fail=True)
    r = run(BENCH + ["--model", model, "--sluice", s, "--peer", "llama-cpp-python", "--llamacpp", str(ll),
                     "--out", tmp_path / "r.json"])
    assert r.returncode == 1
    assert "sluice bench failed (exit 109)" in r.stderr and "not expected: bench" in r.stderr
    assert not os.path.exists(tmp_path / "r.json")


LLAMA_BENCH = textwrap.dedent("""\
    #!{py}
    # TEST DOUBLE (llama-bench): records its arguments, prints -o json's list of tests.
    import json, sys
    args = sys.argv[1:]
    with open({log!r}, "a") as f:
        f.write(json.dumps(["llama-bench"] + args) + "\\n")
    get = lambda k: args[args.index(k) + 1]
    p, n = int(get("-p")), int(get("-n"))
    tests = []
    for d in [int(x) for x in get("-d").split(",")]:
        if p > 0:  # as llama-bench: no prompt test for -p 0, no generation test for -n 0
            tests.append({{"build_commit": "0c1e57098", "n_prompt": p, "n_gen": 0, "n_depth": d,
                           "avg_ns": p * 10_000_000 * (1 + d / 512), "avg_ts": 100.0 / (1 + d / 512)}})
    for d in [int(x) for x in get("-d").split(",")]:
        if n > 0:
            tests.append({{"build_commit": "0c1e57098", "n_prompt": 0, "n_gen": n, "n_depth": d,
                       "avg_ns": n * (60.0 + d / 512) * 1e6, "avg_ts": 1e3 / (60.0 + d / 512)}})
    print("main: a log line")
    print(json.dumps(tests, indent=2))
""")


def test_native_llama_bench_and_batched_row(tmp_path):
    """The default peer is llama-bench: its prompt test at depth 0 is the prefill, its generation
    tests the decode per depth (avg_ns / n_gen); --batch 8 adds a sluice run per round; a MoE
    run (ffn_experts bytes) is held to the MoE thresholds."""
    log, model, s, _ = setup(tmp_path)
    lb = tmp_path / "llama-bench"
    lb.write_text(LLAMA_BENCH.format(py=sys.executable, log=str(log)))
    lb.chmod(0o755)
    out = tmp_path / "res.json"
    r = run(BENCH + ["--model", model, "--sluice", s, "--llama-bench", lb, "--rounds", "2", "--prompt", "512",
                     "--depths", "0,512", "--n-decode", "8", "--llama-bench-n", "128", "--batch", "8", "--out", out])
    assert r.returncode == 0, r.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # llama-bench: the prompt and depth 0 in one run, depth 512 in a run of its own (a decode after
    # llama-bench restores a saved depth is not what a llama.cpp user gets: bench.py's docstring)
    assert [c[0] for c in calls] == ["sluice", "llama-bench", "llama-bench", "sluice"] * 2
    assert calls[1][1:] == ["-m", str(model), "-t", "2", "-p", "512", "-n", "128", "-d", "0", "-r", "1",
                            "-ctk", "f16", "-ctv", "f16", "-o", "json"]
    assert calls[2][1:] == ["-m", str(model), "-t", "2", "-p", "0", "-n", "128", "-d", "512", "-r", "1",
                            "-ctk", "f16", "-ctv", "f16", "-o", "json"]
    assert "--batch" in calls[3] and calls[3][calls[3].index("--batch") + 1] == "8"
    m = json.loads(out.read_text())["models"][0]
    summ = m["summary"]
    assert summ["llama.cpp"]["prefill_tps"] == 100.0
    assert abs(summ["llama.cpp"]["decode_ms"]["512"] - 61.0) < 1e-9
    assert abs(summ["speedup"]["decode"]["0"] - 60 / 50) < 1e-12
    assert m["info"]["llama.cpp"]["llama_cpp_commit"] == "0c1e57098"
    assert "at commit 0c1e57098" in r.stdout
    # the fake sluice's step takes 50 ms at depth 0 whatever --batch: 8 sequences a step are
    # 8 x 20 tokens/s in all
    b = summ["batch"]
    assert b["sequences"] == 8 and abs(b["ratio"] - 8.0) < 1e-12 and len(b["rounds"]) == 2
    assert "8.00x one sequence" in r.stdout
    assert all(isinstance(x, float) for x in summ["sluice"]["load_average"])
    assert "load average" in r.stdout


def test_llama_bench_without_a_depth_is_an_error(tmp_path):
    log, model, s, _ = setup(tmp_path)
    lb = tmp_path / "llama-bench"
    lb.write_text(LLAMA_BENCH.format(py=sys.executable, log=str(log)).replace('get("-d").split(",")', '["0"]'))
    lb.chmod(0o755)
    r = run(BENCH + ["--model", model, "--sluice", s, "--llama-bench", lb, "--rounds", "1", "--depths", "0,512",
                     "--out", tmp_path / "r.json"])
    assert r.returncode == 1 and "no generation test at depth(s) [512]" in r.stderr
