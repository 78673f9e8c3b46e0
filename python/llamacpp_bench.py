#!/usr/bin/env python3
"""llama.cpp's side of `make bench`: prefill and decode speed of one GGUF file, measured
through llama-cpp-python's low-level API (the C functions, no Python-side sampling or
tokenization in the timed region).

    .venv-bench/bin/python python/llamacpp_bench.py --model models/gemma4-e2b-shaped-q4_0.gguf \
        --threads 2 --prompt 512 --depths 0,512 --n-decode 32 --repeats 3 --kv-type f16 --json

What is timed (time.perf_counter around llama_decode + llama_synchronize, nothing else):
  * prefill: one batch of --prompt random token ids at positions 0..P-1 in an empty KV cache
    (n_batch = n_ubatch = max(P, 512), so it is one ubatch; logits for the last token only,
    as llama-bench does). Reported: the median over the repeats, as tokens/s.
  * decode at depth D: the KV cache is cleared and filled with D random tokens (untimed, in
    n_batch pieces), then --n-decode single-token batches at positions D, D+1, ... are timed
    one by one (each produces logits, as in generation). Reported: the median ms/token over
    all tokens of all repeats, with the 10th/90th percentiles.
  * Before the repeats, one untimed warm-up (a 32-token batch and one decode) pages in the
    weights and builds the graphs. The KV cache is cleared between every measurement.
Token ids are drawn uniformly from [min(1000, V/4), V) with --seed, so they are valid ids and
not control tokens in Gemma vocabularies; what they are does not change the work done.
The same thread count is used for batch and single-token decodes (n_threads = n_threads_batch).
The sliding-window layers get a window-sized KV cache (swa_full = false, the default of
llama.cpp's own tools; the library default is a full-context one, --swa-full).

The JSON reports llama-cpp-python's version, the vendored llama.cpp commit, ggml's version,
llama.cpp's system info (which SIMD it was built for: AVX512 = 1 with GGML_NATIVE=ON on an
AVX-512 machine), the flash-attention setting requested and what llama.cpp resolved it to
(from its log), and the KV cache type.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import pathlib
import random
import re
import statistics
import sys
import time

# llama.cpp commit vendored by each llama-cpp-python release (its CHANGELOG: "update llama.cpp to
# ggml-org/llama.cpp@..."); the sdist has no .git, so the library itself reports "unknown".
VENDORED_COMMIT = {"0.3.36": "0c1e57098"}
# ggml_type enum values (ggml.h)
KV_TYPES = {"f32": 0, "f16": 1, "q8_0": 8, "bf16": 30}
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


def die(msg: str) -> None:
    print(f"llamacpp_bench: {msg}", file=sys.stderr)
    sys.exit(1)


def parse_depths(text: str) -> list[int]:
    try:
        depths = [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--depths wants comma-separated integers, got {text!r}")
    if not depths or any(d < 0 for d in depths):
        raise argparse.ArgumentTypeError(f"--depths wants non-negative integers, got {text!r}")
    return depths


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class LogCapture:
    """Routes llama.cpp's log to a list (and to stderr with --verbose)."""

    def __init__(self, llama_cpp, verbose: bool):
        self.lines: list[str] = []
        self._partial = ""
        self.verbose = verbose

        @llama_cpp.llama_log_callback
        def cb(level, text, user_data):
            t = text.decode("utf-8", "replace") if text else ""
            if verbose:
                sys.stderr.write(t)
            self._partial += t
            while "\n" in self._partial:
                line, self._partial = self._partial.split("\n", 1)
                self.lines.append(line)

        self._cb = cb   # keep the ctypes callback alive
        llama_cpp.llama_log_set(cb, ctypes.c_void_p(0))

    def find(self, pattern: str) -> list[str]:
        r = re.compile(pattern)
        return [ln for ln in self.lines if r.search(ln)]


def ggml_info(llama_cpp) -> dict:
    """ggml_version()/ggml_commit() from the libggml-base shipped next to libllama."""
    out = {}
    libdir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    for cand in sorted(libdir.glob("libggml-base.so*")):
        try:
            lib = ctypes.CDLL(str(cand))
            for fn in ("ggml_version", "ggml_commit"):
                f = getattr(lib, fn)
                f.restype = ctypes.c_char_p
                out[fn] = f().decode()
            break
        except (OSError, AttributeError):
            continue
    return out


class Bench:
    def __init__(self, llama_cpp, args):
        self.L = llama_cpp
        self.a = args
        L = llama_cpp
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = L.llama_model_load_from_file(str(args.model).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {args.model} (run with --verbose for its log)")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.n_batch = max(args.prompt, 512)
        need = max([args.prompt] + [d + args.n_decode for d in args.depths]) + 16
        cp = L.llama_context_default_params()
        cp.n_ctx = need
        cp.n_batch = self.n_batch
        cp.n_ubatch = self.n_batch
        cp.n_seq_max = 1
        cp.n_threads = args.threads
        cp.n_threads_batch = args.threads
        cp.type_k = KV_TYPES[args.kv_type]
        cp.type_v = KV_TYPES[args.kv_type]
        cp.flash_attn_type = FLASH_ATTN[args.flash_attn]
        # The library default keeps a full-context SWA cache; llama.cpp's tools (common params)
        # default to the window-sized one, which is also what sluice does. Say which in the JSON.
        cp.swa_full = args.swa_full
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context (run with --verbose for its log)")
        self.n_ctx = L.llama_n_ctx(self.ctx)
        self.mem = L.llama_get_memory(self.ctx)
        self.batch = L.llama_batch_init(self.n_batch, 0, 1)
        lo = min(1000, self.n_vocab // 4)
        self.rng = random.Random(args.seed)
        self.token_range = (lo, self.n_vocab)

    def close(self):
        L = self.L
        L.llama_batch_free(self.batch)
        L.llama_free(self.ctx)
        L.llama_model_free(self.model)

    def tokens(self, n: int) -> list[int]:
        return [self.rng.randrange(*self.token_range) for _ in range(n)]

    def clear(self):
        self.L.llama_memory_clear(self.mem, True)

    def decode(self, toks: list[int], pos0: int) -> float:
        """One llama_decode of `toks` at positions pos0..; logits for the last one. Returns seconds."""
        b = self.batch
        n = len(toks)
        for i, t in enumerate(toks):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == n - 1 else 0
        b.n_tokens = n
        t0 = time.perf_counter()
        rc = self.L.llama_decode(self.ctx, b)
        self.L.llama_synchronize(self.ctx)
        dt = time.perf_counter() - t0
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} (n_tokens {n}, pos {pos0})")
        return dt

    def fill(self, depth: int):
        pos = 0
        while pos < depth:
            n = min(self.n_batch, depth - pos)
            self.decode(self.tokens(n), pos)
            pos += n

    def run(self) -> dict:
        a = self.a
        # warm-up: page in the weights, build the batch and single-token graphs
        self.clear()
        self.decode(self.tokens(min(32, a.prompt)), 0)
        self.decode(self.tokens(1), min(32, a.prompt))
        prefill_ms: list[float] = []
        decode_ms: dict[int, list[float]] = {d: [] for d in a.depths}
        for _ in range(a.repeats):
            self.clear()
            prefill_ms.append(self.decode(self.tokens(a.prompt), 0) * 1e3)
            for d in a.depths:
                self.clear()
                self.fill(d)
                for i in range(a.n_decode):
                    decode_ms[d].append(self.decode(self.tokens(1), d + i) * 1e3)
        self.clear()
        pm = statistics.median(prefill_ms)
        return {
            "prefill": {"tokens": a.prompt, "ms": pm, "tokens_per_s": a.prompt / (pm / 1e3),
                        "runs_ms": prefill_ms},
            "decode": [{"depth": d, "ms_per_token": statistics.median(v), "tokens_per_s": 1e3 / statistics.median(v),
                        "p10_ms": percentile(v, 0.1), "p90_ms": percentile(v, 0.9), "samples": len(v)}
                       for d, v in decode_ms.items()],
        }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", "-m", required=True, type=pathlib.Path)
    p.add_argument("--threads", "-t", type=int, default=2)
    p.add_argument("--prompt", "-p", type=int, default=512, help="prefill tokens (one batch)")
    p.add_argument("--depths", type=parse_depths, default=[0, 512], help="KV depths for decode, e.g. 0,512")
    p.add_argument("--n-decode", "-n", type=int, default=32, help="timed single-token decodes per depth and repeat")
    p.add_argument("--repeats", "-r", type=int, default=3)
    p.add_argument("--kv-type", choices=sorted(KV_TYPES), default="f16")
    p.add_argument("--flash-attn", choices=sorted(FLASH_ATTN), default="auto",
                   help="llama.cpp's flash attention (default auto: llama.cpp's own default)")
    p.add_argument("--swa-full", action="store_true",
                   help="full-context cache for sliding-window layers (default: window-sized, as llama.cpp's tools)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--verbose", action="store_true", help="llama.cpp's log on stderr")
    a = p.parse_args(argv)
    for name in ("threads", "prompt", "n_decode", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if not a.model.is_file():
        die(f"model file {a.model} does not exist")
    try:
        import llama_cpp
    except ImportError as e:
        die(f"cannot import llama_cpp ({e}); build the bench environment with `make bench-venv` "
            f"and run this with .venv-bench/bin/python")

    log = LogCapture(llama_cpp, a.verbose)
    t0 = time.perf_counter()
    try:
        bench = Bench(llama_cpp, a)
    except RuntimeError as e:
        tail = "\n".join(log.lines[-5:])
        die(f"{e}\n{tail}")
    load_s = time.perf_counter() - t0
    try:
        res = bench.run()
    except RuntimeError as e:
        die(str(e))
    fa_lines = log.find(r"Flash Attention (enabled|not supported)|flash_attn\s+=")
    resolved = "unknown"
    for ln in fa_lines:
        if "Flash Attention enabled" in ln:
            resolved = "enabled"
        elif "Flash Attention not supported" in ln:
            resolved = "disabled"
    if a.flash_attn != "auto":
        resolved = "enabled" if a.flash_attn == "on" else "disabled"
    desc = ctypes.create_string_buffer(256)
    llama_cpp.llama_model_desc(bench.model, desc, len(desc))
    version = getattr(llama_cpp, "__version__", "unknown")
    out = {
        "engine": "llama.cpp",
        "llama_cpp_python": version,
        "llama_cpp_commit": VENDORED_COMMIT.get(version, "unknown"),
        **ggml_info(llama_cpp),
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "model": desc.value.decode(errors="replace"),
        "file": str(a.model),
        "model_bytes": llama_cpp.llama_model_size(bench.model),
        "threads": a.threads,
        "kv_type": a.kv_type,
        "flash_attn": {"requested": a.flash_attn, "resolved": resolved},
        "swa_full": a.swa_full,
        "n_ctx": bench.n_ctx, "n_batch": bench.n_batch, "n_ubatch": bench.n_batch,
        "repeats": a.repeats, "n_decode": a.n_decode, "seed": a.seed,
        "load_s": load_s,
        **res,
    }
    bench.close()
    if a.json:
        print(json.dumps(out))
    else:
        print(f"llama.cpp {out['llama_cpp_commit']} (llama-cpp-python {version}), {out['model']}, "
              f"{a.threads} threads, KV {a.kv_type}, flash attention {a.flash_attn} -> {resolved}")
        pf = out["prefill"]
        print(f"  prefill {pf['tokens']:5d} tokens  {pf['ms']:9.1f} ms  {pf['tokens_per_s']:8.1f} tokens/s")
        for d in out["decode"]:
            print(f"  decode  depth {d['depth']:5d}  {d['ms_per_token']:8.2f} ms/token "
                  f"(p10 {d['p10_ms']:.2f}, p90 {d['p90_ms']:.2f}, {d['samples']} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
