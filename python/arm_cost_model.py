#!/usr/bin/env python3
"""ARM cost model: llvm-mca throughput of the ARM64 kernels' inner loops on CPUs we cannot run on,
turned into a compute floor per Gemma 4 E2B decode token (docs/arm-cost-model.md).

For each kernel set (neon, dotprod, i8mm) a probe TU includes that set's file
(src/kernels/cpu/arm64/kernels_<set>.cpp) and adds one flattened function per kernel
(decode tiles: one activation row, a whole 16-row group). It is compiled to assembly with
clang-14 for aarch64 with the set's -march flags (the ones src/kernels/CMakeLists.txt gives the
product build; with --mcpu-compile each CPU's -mcpu instead). The innermost loop that holds the
kernel's multiplies is cut out by its labels and fed to llvm-mca-14 for each -mcpu. MACs per
iteration are counted from the multiply instructions (SDOT .4s: 16, SMMLA: 32, SMULL/SMULL2 .8h:
8, FMLA .4s: 4), so the same rule prices the peer: llama.cpp's repacked Q4_0 and Q6_K GEMVs,
compiled the same way from the sdist of
llama-cpp-python 0.3.36 given with --llama (nothing of it is kept).

The floor per token: MACs per token of each weight class (the E2B shapes of
python/make_e2b_shaped.py; the shared-KV layers compute no K/V) ÷ (MAC/cycle × cores × clock);
the bandwidth floor: the bytes those matrices occupy ÷ the memory bandwidth.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

CLANG = "clang++-14"
MCA = "llvm-mca-14"
CPUS = ["cortex-a55", "cortex-a76", "neoverse-n1", "neoverse-n2", "tsv110"]
# Which sets each CPU can run (Arm TRMs: A55/A76/N1 Armv8.2 + dotprod, N2 Armv9.0 + i8mm;
# TaiShan V110 Armv8.2 + dotprod).
CPU_SETS = {"cortex-a55": {"neon", "dotprod"}, "cortex-a76": {"neon", "dotprod"},
            "neoverse-n1": {"neon", "dotprod"}, "neoverse-n2": {"neon", "dotprod", "i8mm"},
            "tsv110": {"neon", "dotprod"}}
SET_MARCH = {"neon": "armv8-a", "dotprod": "armv8.2-a+dotprod", "i8mm": "armv8.2-a+dotprod+i8mm"}
MCA_ATTR = {"neon": "", "dotprod": "+dotprod", "i8mm": "+dotprod,+i8mm"}

# Our decode kernels: name -> (weight class, tile expression).
OURS = {
    "q4_0": ("q4_0", "tile_quant<FmtQ4_0, DotDecode, 4, 1>(p, 0, 0, 0)"),
    "q6_k": ("q6_k", "tile_quant<FmtQ6<false>, DotDecode, 4, 1>(p, 0, 0, 0)"),
    "q6_k8": ("q6_k8", "tile_quant<FmtQ6<true>, DotDecode, 4, 1>(p, 0, 0, 0)"),
    "bf16": ("bf16", "tile_float<FloatKind::kBF16, 4, 1>(p, 0, 0, 0)"),
    "q8_0": ("q8_0", "tile_quant<FmtQ8_0, DotDecode, 4, 1>(p, 0, 0, 0)"),
    "q4_k": ("q4_k", "tile_quant<FmtQ4_K, DotDecode, 4, 1>(p, 0, 0, 0)"),
}
# llama.cpp's ARM repacked Q4_0 GEMV (decode: one activation row) and the set it needs.
# (Their q4_0_8x8 GEMV is SVE-only, which LLVM 14 models for none of these CPUs; all of these need
# only dotprod.)
LLAMA = {"q4_0_4x4": ("q4_0", "ggml_gemv_q4_0_4x4_q8_0"), "q4_0_4x8": ("q4_0", "ggml_gemv_q4_0_4x8_q8_0"),
         "q6_K_8x4": ("q6_k", "ggml_gemv_q6_K_8x4_q8_K"), "q6_K_8x8": ("q6_k", "ggml_gemv_q6_K_8x8_q8_K")}

MAC_RULES = [  # (mnemonic regex, arrangement regex of the destination, MACs)
    (r"[su]dot", r"\.4s", 16), (r"[su]dot", r"\.2s", 8), (r"(su|us|s|u)mmla", r"", 32),
    (r"[su]mull2?", r"\.8h", 8), (r"fmla", r"\.4s", 4),
]
FLOAT_ONLY = {"bf16"}


def macs_of(line: str, floating: bool) -> int:
    parts = line.split(None, 1)
    if len(parts) < 2:
        return 0
    op, args = parts[0], parts[1]
    for mn, arr, n in MAC_RULES:
        if (mn == "fmla") != floating:
            continue
        if re.fullmatch(mn, op) and re.search(arr, args.split(",")[0]):
            return n
    return 0


def function_body(asm: str, symbol_part: str) -> list[str]:
    """The lines of the first function whose (mangled) name contains symbol_part."""
    lines = asm.splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r"^([\w.$]+):", ln)
        if m and symbol_part in m.group(1) and not m.group(1).startswith("."):
            out = []
            for l2 in lines[i + 1:]:
                if re.match(r"^\.Lfunc_end|^\s*\.size\s", l2):
                    return out
                out.append(l2)
    raise SystemExit(f"arm_cost_model: no function matching {symbol_part!r} in the assembly")


def innermost_mac_loop(body: list[str], floating: bool) -> tuple[list[str], int]:
    """The loop (label ... backward branch to it) with the most MACs and no inner loop holding
    MACs; returns its instructions (directives and labels dropped) and its MACs."""
    labels = {m.group(1): i for i, ln in enumerate(body) if (m := re.match(r"^(\.L\w+):", ln))}
    loops = []
    for j, ln in enumerate(body):
        t = ln.split("//")[0].strip()
        if not t or t.startswith("."):
            continue
        target = t.replace(",", " ").split()[-1]
        if target in labels and labels[target] < j and re.match(r"(b|b\.\w+|cbn?z|tbn?z)$", t.split()[0]):
            loops.append((labels[target], j))
    best = None
    for s, e in loops:
        insns = [ln.split("//")[0].strip() for ln in body[s + 1:e + 1]]
        insns = [x for x in insns if x and not x.startswith(".") and not x.endswith(":")]
        macs = sum(macs_of(x, floating) for x in insns)
        inner = any(s < s2 and e2 <= e and (s2, e2) != (s, e) and
                    sum(macs_of(x, floating) for x in body[s2:e2 + 1]) > 0 for s2, e2 in loops)
        if macs and not inner and (best is None or macs > best[1]):
            best = (insns, macs)
    if best is None:
        raise SystemExit("arm_cost_model: no loop with multiply instructions found")
    return best


def compile_asm(src: str, target: str, includes: list[pathlib.Path], tmp: pathlib.Path, name: str,
                lang: str = "c++") -> str:
    f = tmp / f"{name}.{'cpp' if lang == 'c++' else 'c'}"
    f.write_text(src)
    out = tmp / f"{name}.s"
    std = "-std=c++20" if lang == "c++" else "-std=c11"
    cmd = [CLANG, "-x", lang, "--target=aarch64-linux-gnu", std, "-O3", target, "-ffp-contract=off",
           "-fno-exceptions", "-w", "-S", str(f), "-o", str(out)] + [f"-I{i}" for i in includes]
    subprocess.run(cmd, check=True)
    return out.read_text()


def mca_cycles(insns: list[str], cpu: str, attr: str, tmp: pathlib.Path, tag: str) -> tuple[float, str]:
    """Steady-state cycles per iteration and the scheduling model's first resource name."""
    f = tmp / f"{tag}-{cpu}.s"
    f.write_text("\n".join(insns) + "\n")
    iters = 500
    cmd = [MCA, "-mtriple=aarch64", f"-mcpu={cpu}", f"-iterations={iters}", str(f)]
    if attr:
        cmd.insert(3, f"-mattr={attr}")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    total = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1))
    res = re.search(r"^\[[\d.]+\]\s+-\s+(\w+)", out, re.M)
    return total / iters, (res.group(1) if res else "?")


def our_probe(kset: str) -> str:
    fns = "\n".join(f"__attribute__((flatten)) void mca_probe_{k}(const GemmArgs& p) {{ {expr}; }}"
                    for k, (_, expr) in OURS.items())
    return f'#include "kernels/cpu/arm64/kernels_{kset}.cpp"\nnamespace sluice::kernels {{\n{fns}\n}}\n'


def llama_probe(llama: pathlib.Path) -> tuple[str, list[pathlib.Path]]:
    ggml = llama / "vendor/llama.cpp/ggml"
    src = ggml / "src/ggml-cpu/arch/arm/repack.cpp"
    if not src.exists():
        raise SystemExit(f"arm_cost_model: {src} not found (give the unpacked sdist's folder)")
    return (f'#include "{src}"\n', [ggml / "include", ggml / "src", ggml / "src/ggml-cpu"])


def weight_classes():
    """Per decode token: weight class -> (MACs, bytes) of the E2B shapes."""
    from make_e2b_shaped import Shape
    s = Shape()
    per_elem = {"q4_0": 18 / 32, "q6_k": 210 / 256, "bf16": 2.0}
    macs = {"q4_0": 0, "q6_k": s.hidden * s.vocab, "bf16": s.hidden * s.layers * s.ple}
    for il in range(s.layers):
        hd, ff = s.hd(il), s.n_ff(il)
        q, kv = s.heads * hd, s.kv_heads * hd
        kv_mats = 2 * s.hidden * kv if il < s.first_shared else 0
        macs["q4_0"] += s.hidden * q + kv_mats + q * s.hidden + 3 * s.hidden * ff + 2 * s.hidden * s.ple
    return {k: (v, v * per_elem[k]) for k, v in macs.items()}


def run(args) -> int:
    missing = [t for t in (CLANG, MCA) if shutil.which(t) is None]
    if missing:
        raise SystemExit(f"arm_cost_model: {', '.join(missing)} not found (Debian: apt-get install clang-14 llvm-14)")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return measure(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="arm-mca-") as tmp:
        return measure(args, pathlib.Path(tmp))


def cpu_flag(kset: str, cpu: str | None) -> str:
    """The compile's target flag: the set's -march (one binary for every board, as the product
    build), or with --mcpu-compile that CPU's -mcpu (+i8mm: clang 14's neoverse-n2 lacks it)."""
    if cpu is None:
        return f"-march={SET_MARCH[kset]}"
    return f"-mcpu={cpu}+i8mm" if kset == "i8mm" else f"-mcpu={cpu}"


def compile_all(args, tmp: pathlib.Path) -> dict:
    """Assembly per (who, set, cpu); cpu None when one compile serves every CPU."""
    targets = [(k, c) for c in CPUS for k in sorted(CPU_SETS[c])] if args.mcpu_compile else \
        [(k, None) for k in ("neon", "dotprod", "i8mm")]
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for kset, cpu in targets:
            jobs[("ours", kset, cpu)] = ex.submit(compile_asm, our_probe(kset), cpu_flag(kset, cpu), [ROOT / "src"],
                                                  tmp, f"ours-{kset}-{cpu}")
        if args.llama:
            src, inc = llama_probe(args.llama)
            for cpu in (CPUS if args.mcpu_compile else [None]):
                jobs[("llama", "dotprod", cpu)] = ex.submit(compile_asm, src, cpu_flag("dotprod", cpu), inc, tmp,
                                                            f"llama-dotprod-{cpu}")
        return {k: f.result() for k, f in jobs.items()}


def measure(args, tmp: pathlib.Path) -> int:
    """Compiles the probes into tmp, prices every loop on every CPU that runs its set, prints."""
    asm = compile_all(args, tmp)
    rows = []  # (who, kernel, set, cpu, insns, cycles, macs, model, weight class)
    for cpu in CPUS:
        key_cpu = cpu if args.mcpu_compile else None
        loops = []
        for kset in ("neon", "dotprod", "i8mm"):
            if kset not in CPU_SETS[cpu]:
                continue
            for k in OURS:
                body = function_body(asm[("ours", kset, key_cpu)], f"mca_probe_{k}E")
                loops.append(("sluice", k, kset, *innermost_mac_loop(body, k in FLOAT_ONLY), OURS[k][0]))
        if args.llama:
            for k, (wclass, fn) in LLAMA.items():
                body = function_body(asm[("llama", "dotprod", key_cpu)], fn)
                loops.append(("llama.cpp", k, "dotprod", *innermost_mac_loop(body, False), wclass))
        for who, k, kset, insns, macs, wclass in loops:
            cyc, model = mca_cycles(insns, cpu, MCA_ATTR[kset], tmp, f"{who}-{k}-{kset}")
            rows.append((who, k, kset, cpu, len(insns), cyc, macs, model, wclass))
    order = list(OURS) + list(LLAMA)
    sets = ["neon", "dotprod", "i8mm"]
    rows.sort(key=lambda r: (r[0] != "sluice", sets.index(r[2]), order.index(r[1]), CPUS.index(r[3])))
    print_tables(rows, args)
    return 0


def print_tables(rows, args) -> None:
    wc = weight_classes()
    rate = args.cores * args.ghz * 1e9
    ver = subprocess.run([MCA, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"LLVM version [\w.]+", ver)
    print(f"llvm-mca: {found.group(0) if found else ver.strip()}")
    print(f"floor: {args.cores} cores x {args.ghz} GHz; bandwidth {args.gbs} GB/s\n")
    print("| who | kernel | set | -mcpu | model (first resource) | insns/iter | cycles/iter | MACs/iter | "
          "MAC/cycle | class ms/token |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|")
    for who, k, kset, cpu, n, cyc, macs, model, wclass in rows:
        mpc = macs / cyc
        ms = f"{wc[wclass][0] / (mpc * rate) * 1e3:.2f}" if wclass in wc else "-"
        print(f"| {who} | {k} | {kset} | {cpu} | {model} | {n} | {cyc:.2f} | {macs} | {mpc:.2f} | {ms} |")
    print("\n| weight class | MACs/token | bytes/token | bandwidth floor ms |")
    print("|---|---:|---:|---:|")
    for k, (m, b) in wc.items():
        print(f"| {k} | {m / 1e6:.1f} M | {b / 1e6:.1f} MB | {b / (args.gbs * 1e9) * 1e3:.2f} |")
    tot_b = sum(b for _, b in wc.values())
    print(f"| all | {sum(m for m, _ in wc.values()) / 1e6:.1f} M | {tot_b / 1e6:.1f} MB | "
          f"{tot_b / (args.gbs * 1e9) * 1e3:.2f} |")
    print("\nCompute floor per token, best set each CPU runs (ms; the bf16 projection is sluice's in both):\n")
    print("| -mcpu | sluice q4_0 | llama.cpp q4_0 | sluice q6_k | llama.cpp q6_k | sluice total | "
          "sluice total, Q6_K8 lm_head | llama.cpp total |")
    print("|---|---|---|---|---|---:|---:|---:|")
    for cpu in CPUS:
        best = {}
        for who, k, kset, c, n, cyc, macs, model, wclass in rows:
            if c != cpu or (who == "sluice" and k != wclass) or wclass not in wc and wclass != "q6_k8":
                continue
            ms = wc["q6_k" if wclass == "q6_k8" else wclass][0] / (macs / cyc * rate) * 1e3
            if (who, wclass) not in best or ms < best[(who, wclass)][0]:
                best[(who, wclass)] = (ms, f"{k}/{kset}")

        def cell(who, w):
            return f"{best[(who, w)][0]:.1f} ({best[(who, w)][1]})" if (who, w) in best else "n/a"

        ours = sum(best[("sluice", w)][0] for w in ("q4_0", "q6_k", "bf16"))
        wide = ours - best[("sluice", "q6_k")][0] + best[("sluice", "q6_k8")][0]
        have = all(("llama.cpp", w) in best for w in ("q4_0", "q6_k"))
        peer = None
        if have:
            peer = best[("llama.cpp", "q4_0")][0] + best[("llama.cpp", "q6_k")][0] + best[("sluice", "bf16")][0]
        print(f"| {cpu} | {cell('sluice', 'q4_0')} | {cell('llama.cpp', 'q4_0')} | {cell('sluice', 'q6_k')} | "
              f"{cell('llama.cpp', 'q6_k')} | {ours:.1f} | {wide:.1f} | {f'{peer:.1f}' if peer else 'n/a'} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llama", type=pathlib.Path, help="unpacked llama-cpp-python 0.3.36 sdist folder (the peer)")
    p.add_argument("--cores", type=int, default=3)
    p.add_argument("--ghz", type=float, default=1.0)
    p.add_argument("--gbs", type=float, default=25.6)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--mcpu-compile", action="store_true",
                   help="compile once per CPU with its -mcpu instead of once per set with the set's -march")
    p.add_argument("--keep", type=pathlib.Path, help="keep the probes, assembly and cut loops in this folder")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
