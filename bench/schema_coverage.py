"""JSON Schema coverage against llguidance, on real-world schemas shipped in PyPI packages.

Sources (read from the installed packages at run time, nothing vendored into git):
  kubernetes   the per-kind schemas vendored by `kubernetes-validate` (latest "-local-strict"
               version), each made self-contained: its "/api/_definitions.json#/$defs/X"
               references rewritten to "#/$defs/X" and the $defs they reach copied in;
  schemastore  the SchemaStore schemas vendored by `check-jsonschema`;
  pydantic     model_json_schema() of every pydantic model in the `openai` SDK's types.

Both engines get the same schema text. sluice: bench/schema_check (build with
-DSLUICE_BUILD_BENCH=ON) compiles the grammar and its mask tables against the real Gemma 3
vocabulary; llguidance: LLMatcher(tokenizer, grammar) over the same vocabulary (its masks are
computed lazily, so its compile time is grammar construction only). strict (the default) is
compared with llguidance's default; --lenient runs sluice's lenient mode as well.

For a sample of compiled schemas, random walks through the grammar (schema_check's byte
vocabulary) are validated with `jsonschema` and its format checker.

    .venv/bin/pip install -r python/requirements-schema-bench.txt
    .venv/bin/python bench/schema_coverage.py [--build build] [--model models/gemma-3-270m-q4_k_m.gguf]
                                              [--limit 200] [--samples 40] [--json out.json]
"""
import argparse
import collections
import importlib
import inspect
import json
import pathlib
import pkgutil
import random
import re
import statistics
import subprocess
import sys
import time

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100 * len(xs)))] if xs else float("nan")


# ---- sources ---------------------------------------------------------------------------

def kubernetes_schemas():
    import kubernetes_validate
    base = pathlib.Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    versions = sorted((p for p in base.iterdir() if p.name.endswith("-local-strict")),
                      key=lambda p: [int(x) for x in re.findall(r"\d+", p.name.split("-")[0])])
    d = versions[-1]
    defs = json.loads((d / "_definitions.json").read_text())
    defs = defs.get("$defs", defs.get("definitions", {}))

    def fix(node, reached):
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str) and "#/" in v:
                    name = v.split("/")[-1]
                    out[k] = "#/$defs/" + name
                    if name not in reached:
                        reached[name] = None
                        reached[name] = fix(defs[name], reached)
                else:
                    out[k] = fix(v, reached)
            return out
        if isinstance(node, list):
            return [fix(x, reached) for x in node]
        return node

    for f in sorted(d.glob("*.json")):
        if f.name in ("_definitions.json", "all.json"):
            continue
        reached = {}
        s = fix(json.loads(f.read_text()), reached)
        if reached:
            s["$defs"] = reached
        yield f"{d.name}/{f.name}", s


def schemastore_schemas():
    import check_jsonschema.builtin_schemas as b
    for f in sorted((pathlib.Path(b.__file__).parent / "vendor").glob("*.json")):
        yield f.name, json.loads(f.read_text())


def pydantic_schemas():
    import openai.types
    import pydantic
    seen = set()
    for m in pkgutil.walk_packages(openai.types.__path__, "openai.types."):
        try:
            mod = importlib.import_module(m.name)
        except Exception:
            continue
        for name, cls in inspect.getmembers(mod, inspect.isclass):
            if not issubclass(cls, pydantic.BaseModel) or cls.__module__ != mod.__name__ or cls in seen:
                continue
            seen.add(cls)
            try:
                yield f"{cls.__module__}.{name}", cls.model_json_schema()
            except Exception:
                continue


SOURCES = {"kubernetes": kubernetes_schemas, "schemastore": schemastore_schemas, "pydantic": pydantic_schemas}


# ---- engines ---------------------------------------------------------------------------

class Sluice:
    """One schema_check process; a schema that crashes it or takes over `timeout` s is
    recorded as such and the process restarted."""

    def __init__(self, exe, model, timeout=30.0):
        self.cmd = [str(exe)] + ([str(model)] if model else [])
        self.timeout = timeout
        self.p = None

    def start(self):
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def run(self, req):
        import select
        if self.p is None or self.p.poll() is not None:
            self.start()
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], self.timeout)
        if not ready:
            self.p.kill()
            self.p.wait()
            self.p = None
            return {"ok": False, "error": "HANG (no answer in %.0f s)" % self.timeout, "hang": True}
        line = self.p.stdout.readline()
        if not line:
            rc = self.p.wait()
            self.p = None
            return {"ok": False, "error": "CRASH (exit %s)" % rc, "crash": True}
        return json.loads(line)

    def close(self):
        if self.p:
            self.p.stdin.close()
            self.p.wait()


def llg_tokenizer(model):
    import gguf
    import llguidance
    r = gguf.GGUFReader(str(model))
    f = r.fields["tokenizer.ggml.tokens"]
    types = r.fields["tokenizer.ggml.token_type"]
    toks = []
    for i, idx in enumerate(f.data):
        t = bytes(f.parts[idx]).decode("utf-8", "replace")
        kind = int(types.parts[types.data[i]][0])
        if kind == 6:  # byte token <0xAB>
            toks.append(bytes([int(t[3:5], 16)]))
        elif kind in (2, 3, 4, 5):  # unknown, control, user-defined, unused: no plain text
            toks.append(b"\xff" + t.encode())  # llguidance treats 0xff-prefixed tokens as special
        else:
            toks.append(t.replace("\u2581", " ").encode())
    eos = int(r.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    byte_to_id = {t: i for i, t in enumerate(toks)}

    class Tok:
        eos_token_id, bos_token_id, tokens = eos, None, toks

        def __call__(self, s):  # greedy longest match; only used for forced text
            s = s if isinstance(s, bytes) else s.encode()
            out, i = [], 0
            while i < len(s):
                for j in range(min(len(s), i + 32), i, -1):
                    if s[i:j] in byte_to_id:
                        out.append(byte_to_id[s[i:j]])
                        i = j
                        break
                else:
                    i += 1
            return out

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(Tok()))


def llg_compile(tok, schema):
    import llguidance
    t0 = time.perf_counter()
    try:
        g = llguidance.grammar_from("json_schema", json.dumps(schema))
        m = llguidance.LLMatcher(tok, g)
        err = m.get_error() if m.is_error() else ""
    except Exception as e:  # malformed input on its side
        err = str(e)
    return not err, (time.perf_counter() - t0) * 1000, err


# ---- main ------------------------------------------------------------------------------

def validate_samples(schema, samples):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        v = cls(schema, format_checker=cls.FORMAT_CHECKER)
    except Exception:
        return 0, 0, 0
    ok = bad = unfinished = 0
    for s in samples:
        if not s:
            unfinished += 1
            continue
        try:
            inst = json.loads(s)
            good = v.is_valid(inst)
        except Exception:
            good = False
        ok += good
        bad += not good
        if not good:
            print("  INVALID sample:", s[:200], file=sys.stderr)
    return ok, bad, unfinished


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--limit", type=int, default=0, help="schemas per source (0: all)")
    ap.add_argument("--samples", type=int, default=40, help="schemas per source whose walks are validated")
    ap.add_argument("--lenient", action="store_true")
    ap.add_argument("--no-llguidance", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    exe = pathlib.Path(a.build) / "bench/schema_check"
    sluice = Sluice(exe, a.model)
    walker = Sluice(exe, None)
    tok = None if a.no_llguidance else llg_tokenizer(a.model)
    rng = random.Random(7)
    report = {}
    for src, gen in SOURCES.items():
        items = list(gen())
        if a.limit and len(items) > a.limit:
            items = sorted(rng.sample(items, a.limit))
        rows = []
        for name, schema in items:
            r = sluice.run({"schema": schema, "lenient": a.lenient})
            row = {"name": name, "ok": r["ok"], "error": r.get("error", ""), "ms": r.get("compile_ms", 0),
                   "cpu_ms": r.get("compile_cpu_ms", r.get("compile_ms", 0)),
                   "hang": r.get("hang", False), "crash": r.get("crash", False), "warnings": r.get("warnings", [])}
            if tok is not None:
                row["llg_ok"], row["llg_ms"], row["llg_error"] = llg_compile(tok, schema)
            rows.append(row)
            if a.verbose and not row["ok"]:
                print(f"  {src} {name}: {row['error'][:160]}", file=sys.stderr)
        compiled = [(n, s) for (n, s), row in zip(items, rows) if row["ok"]]
        ok = bad = unfinished = 0
        for name, schema in rng.sample(compiled, min(a.samples, len(compiled))):
            w = walker.run({"schema": schema, "lenient": a.lenient, "samples": 3, "seed": 1, "max_tokens": 600})
            o, b, u = validate_samples(schema, w.get("samples", []))
            ok, bad, unfinished = ok + o, bad + b, unfinished + u
        n = len(rows)
        rep = {
            "schemas": n,
            "sluice": sum(r["ok"] for r in rows),
            "sluice_ms_p50": pct([r["ms"] for r in rows], 50), "sluice_ms_p99": pct([r["ms"] for r in rows], 99),
            "sluice_cpu_ms_p50": pct([r["cpu_ms"] for r in rows], 50),
            "sluice_cpu_ms_p99": pct([r["cpu_ms"] for r in rows], 99),
            "hang": sum(r["hang"] for r in rows), "crash": sum(r["crash"] for r in rows),
            "samples_valid": ok, "samples_invalid": bad, "samples_unfinished": unfinished,
            "errors": collections.Counter(re.sub(r" at #.*| \d+.*", "", r["error"]) for r in rows if not r["ok"]).most_common(8),
        }
        if tok is not None:
            rep.update({"llguidance": sum(r["llg_ok"] for r in rows),
                        "llg_ms_p50": pct([r["llg_ms"] for r in rows], 50), "llg_ms_p99": pct([r["llg_ms"] for r in rows], 99),
                        "llg_errors": collections.Counter(re.sub(r"\s+", " ", r["llg_error"])[:80] for r in rows
                                                          if not r["llg_ok"]).most_common(5)})
        report[src] = rep
        line = (f"{src:12s} {n:4d} schemas  sluice {rep['sluice']:4d} ({100 * rep['sluice'] / max(n, 1):5.1f}%) "
                f"compile p50 {rep['sluice_ms_p50']:6.1f} ms p99 {rep['sluice_ms_p99']:6.1f} ms "
                f"(cpu p50 {rep['sluice_cpu_ms_p50']:5.1f} p99 {rep['sluice_cpu_ms_p99']:5.1f})")
        if tok is not None:
            line += (f" | llguidance {rep['llguidance']:4d} ({100 * rep['llguidance'] / max(n, 1):5.1f}%) "
                     f"p50 {rep['llg_ms_p50']:6.1f} ms p99 {rep['llg_ms_p99']:6.1f} ms")
        line += (f" | hang {rep['hang']} crash {rep['crash']} | walks valid {ok} invalid {bad} unfinished {unfinished}")
        print(line, flush=True)
        for e, c in rep["errors"]:
            print(f"    sluice   {c:4d}  {e[:150]}")
        for e, c in rep.get("llg_errors", []):
            print(f"    llguid.  {c:4d}  {e[:150]}")
    sluice.close()
    walker.close()
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
