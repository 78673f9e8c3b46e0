#!/usr/bin/env python3
"""`make bench`: sluice against llama.cpp on the same GGUF files, same threads, prompt length,
KV depths and KV type, run interleaved (sluice, llama.cpp, sluice, llama.cpp, ... for --rounds
rounds) so that a change in machine load hits both alike.

    python/bench.py [--model F ...] [--threads 2] [--prompt 512] [--depths 0,512] [--n-decode 32]
                    [--rounds 3] [--repeats 1] [--kv-type f16] [--batch 8] [--out bench-results.json]

Each round runs `sluice bench ... --json` (build/apps/sluice/sluice) and llama.cpp's own
`llama-bench -t T -p P -n G -d 0 -r R -ctk KV -ctv KV -o json` (.llamacpp/build/bin,
`make llamacpp-tools`: built natively from the sources the pinned llama-cpp-python sdist
vendors; G = --llama-bench-n, 128 by default, llama-bench's own tg128), then `-p 0 -d D -r 1`
once per deeper depth D and repeat (llama_bench_cmds says why); each reports medians over its
repeats. `--peer llama-cpp-python` uses python/llamacpp_bench.py in
.venv-bench instead (its AMX-less build is slow on Intel hosts). `--batch B` adds, in each round,
a sluice run decoding B sequences together at depth 0, reported as aggregate tokens/s against
one sequence. Each run's peak RSS is the kernel's account of the child (wait4). The table shows, per model, the median over the rounds: prefill tokens/s,
decode ms/token at each depth, the speedup of sluice (llama.cpp time / sluice time), and
sluice's measured bandwidth, decode floor (bytes per token / bandwidth) and efficiency
(floor / measured), plus llama.cpp's efficiency against the same floor. Everything, including
each round's raw output, goes to --out. Only the standard library is needed.

The only place that knows the shape of `sluice bench --json` is parse_sluice(); the one for
llamacpp_bench.py is parse_llamacpp().
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "models" / "gemma4-e2b-shaped-q4_0.gguf"
DEFAULT_SLUICE = ROOT / "build" / "apps" / "sluice" / "sluice"
DEFAULT_LLAMACPP = f"{ROOT / '.venv-bench' / 'bin' / 'python'} {ROOT / 'python' / 'llamacpp_bench.py'}"
DEFAULT_LLAMA_BENCH = ROOT / ".llamacpp" / "build" / "bin" / "llama-bench"


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------------
# Parsing: one function per engine, returning the same normalized record
#   {"prefill_tokens", "prefill_ms", "prefill_tps", "decode_ms": {depth: ms},
#    "bandwidth_gbs", "bytes_per_token", "floor_ms", "efficiency": {depth: e},
#    "classes": {depth: {...}}, "info": {...}}
# ---------------------------------------------------------------------------------------
def _one_json_object(stdout: str, who: str) -> dict:
    text = stdout.strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        # tolerate log lines before the object: take the last line that parses
        obj = None
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                    break
                except json.JSONDecodeError:
                    continue
        if obj is None:
            raise BenchError(f"{who} printed no JSON object on stdout; it printed:\n{text[:2000]}")
    if not isinstance(obj, dict):
        raise BenchError(f"{who} printed JSON that is not an object: {text[:200]}")
    return obj


def _need(obj: dict, path: str, who: str):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise BenchError(f"{who} JSON has no '{path}'")
        cur = cur[part]
    return cur


def parse_sluice(stdout: str) -> dict:
    """`sluice bench --json` (contract in python/README.md, "Benchmarks")."""
    who = "sluice bench"
    j = _one_json_object(stdout, who)
    decode = _need(j, "decode", who)
    if not isinstance(decode, list) or not decode:
        raise BenchError(f"{who} JSON 'decode' is not a non-empty list")
    return {
        "prefill_tokens": _need(j, "prefill.tokens", who),
        "prefill_ms": _need(j, "prefill.ms", who),
        "prefill_tps": _need(j, "prefill.tokens_per_s", who),
        "decode_ms": {int(d["depth"]): float(d["ms_per_token"]) for d in decode},
        "bandwidth_gbs": j.get("bandwidth_gbs"),
        "core_round_trip_ns": j.get("core_round_trip_ns"),
        "bytes_per_token": j.get("bytes_per_token"),
        "floor_ms": j.get("floor_ms"),
        "efficiency": {int(d["depth"]): d.get("efficiency") for d in decode},
        "rest_share": {int(d["depth"]): d.get("attention_other_share") for d in decode},
        "floor_ms_at": {int(d["depth"]): d.get("floor_ms", j.get("floor_ms")) for d in decode},
        "classes": {int(d["depth"]): d.get("classes") for d in decode if d.get("classes")},
        "info": {**{k: j.get(k) for k in ("model", "file", "arch", "threads", "isa", "kv_type", "cpu_model")},
                 # the kernel tuning in use (docs/performance.md "Tuning"): where it came from, its values
                 "tuning_source": (j.get("tuning") or {}).get("source"),
                 "tuning": (j.get("tuning") or {}).get("tuning")},
    }


def parse_llamacpp(stdout: str) -> dict:
    """python/llamacpp_bench.py --json."""
    who = "llamacpp_bench.py"
    j = _one_json_object(stdout, who)
    decode = _need(j, "decode", who)
    return {
        "prefill_tokens": _need(j, "prefill.tokens", who),
        "prefill_ms": _need(j, "prefill.ms", who),
        "prefill_tps": _need(j, "prefill.tokens_per_s", who),
        "decode_ms": {int(d["depth"]): float(d["ms_per_token"]) for d in decode},
        "info": {k: j.get(k) for k in ("model", "llama_cpp_python", "llama_cpp_commit", "ggml_version",
                                       "threads", "kv_type", "flash_attn", "system_info")},
    }


def parse_llama_bench(stdout: str, depths: list[int]) -> dict:
    """`llama-bench -o json`: a list of tests, one per (n_prompt, n_gen, n_depth); a prompt test
    (n_gen 0) at depth 0 gives the prefill, a generation test (n_prompt 0) at each depth the decode
    (avg_ns over n_gen tokens)."""
    who = "llama-bench"
    text = stdout.strip()
    try:
        tests = json.loads(text[text.index("["):])
    except (ValueError, json.JSONDecodeError):
        raise BenchError(f"{who} printed no JSON list on stdout; it printed:\n{text[:2000]}")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, dict) for t in tests):
        raise BenchError(f"{who} JSON is not a non-empty list of tests: {text[:200]}")
    pre = [t for t in tests if t.get("n_gen") == 0 and t.get("n_prompt", 0) > 0 and t.get("n_depth", 0) == 0]
    if not pre:
        raise BenchError(f"{who} JSON has no prompt test at depth 0")
    per_depth = {}   # several runs at one depth (repeats): their median
    for t in tests:
        if t.get("n_prompt") == 0 and t.get("n_gen", 0) > 0:
            per_depth.setdefault(int(t.get("n_depth", 0)), []).append(t["avg_ns"] / t["n_gen"] / 1e6)
    dec = {d: statistics.median(v) for d, v in per_depth.items()}
    missing = [d for d in depths if d not in dec]
    if missing:
        raise BenchError(f"{who} JSON has no generation test at depth(s) {missing}")
    first = tests[0]
    return {
        "prefill_tokens": pre[0]["n_prompt"],
        "prefill_ms": pre[0]["avg_ns"] / 1e6,
        "prefill_tps": pre[0]["avg_ts"],
        "decode_ms": dec,
        "info": {"engine": "llama-bench", "llama_cpp_commit": first.get("build_commit"),
                 **{k: first.get(k) for k in ("build_number", "cpu_info", "backends", "model_type", "model_size",
                                              "model_n_params", "n_threads", "type_k", "type_v", "flash_attn", "load_mode", "repack",
                                              "n_batch", "n_ubatch")}},
    }


# ---------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------
def run_tool(cmd: list[str], who: str, timeout: float) -> tuple[str, float, float]:
    """(stdout, wall seconds, peak RSS in MB) of one run; the peak RSS is the kernel's own
    account of the child (wait4's ru_maxrss), so no sampling can miss it."""
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise BenchError(f"{who}: cannot run {cmd[0]} (not found)")
    except PermissionError:
        raise BenchError(f"{who}: cannot run {cmd[0]} (not executable)")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        out, err = pool.submit(p.stdout.read), pool.submit(p.stderr.read)
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                p.kill()
                os.wait4(p.pid, 0)
                raise BenchError(f"{who}: still running after {timeout:.0f} s: {shlex.join(cmd)}")
            time.sleep(0.02)
        stdout, stderr = out.result(), err.result()
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = "\n".join((stderr or stdout).strip().splitlines()[-15:])
        raise BenchError(f"{who} failed (exit {p.returncode}): {shlex.join(cmd)}\n{tail}")
    return stdout, wall, usage.ru_maxrss / 1024


def common_args(a) -> list[str]:
    return ["-t", str(a.threads), "-p", str(a.prompt), "-n", str(a.n_decode),
            "--depths", ",".join(map(str, a.depths)), "--repeats", str(a.repeats), "--kv-type", a.kv_type, "--json"]


def sluice_cmd(a, model) -> list[str]:
    return [str(a.sluice), "bench", "-m", str(model)] + common_args(a)


def llamacpp_cmd(a, model) -> list[str]:
    return shlex.split(a.llamacpp) + ["--model", str(model)] + common_args(a)


def llama_bench_cmds(a, model) -> list[list[str]]:
    """llama-bench's runs: the prompt and the decode at depth 0 in one, then each deeper decode
    in runs of its own, one repeat each. In one run with several depths, llama-bench fills the
    depth once per depth (its prompt test) and restores the saved state for the generation test;
    on Gemma 4 a decode after that restore ran 2.9 tokens/s where the same depth filled afresh
    ran 22.5 (E2B-shaped, depth 512, commit 0c1e57098), which no user of llama.cpp sees."""
    def cmd(p, d, r):
        return [str(a.llama_bench), "-m", str(model), "-t", str(a.threads), "-p", str(p), "-n", str(a.llama_bench_n),
                "-d", str(d), "-r", str(r), "-ctk", a.kv_type, "-ctv", a.kv_type, "-o", "json"]
    return [cmd(a.prompt, 0, a.repeats)] + [cmd(0, d, 1) for d in a.depths if d > 0 for _ in range(a.repeats)]


def run_llama_bench(a, model, timeout) -> tuple[str, float, float, list[list[str]]]:
    """The runs of llama_bench_cmds as one: their tests in one JSON list, the summed wall time and
    the largest peak RSS."""
    tests, wall, rss, cmds = [], 0.0, 0.0, llama_bench_cmds(a, model)
    for c in cmds:
        out, w, r = run_tool(c, "llama-bench", timeout)
        text = out.strip()
        try:
            tests += json.loads(text[text.index("["):])
        except (ValueError, json.JSONDecodeError):
            raise BenchError(f"llama-bench printed no JSON list on stdout; it printed:\n{text[:2000]}")
        wall, rss = wall + w, max(rss, r)
    return json.dumps(tests), wall, rss, cmds


def batch_cmd(a, model) -> list[str]:
    """--batch B: B sequences decoded together at depth 0 after a short prompt each."""
    return [str(a.sluice), "bench", "-m", str(model), "-t", str(a.threads), "-p", "16", "-n", str(a.n_decode),
            "--depths", "0", "--repeats", str(a.repeats), "--kv-type", a.kv_type, "--batch", str(a.batch), "--json"]


def load_average() -> float | None:
    try:
        return float(pathlib.Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs: list[dict], depths: list[int]) -> dict:
    """Median over rounds of each number (and min/max of the headline ones)."""
    if not runs:
        return {}
    s = {
        "rounds": len(runs),
        "prefill_tps": median_or_none([r["prefill_tps"] for r in runs]),
        "prefill_tps_range": [min(r["prefill_tps"] for r in runs), max(r["prefill_tps"] for r in runs)],
        "decode_ms": {}, "decode_ms_range": {},
        "peak_rss_mb": max((r.get("peak_rss_mb") or 0 for r in runs), default=None),
        "load_average": [r.get("load_average") for r in runs],
    }
    for d in depths:
        v = [r["decode_ms"][d] for r in runs if d in r["decode_ms"]]
        if not v:
            raise BenchError(f"no decode result at depth {d}")
        s["decode_ms"][d] = statistics.median(v)
        s["decode_ms_range"][d] = [min(v), max(v)]
    if "bandwidth_gbs" in runs[0]:
        s["bandwidth_gbs"] = median_or_none([r["bandwidth_gbs"] for r in runs])
        s["core_round_trip_ns"] = median_or_none([r.get("core_round_trip_ns") for r in runs])
        s["bytes_per_token"] = runs[0]["bytes_per_token"]
        s["floor_ms"] = {d: median_or_none([r["floor_ms_at"].get(d) for r in runs]) for d in depths}
        s["efficiency"] = {d: median_or_none([r["efficiency"].get(d) for r in runs]) for d in depths}
        s["rest_share"] = {d: median_or_none([r.get("rest_share", {}).get(d) for r in runs]) for d in depths}
        s["bw_fraction"] = {
            d: {c: median_or_none([(r["classes"].get(d) or {}).get(c, {}).get("bw_fraction") for r in runs])
                for c in WEIGHT_CLASSES}
            for d in depths}
        s["classes"] = runs[len(runs) // 2].get("classes", {})   # one round's breakdown (the middle one)
    return s


# Op classes that stream weights, with the share of the measured read bandwidth each must reach
# (the performance issue's acceptance), and the other checks it states.
# ffn_experts: a MoE layer's picked experts (the bytes they actually read; gemma4.md §2.9).
WEIGHT_CLASSES = {"ffn_gate_up": 0.85, "ffn_down": 0.85, "ffn_experts": 0.85, "attn_qkv": 0.85, "attn_output": 0.85,
                  "lm_head": 0.90}
MAX_REST_SHARE = 0.08          # attention + everything else, of a decode step at the deepest depth
MIN_EFFICIENCY = 1 / 1.10      # decode within 1.10x of the floor
MIN_DECODE_SPEEDUP = {0: 1.15, 512: 1.25}
MIN_PREFILL_SPEEDUP = 2.0
# The mixture-of-experts issue's (26B-A4B): the floor counts the bytes the picked experts read.
MOE_MIN_DECODE_SPEEDUP = 1.3
MOE_MIN_EFFICIENCY = 0.85
MOE_MIN_BATCH_RATIO = 2.5      # aggregate tokens/s of --batch 8 over one sequence
MAX_PEAK_RSS_OVER_FILE = 1.1


def is_moe(sl: dict) -> bool:
    """A run whose decode steps streamed expert weights (the ffn_experts class)."""
    return any(((c or {}).get("ffn_experts") or {}).get("bytes") for c in (sl.get("classes") or {}).values())


def checks(res: dict, depths: list[int]) -> list[tuple[str, float, float, bool]]:
    """(what, measured, threshold, ok) for the acceptance points of the performance issue: all
    of them for a Gemma 4 file (the E2B-shaped one), "at least as fast as llama.cpp" for others
    (the real Gemma 3 270M)."""
    s = res["summary"]
    sl, sp = s.get("sluice") or {}, s.get("speedup")
    out = []
    arch = ((res.get("info") or {}).get("sluice") or {}).get("arch")
    if arch != "gemma4":
        if sp:
            for d in depths:
                out.append((f"decode speedup over llama.cpp @{d}", sp["decode"][d], 1.0, sp["decode"][d] >= 1.0))
            out.append(("prefill speedup over llama.cpp", sp["prefill"], 1.0, sp["prefill"] >= 1.0))
        return out
    moe = is_moe(sl)
    min_eff = MOE_MIN_EFFICIENCY if moe else MIN_EFFICIENCY
    for d in depths:
        for c, need in WEIGHT_CLASSES.items():
            v = (sl.get("bw_fraction") or {}).get(d, {}).get(c)
            if c == "ffn_experts" and not moe:
                continue  # a dense model has no experts: their share reads 0 and means nothing
            if v is not None:
                out.append((f"{c} share of bandwidth @{d}", v, need, v >= need))
        e = (sl.get("efficiency") or {}).get(d)
        if e is not None:
            out.append((f"decode efficiency (floor / measured) @{d}", e, min_eff, e >= min_eff))
    deepest = max(depths)
    r = (sl.get("rest_share") or {}).get(deepest)
    if r is not None:
        out.append((f"attention + other share of a step @{deepest}", r, MAX_REST_SHARE, r < MAX_REST_SHARE))
    if sp:
        for d in depths:
            need = MOE_MIN_DECODE_SPEEDUP if moe else MIN_DECODE_SPEEDUP.get(d, 1.0)
            out.append((f"decode speedup over llama.cpp @{d}", sp["decode"][d], need, sp["decode"][d] >= need))
        out.append(("prefill speedup over llama.cpp", sp["prefill"], MIN_PREFILL_SPEEDUP, sp["prefill"] >= MIN_PREFILL_SPEEDUP))
    b = s.get("batch")
    if moe and b:
        out.append((f"{b['sequences']}-sequence step, aggregate tokens/s over one sequence", b["ratio"],
                    MOE_MIN_BATCH_RATIO, b["ratio"] >= MOE_MIN_BATCH_RATIO))
    model = pathlib.Path(res["model"])
    if moe and sl.get("peak_rss_mb") and model.is_file():
        r = sl["peak_rss_mb"] * 1048576 / model.stat().st_size
        out.append(("sluice peak RSS / file size", r, MAX_PEAK_RSS_OVER_FILE, r <= MAX_PEAK_RSS_OVER_FILE))
    return out


def warm_page_cache(model: pathlib.Path, log) -> None:
    """Reads the file once so both engines start with it in the page cache. Both map it, and a
    decode step touches each new token's embedding rows at first use: on a cold cache the first
    engine and depth would pay disk reads (measured: a depth-0 "other" of 9.3 ms instead of ~2)."""
    t0 = time.monotonic()
    buf = bytearray(1 << 24)   # one buffer for every chunk
    with open(model, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    log(f"[{model.name}] read {model.stat().st_size / 1e9:.2f} GB into the page cache in {time.monotonic() - t0:.1f} s")


def bench_model(a, model: pathlib.Path, log) -> dict:
    warm_page_cache(model, log)
    runs = {"sluice": [], "llama.cpp": []}
    batched = []   # (sluice aggregate tokens/s at --batch, load average)
    raw = []
    engines = ["sluice", "llama.cpp"] + (["sluice-batch"] if a.batch > 1 else [])
    for r in range(a.rounds):
        for engine in engines:
            if engine in a.skip or (engine == "sluice-batch" and "sluice" in a.skip):
                continue
            who = {"sluice": "sluice bench", "sluice-batch": "sluice bench --batch",
                   "llama.cpp": "llama-bench" if a.peer == "llama-bench" else "llamacpp_bench.py"}[engine]
            load = load_average()
            log(f"[{model.name}] round {r + 1}/{a.rounds}: {engine} (load average {load}) ...")
            if who == "llama-bench":
                out, wall, rss_mb, cmd = run_llama_bench(a, model, a.timeout)
            else:
                cmd = {"sluice": sluice_cmd, "llama.cpp": llamacpp_cmd, "sluice-batch": batch_cmd}[engine](a, model)
                out, wall, rss_mb = run_tool(cmd, who, a.timeout)
            if engine == "sluice-batch":
                dec = _need(_one_json_object(out, who), "decode", who)[0]
                batched.append({"tokens_per_s": _need(dec, "tokens_per_s", who), "ms_per_step": _need(dec, "ms_per_step", who),
                                "load_average": load, "peak_rss_mb": rss_mb})
                raw.append({"round": r + 1, "engine": engine, "cmd": cmd, "wall_s": wall, "peak_rss_mb": rss_mb,
                            "load_average": load, "output": _one_json_object(out, who)})
                continue
            if engine == "sluice":
                parsed = parse_sluice(out)
            elif a.peer == "llama-bench":
                parsed = parse_llama_bench(out, a.depths)
            else:
                parsed = parse_llamacpp(out)
            parsed["peak_rss_mb"] = rss_mb
            parsed["load_average"] = load
            runs[engine].append(parsed)
            output = json.loads(out[out.index("["):]) if who == "llama-bench" else _one_json_object(out, who)
            raw.append({"round": r + 1, "engine": engine, "cmd": cmd, "wall_s": wall, "peak_rss_mb": rss_mb,
                        "load_average": load, "output": output})
    summary = {e: summarize(v, a.depths) for e, v in runs.items() if v}
    if batched and summary.get("sluice") and 0 in summary["sluice"]["decode_ms"]:
        one = 1e3 / summary["sluice"]["decode_ms"][0]
        agg = statistics.median(b["tokens_per_s"] for b in batched)
        summary["batch"] = {"sequences": a.batch, "tokens_per_s": agg, "one_sequence_tokens_per_s": one,
                            "ratio": agg / one, "rounds": batched}
    sl, ll = summary.get("sluice"), summary.get("llama.cpp")
    if sl and ll:
        summary["speedup"] = {
            "prefill": sl["prefill_tps"] / ll["prefill_tps"],
            "decode": {d: ll["decode_ms"][d] / sl["decode_ms"][d] for d in a.depths},
        }
        if sl.get("floor_ms"):
            ll["efficiency_vs_sluice_floor"] = {
                d: (sl["floor_ms"][d] / ll["decode_ms"][d]) if sl["floor_ms"].get(d) else None for d in a.depths}
    info = {e: v[0]["info"] for e, v in runs.items() if v}
    res = {"model": str(model), "summary": summary, "info": info, "runs": raw}
    res["checks"] = [{"what": w, "value": v, "threshold": t, "ok": ok} for w, v, t, ok in checks(res, a.depths)]
    return res


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_table(res: dict, a, out=sys.stdout) -> None:
    s = res["summary"]
    sl, ll, sp = s.get("sluice"), s.get("llama.cpp"), s.get("speedup")
    name = pathlib.Path(res["model"]).name
    print(f"\n{name}: {a.threads} threads, prompt {a.prompt}, {a.n_decode} decodes per depth, KV {a.kv_type}, "
          f"median of {a.rounds} interleaved round(s)", file=out)
    print(f"  {'':24s} {'sluice':>10s} {'llama.cpp':>10s} {'speedup':>9s}", file=out)
    rows = [("prefill tokens/s", sl and sl["prefill_tps"], ll and ll["prefill_tps"], sp and sp["prefill"])]
    for d in a.depths:
        rows.append((f"decode ms/token @{d}", sl and sl["decode_ms"][d], ll and ll["decode_ms"][d],
                     sp and sp["decode"][d]))
    rows.append(("peak RSS, MB", sl and sl.get("peak_rss_mb"), ll and ll.get("peak_rss_mb"), None))
    for label, x, y, r in rows:
        print(f"  {label:24s} {fmt(x, '10.2f')} {fmt(y, '10.2f')} {fmt(r, '8.2f')}{'x' if r else ' '}", file=out)
    size = pathlib.Path(res["model"]).stat().st_size if pathlib.Path(res["model"]).is_file() else None
    if size:
        print(f"  peak RSS / file ({size / 1e6:.0f} MB): sluice {fmt(sl and sl.get('peak_rss_mb') and sl['peak_rss_mb'] * 1048576 / size, '.2f')}, "
              f"llama.cpp {fmt(ll and ll.get('peak_rss_mb') and ll['peak_rss_mb'] * 1048576 / size, '.2f')}", file=out)
    print(f"  load average at each run's start: sluice {(sl or {}).get('load_average')}, "
          f"llama.cpp {(ll or {}).get('load_average')}", file=out)
    ll_info = (res.get("info") or {}).get("llama.cpp") or {}
    if ll_info.get("llama_cpp_commit"):
        print(f"  llama.cpp: {ll_info.get('engine', 'llama-cpp-python')} at commit {ll_info['llama_cpp_commit']}", file=out)
    b = s.get("batch")
    if b:
        print(f"  sluice, {b['sequences']} sequences a step at depth 0: {b['tokens_per_s']:.2f} tokens/s in all, "
              f"{b['ratio']:.2f}x one sequence ({b['one_sequence_tokens_per_s']:.2f} tokens/s)", file=out)
    if sl and sl.get("bandwidth_gbs") is not None:
        bpt = sl.get("bytes_per_token")
        print(f"  sluice: bandwidth {fmt(sl['bandwidth_gbs'], '.1f')} GB/s, "
              f"{fmt(bpt / 1e6 if bpt else None, '.1f')} MB/token, "
              f"core-to-core round trip {fmt(sl.get('core_round_trip_ns'), '.0f')} ns", file=out)
        si = (res.get("info") or {}).get("sluice") or {}
        if si.get("cpu_model"):
            print(f"  sluice: cpu {si['cpu_model']}, tuning {si.get('tuning_source')}: "
                  f"{json.dumps(si.get('tuning'), sort_keys=True)}", file=out)
        for d in a.depths:
            e_ll = (ll or {}).get("efficiency_vs_sluice_floor", {}).get(d)
            print(f"    depth {d:5d}: floor {fmt(sl['floor_ms'].get(d), '.2f')} ms, "
                  f"efficiency sluice {fmt(sl['efficiency'].get(d), '.2f')}, llama.cpp {fmt(e_ll, '.2f')}", file=out)
        for d in a.depths:
            fr = (sl.get("bw_fraction") or {}).get(d, {})
            if fr:
                print(f"    share of the bandwidth @{d} (median of per-burst ratios): " +
                      ", ".join(f"{c} {fmt(v, '.2f')}" for c, v in fr.items()), file=out)
        for d, classes in sorted(sl.get("classes", {}).items()):
            parts = []
            for cname, c in classes.items():
                if isinstance(c, dict):
                    parts.append(f"{cname} {fmt(c.get('ms'), '.1f')} ms/{fmt(c.get('gbs'), '.1f')} GB/s")
            if parts:
                print(f"    classes @{d}: " + ", ".join(parts), file=out)
    cks = checks(res, a.depths)
    if cks:
        print("  checks (performance issue's thresholds):", file=out)
        for what, v, need, ok in cks:
            print(f"    {'PASS' if ok else 'FAIL'}  {what}: {v:.3f} (needs {'<' if 'share of a step' in what else '<=' if 'RSS' in what else '>='} {need:.3f})",
                  file=out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", "-m", action="append", type=pathlib.Path,
                   help=f"GGUF file; repeat for several (default {DEFAULT_MODEL.relative_to(ROOT)})")
    p.add_argument("--threads", "-t", type=int, default=2)
    p.add_argument("--prompt", "-p", type=int, default=512)
    p.add_argument("--depths", default="0,512")
    p.add_argument("--n-decode", "-n", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3, help="interleaved sluice/llama.cpp rounds")
    p.add_argument("--repeats", type=int, default=1, help="repeats inside each tool run")
    p.add_argument("--kv-type", default="f16")
    p.add_argument("--sluice", type=pathlib.Path, default=DEFAULT_SLUICE, help="the sluice binary")
    p.add_argument("--llamacpp", default=DEFAULT_LLAMACPP,
                   help="command that runs llamacpp_bench.py (default: .venv-bench's python + the script)")
    p.add_argument("--peer", choices=["llama-bench", "llama-cpp-python"], default="llama-bench",
                   help="llama.cpp's side: its native llama-bench (default) or python/llamacpp_bench.py")
    p.add_argument("--llama-bench", type=pathlib.Path, default=DEFAULT_LLAMA_BENCH,
                   help="the llama-bench binary (make llamacpp-tools)")
    p.add_argument("--llama-bench-n", type=int, default=128, help="llama-bench's generated tokens per test (-n)")
    p.add_argument("--batch", type=int, default=1, help="also time sluice decoding this many sequences a step")
    p.add_argument("--skip", action="append", default=[], choices=["sluice", "llama.cpp"],
                   help="leave one engine out")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per tool run")
    p.add_argument("--out", type=pathlib.Path, default=ROOT / "bench-results.json")
    a = p.parse_args(argv)
    try:
        a.depths = [int(x) for x in a.depths.split(",") if x.strip()]
    except ValueError:
        p.error(f"--depths wants comma-separated integers, got {a.depths!r}")
    if not a.depths or any(d < 0 for d in a.depths):
        p.error("--depths wants non-negative integers")
    for n in ("threads", "prompt", "n_decode", "rounds", "repeats", "llama_bench_n", "batch"):
        if getattr(a, n) < 1:
            p.error(f"--{n.replace('_', '-')} must be >= 1")
    models = a.model or [DEFAULT_MODEL]

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    problems = [f"model file {m} does not exist" for m in models if not m.is_file()]
    if "sluice" not in a.skip and not (a.sluice.is_file() and os.access(a.sluice, os.X_OK)):
        problems.append(f"sluice binary {a.sluice} is missing: run `make build`")
    if "llama.cpp" not in a.skip:
        exe = shlex.split(a.llamacpp)[0] if a.peer == "llama-cpp-python" else str(a.llama_bench)
        fix = "make bench-venv` (builds llama-cpp-python" if a.peer == "llama-cpp-python" else \
            "make llamacpp-tools` (builds llama-bench"
        if not (pathlib.Path(exe).is_file() and os.access(exe, os.X_OK)):
            problems.append(f"{exe} is missing: run `{fix}, ~10-20 min)")
    if problems:
        print("bench: " + "\nbench: ".join(problems), file=sys.stderr)
        return 1

    results = {"config": {"threads": a.threads, "prompt": a.prompt, "depths": a.depths, "n_decode": a.n_decode,
                          "rounds": a.rounds, "repeats": a.repeats, "kv_type": a.kv_type,
                          "sluice": str(a.sluice), "peer": a.peer,
                          "llamacpp": str(a.llama_bench) if a.peer == "llama-bench" else a.llamacpp,
                          "llama_bench_n": a.llama_bench_n, "batch": a.batch},
               "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "models": []}
    try:
        for m in models:
            res = bench_model(a, m, log)
            results["models"].append(res)
            print_table(res, a)
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        if results["models"]:
            a.out.write_text(json.dumps(results, indent=1) + "\n")
            log(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
