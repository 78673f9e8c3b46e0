"""The module dependency rule (docs/architecture.md) holds for every #include in src/ and
apps/: a module includes only itself and the modules it may use."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]

# module -> modules it may include (transitively closed by hand; keep in sync with the doc
# and with the DEPS of each src/<module>/CMakeLists.txt).
ALLOWED = {
    "base": set(),
    "threading": {"base"},
    "gguf": {"base"},
    "quant": {"base"},
    "tensor": {"gguf", "quant", "base"},
    "kernels": {"tensor", "quant", "threading", "gguf", "base"},
    "tune": {"kernels", "tensor", "quant", "threading", "gguf", "base"},
    "kv": {"base"},
    # Image decoding and preprocessing: bytes in, patches out; the towers (models/) never see it.
    "media": {"base"},
    "sampling": {"base"},
    "spec": {"sampling", "base"},
    "tokenizer": {"gguf", "base"},
    "chat": {"tokenizer", "gguf", "base"},
    "grammar": {"tokenizer", "gguf", "base"},
    "models": {"kernels", "kv", "tensor", "gguf", "quant", "threading", "base"},
    "engine": {"models", "grammar", "tokenizer", "spec", "sampling", "kv", "kernels", "tensor", "gguf", "quant", "threading", "base"},
    "api": {"engine", "grammar", "tokenizer", "models", "spec", "sampling", "kv", "kernels", "tensor", "gguf", "quant", "threading", "base"},
    # The HTTP layer sees the engine only through api/ (style.md §9): never engine/ internals.
    "server": {"api", "grammar", "sampling", "kv", "chat", "tokenizer", "gguf", "base"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    return INCLUDE.findall(path.read_text(errors="replace"))


def test_src_modules_follow_the_dependency_rule():
    bad = []
    for mod_dir in sorted((ROOT / "src").iterdir()):
        if not mod_dir.is_dir():
            continue
        mod = mod_dir.name
        assert mod in ALLOWED, f"new module src/{mod}: add it to ALLOWED and docs/architecture.md"
        for f in mod_dir.rglob("*"):
            if f.suffix not in (".h", ".cpp", ".hpp", ".cc"):
                continue
            for inc in includes(f):
                top = inc.split("/")[0]
                if top == mod or top not in ALLOWED:
                    continue   # own header, or a system/third-party header
                if top not in ALLOWED[mod]:
                    bad.append(f"{f.relative_to(ROOT)} includes {inc}")
    assert not bad, "dependency rule broken:\n" + "\n".join(bad)


def test_nothing_in_src_includes_tests_or_apps():
    bad = [f"{f.relative_to(ROOT)}: {inc}"
           for f in (ROOT / "src").rglob("*") if f.suffix in (".h", ".cpp")
           for inc in includes(f) if inc.split("/")[0] in ("tests", "apps", "bench")]
    assert not bad, "\n".join(bad)


def test_server_reaches_the_engine_only_through_api():
    """server/ may include api/engine.h; everything it needs from engine/ comes through it
    (request and output types), so it never names scheduler or runner internals."""
    bad = [f"{f.relative_to(ROOT)}: {inc}"
           for f in (ROOT / "src" / "server").rglob("*") if f.suffix in (".h", ".cpp")
           for inc in includes(f) if inc.split("/")[0] in ("engine", "models")]
    assert not bad, "\n".join(bad)
