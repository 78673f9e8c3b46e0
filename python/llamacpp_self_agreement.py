"""How closely does llama.cpp agree with ITSELF on the real Gemma 3 270M? The models issue asks
sluice's greedy continuations to follow llama.cpp's (tests/data/llamacpp/gemma3-270m.json,
written by make_llamacpp_golden.py from a GGML_NATIVE=OFF build) and to part only where
llama.cpp's top two logits are closer than 0.05. This replays the same 10 prompts through
another llama.cpp configuration and reports where IT parts from the golden run, and at what gap.

    .venv-bench/bin/python python/llamacpp_self_agreement.py [--model F] [--flash-attn]

Any llama-cpp-python environment works (.venv-bench is built with GGML_NATIVE=ON: the same
llama.cpp commit and settings, compiled for this CPU's AVX-512). Not part of `make test`.
"""
import argparse
import json
import pathlib

import numpy as np
from llama_cpp import Llama, __version__ as llama_cpp_version

ROOT = pathlib.Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests/data/llamacpp/gemma3-270m.json"
MAX_GAP = 0.05


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    p.add_argument("--flash-attn", action="store_true", help="also turn flash attention on")
    a = p.parse_args()
    golden = json.loads(GOLDEN.read_text())
    # The settings of make_llamacpp_golden.py, plus the one under test.
    llm = Llama(model_path=a.model, n_ctx=512, n_batch=512, n_threads=2, logits_all=True, verbose=False, seed=0,
                flash_attn=a.flash_attn)
    print(f"llama-cpp-python {llama_cpp_version}, flash_attn={a.flash_attn}; golden from "
          f"llama-cpp-python {golden['llama_cpp_python']}")
    wide = 0
    for e in golden["greedy"]:
        llm.reset()
        llm.eval(e["prompt_ids"])
        for step, want in enumerate(e["tokens"]):
            got = int(np.argmax(np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)))
            if got != want:
                gap = e["top2_gap"][step]
                wide += gap >= MAX_GAP
                print(f"  {e['prompt'][:36]!r:40s} parts at token {step:2d}, golden top-2 gap {gap:.3f}")
                break
            llm.eval([got])
        else:
            print(f"  {e['prompt'][:36]!r:40s} all {len(e['tokens'])} tokens identical")
    print(f"{wide} of {len(golden['greedy'])} prompts part at a gap >= {MAX_GAP}")


if __name__ == "__main__":
    main()
