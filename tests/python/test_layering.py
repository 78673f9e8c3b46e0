"""The module dependency rule (docs/architecture.md) holds for every #include in src/: a module
includes only itself and the modules in its own CMake DEPS (tests/python/module_graph.py) —
not their dependencies in turn: a module that uses another one says so on its link line. The
server reaches the engine only through api/, by the names api/engine.h exports."""
import re

from module_graph import ROOT, cmake_modules, includes, sources

# What api/ hands the server from engine/ (`using engine::X;` in src/api/*.h): requests and
# their outputs. Adding a name here widens the server's view of the engine; say why in review.
# SoftTokens: a request's image rows (server/content_parts.cpp fills them, EngineRequest::soft).
API_EXPORTS = {"EngineRequest", "FinishReason", "GrammarConstraint", "RequestId", "SoftTokens", "TokenLogprob",
               "TokenOutput"}
# A name of a module the server must not see, written in a server source: `engine::X`,
# `models::X`, or a using-directive that would make them unqualified.
HIDDEN_NAME = re.compile(r"\b(?:engine|models)::\w+|\busing\s+namespace\s+(?:sluice::)?(?:engine|models)\b")
EXPORT = re.compile(r"\busing\s+(?:sluice::)?(?:engine|models)::(\w+)\s*;")


def include_violations(src, graph):
    """Every include in src/<module>/ of another module not in that module's DEPS."""
    bad = []
    for mod_dir in sorted(d for d in src.iterdir() if d.is_dir()):
        mod = mod_dir.name
        assert mod in graph, f"src/{mod} is not a sluice_add_module target"
        for f in sources(mod_dir):
            for inc in includes(f):
                top = inc.split("/")[0]
                if top != mod and top in graph and top not in graph[mod]:
                    bad.append(f"{f.relative_to(src.parent)} includes {inc} ({mod} may use {sorted(graph[mod])})")
    return bad


def server_name_violations(server_dir):
    bad = []
    for f in sources(server_dir):
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            code = line.split("//")[0]
            for m in HIDDEN_NAME.findall(code):
                bad.append(f"{f.name}:{i}: {m}")
    return bad


def api_exports(api_dir):
    return {name for f in sources(api_dir) for name in EXPORT.findall(f.read_text(errors="replace"))}


def test_src_modules_follow_the_dependency_rule():
    bad = include_violations(ROOT / "src", cmake_modules())
    assert not bad, "dependency rule broken:\n" + "\n".join(bad)


def test_nothing_in_src_includes_tests_or_apps():
    bad = [f"{f.relative_to(ROOT)}: {inc}" for f in sources(ROOT / "src") for inc in includes(f)
           if inc.split("/")[0] in ("tests", "apps", "bench")]
    assert not bad, "\n".join(bad)


def test_server_reaches_the_engine_only_through_api():
    """No engine/ or models/ include (the DEPS say so), and no engine or model name either:
    api/engine.h includes engine headers, so a server file could otherwise name
    engine::Scheduler through it. The server uses what api exports, and api exports only
    API_EXPORTS."""
    graph = cmake_modules()
    assert "engine" not in graph["server"] and "models" not in graph["server"]
    bad = server_name_violations(ROOT / "src" / "server")
    assert not bad, "the server names engine/model types; export them from api/engine.h instead:\n" + "\n".join(bad)
    assert api_exports(ROOT / "src" / "api") <= API_EXPORTS


# The checks can fail: each is run on a small tree that breaks its rule.

def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_an_engine_file_including_gguf_fails(tmp_path):
    graph = cmake_modules()
    assert "gguf" not in graph["engine"]
    src = tmp_path / "src"
    for m in graph:
        (src / m).mkdir(parents=True)
    write(src / "engine" / "vocab_check.cpp", '#include "engine/scheduler.h"\n#include "gguf/reader.h"\n')
    bad = include_violations(src, graph)
    assert len(bad) == 1 and "engine/vocab_check.cpp includes gguf/reader.h" in bad[0]
    # A module two DEPS away is not allowed either: engine uses models, models uses gguf.
    assert "gguf" in graph["models"]


def test_a_server_file_naming_an_engine_type_through_api_fails(tmp_path):
    write(tmp_path / "server" / "peek.cpp", '#include "api/engine.h"\nint n(const sluice::engine::Scheduler& s);\n'
          "// engine::Scheduler in a comment is fine\n")
    write(tmp_path / "server" / "peek2.h", "using namespace sluice::engine;\n")
    assert server_name_violations(tmp_path / "server") == ["peek.cpp:2: engine::Scheduler",
                                                           "peek2.h:1: using namespace sluice::engine"]
    write(tmp_path / "api" / "engine.h", "using engine::TokenOutput;\nusing engine::Scheduler;\n")
    assert not api_exports(tmp_path / "api") <= API_EXPORTS


# The chat dialect lives in chat/ (docs/architecture.md): the Jinja engine below it knows no chat
# format, and the server names no Gemma markup and branches on no ChatArch: it reads the model's
# chat::ChatFormat (markup ids resolved once at load).
MARKUP = re.compile(r'<\|[\w"]+\|?>|<\w+\|>|<(?:start|end)_of_turn>|\bChatArch\b')


def dialect_in(folder):
    return [f"{f.name}:{i}: {m}" for f in sources(folder)
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1) for m in MARKUP.findall(line)]


def test_the_chat_dialect_has_one_home(tmp_path):
    graph = cmake_modules()
    assert graph["jinja"] == {"base"}, "jinja may use base only"
    assert graph["chat"] == {"jinja", "grammar", "tokenizer", "base"}
    assert not [m for m, deps in graph.items() if "jinja" in deps and m != "chat"], "templates render through chat/"
    bad = dialect_in(ROOT / "src" / "server")
    assert not bad, "chat dialect in server/ (it belongs in chat/format.h):\n" + "\n".join(bad)
    write(tmp_path / "server" / "x.cpp", 'auto id = tok.token_id("<channel|>");\n'
          "if (m.arch() == chat::ChatArch::Gemma4) {}\n// <start_of_turn>, <|image|> and <|\"|>\n")
    assert dialect_in(tmp_path / "server") == ["x.cpp:1: <channel|>", "x.cpp:2: ChatArch", "x.cpp:3: <start_of_turn>",
                                               "x.cpp:3: <|image|>", 'x.cpp:3: <|"|>']


# Speculation runs one way (src/engine/proposer.h): a proposer finds its per-sequence state by
# the sequence, never by casting Sequence::proposer back to its own type.
STATE_CAST = re.compile(r"\b(?:dynamic|static|reinterpret)_cast<[^>]*\*>\s*\([^;]*\bproposer\b|\bdynamic_cast<")


def state_casts(folder):
    return [f"{f.name}:{i}" for f in sources(folder)
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1) if STATE_CAST.search(line)]


def test_the_engine_never_casts_proposer_state(tmp_path):
    assert not state_casts(ROOT / "src" / "engine")
    write(tmp_path / "engine" / "p.cpp", "auto* st = static_cast<SeqKv*>(c.seq->proposer.get());\n"
          "auto* d = dynamic_cast<Foo*>(x);\nauto n = static_cast<int32_t>(s.size());\n")
    assert state_casts(tmp_path / "engine") == ["p.cpp:1", "p.cpp:2"]
