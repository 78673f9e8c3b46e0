"""Golden data for the real Gemma 3 270M file from llama.cpp (PyPI llama-cpp-python), an
implementation we did not write. Run from .venv-golden (make golden):

    .venv-golden/bin/python python/make_llamacpp_golden.py models/gemma-3-270m-q4_k_m.gguf

Writes tests/data/llamacpp/gemma3-270m.json with
  * greedy: for 10 varied prompts, llama.cpp's prompt ids, its 64 greedy tokens and, at each
    step, the gap between its top two logits (a divergence is only allowed where that gap is
    below 0.05);
  * perplexity: over tests/data/text/gpl-3.txt in non-overlapping windows of 512 tokens,
    each window BOS + 511 text tokens, every token after the first scored.
"""
import json
import math
import pathlib
import sys

import numpy as np
from llama_cpp import Llama, __version__ as llama_cpp_version

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Photosynthesis is the process by which",
    "Here is a list of the planets in our solar system:\n1.",
    "La tour Eiffel a été construite en",
    "Q: What is 17 times 23?\nA:",
    "<start_of_turn>user\nWrite a haiku about autumn leaves.<end_of_turn>\n<start_of_turn>model\n",
    "The three laws of motion formulated by Isaac Newton are",
    "東京は日本の首都で、",
]
N_GEN = 64
PPL_CTX = 512


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "models/gemma-3-270m-q4_k_m.gguf")
    llm = Llama(model_path=model, n_ctx=PPL_CTX, n_batch=PPL_CTX, n_threads=2, logits_all=True, verbose=False,
                seed=0)
    greedy = []
    for p in PROMPTS:
        ids = llm.tokenize(p.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        out, gaps = [], []
        for _ in range(N_GEN):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            top2 = np.partition(logits, -2)[-2:]
            gaps.append(float(abs(top2[1] - top2[0])))
            nxt = int(np.argmax(logits))
            out.append(nxt)
            if llm.n_tokens + 1 >= PPL_CTX:
                break
            llm.eval([nxt])
        greedy.append({"prompt": p, "prompt_ids": ids, "tokens": out, "top2_gap": gaps})
        print(f"{p[:40]!r}: {llm.detokenize(out)[:60]!r}")

    text = (ROOT / "tests/data/text/gpl-3.txt").read_text()
    toks = llm.tokenize(text.encode(), add_bos=False, special=False)
    bos = llm.token_bos()
    per = PPL_CTX - 1
    n_windows = len(toks) // per
    nll, n = 0.0, 0
    for w in range(n_windows):
        win = [bos] + toks[w * per:(w + 1) * per]
        llm.reset()
        llm.eval(win)
        logits = np.array(llm.scores[:PPL_CTX], dtype=np.float64)
        for i in range(PPL_CTX - 1):
            row = logits[i]
            mx = row.max()
            lse = mx + math.log(np.exp(row - mx).sum())
            nll += lse - row[win[i + 1]]
            n += 1
    ppl = math.exp(nll / n)
    print(f"perplexity {ppl:.4f} over {n} tokens in {n_windows} windows")
    out = {"generator": "python/make_llamacpp_golden.py", "llama_cpp_python": llama_cpp_version,
           "model_sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
           "greedy": greedy, "perplexity": {"text": "tests/data/text/gpl-3.txt", "ctx": PPL_CTX,
                                             "n_windows": n_windows, "n_scored": n, "ppl": ppl,
                                             "n_text_tokens": len(toks)}}
    dst = ROOT / "tests/data/llamacpp/gemma3-270m.json"
    dst.write_text(json.dumps(out, indent=1))
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
