"""Every specification section the code and documents cite exists inside the repository.

The specifications live in docs/spec/ (gemma4.md, gemma3.md, quants.md, gguf.md, tokenizer.md).
A citation is `name.md §N[.M]` — or `G4 §N` / `G3 §N` (python/convert_hf_to_gguf.py's short
forms), or a bare `§N` that belongs to the spec last named earlier in the same file, else to
the file's own module (src/tokenizer -> tokenizer.md, ...) or, in a document, to the document
itself. Each must name a file of docs/ or docs/spec/ and a numbered heading in it. No path may
point at the old out-of-tree copy of the specs. docs/perf-log.md is history: its § numbers
are those of performance.md as it was, so it is not checked.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "docs" / "spec"
SPECS = ("gemma4.md", "gemma3.md", "quants.md", "gguf.md", "tokenizer.md")
SCANNED = ["src", "apps", "bench", "python", "tests/unit", "tests/python", "tests/tools", "tests/fuzz", "tests/real",
           "docs", "README.md", "Makefile"]
SKIP = {"docs/perf-log.md", "tests/python/test_spec_citations.py"}   # history; this file's own examples
SUFFIXES = {".cpp", ".h", ".py", ".md", ".txt", ".sh", ""}
# The spec a bare § means in files of these folders, when no spec was named before it.
FOLDER_DEFAULT = {"src/tokenizer": "tokenizer.md", "tests/unit/tokenizer": "tokenizer.md", "src/quant": "quants.md",
                  "tests/unit/quant": "quants.md", "src/gguf": "gguf.md", "tests/unit/gguf": "gguf.md",
                  "src/chat": "tokenizer.md", "src/kernels": "quants.md", "tests/unit/kernels": "quants.md",
                  "python/make_tokenizer_golden.py": "tokenizer.md", "tests/python/test_tokenizer.py": "tokenizer.md",
                  "tests/python/test_golden_files.py": "gemma4.md", "tests/python/test_quants.py": "quants.md"}
SHORT = {"G4": "gemma4.md", "G3": "gemma3.md"}
OLD_SPEC_DIR = "shared" + "/spec"   # written in two parts so that this file does not cite it

MD_NAME = re.compile(r"([A-Za-z0-9_-]+\.md)\b")
CITE = re.compile(r"(?:\b([A-Za-z0-9_-]+\.md)|\b(G[34]))?\s*§\s?(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s")
STEP = re.compile(r"^(\d+)\.\s")


def headings(path: pathlib.Path) -> set[str]:
    """Section numbers of a document: its numbered headings, and "N.M" for the numbered list
    items (steps) directly inside section N."""
    found, section = set(), None
    for line in path.read_text().splitlines():
        if m := HEADING.match(line):
            section = m.group(1)
            found.add(section)
        elif section is not None and (m := STEP.match(line)):
            found.add(f"{section}.{m.group(1)}")
    return found


def doc_path(name: str):
    for d in (SPEC_DIR, ROOT / "docs"):
        if (d / name).is_file():
            return d / name
    return None


def scanned_files():
    for entry in SCANNED:
        p = ROOT / entry
        files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())
        for f in files:
            rel = f.relative_to(ROOT).as_posix()
            if rel in SKIP or f.suffix not in SUFFIXES or "/data/" in rel or "__pycache__" in rel:
                continue
            yield f, rel


def citations(text: str, rel: str):
    """(line number, spec file name or None, section) of every citation in text."""
    default = next((v for k, v in FOLDER_DEFAULT.items() if rel == k or rel.startswith(k + "/")), None)
    in_doc = rel.startswith("docs/")
    if in_doc:
        default = pathlib.Path(rel).name
    last, last_no = None, -10   # the document named last, and on which line
    for no, line in enumerate(text.splitlines(), 1):
        for m in CITE.finditer(line):
            name = m.group(1) or SHORT.get(m.group(2) or "")
            if name is None:
                before = MD_NAME.findall(line[:m.start()])
                if before:
                    name = before[-1]
                elif not in_doc and last is not None and no - last_no <= 2:
                    name = last   # a comment that goes on over the next lines
                else:
                    name = default
            last, last_no = name, no
            yield no, name, m.group(3)
        names = MD_NAME.findall(line)
        if names:
            last, last_no = names[-1], no


def dangling(files) -> list[str]:
    bad = []
    cache: dict[str, set[str]] = {}
    for f, rel in files:
        text = f.read_text(errors="replace")
        for no, line in enumerate(text.splitlines(), 1):
            if OLD_SPEC_DIR in line:
                bad.append(f"{rel}:{no}: points at shared/spec, outside the repository (the specs are in docs/spec/)")
        for no, name, sec in citations(text, rel):
            if name is None:
                bad.append(f"{rel}:{no}: §{sec} names no document")
                continue
            path = doc_path(name)
            if path is None:
                bad.append(f"{rel}:{no}: {name} §{sec}: no {name} in docs/ or docs/spec/")
                continue
            known = cache.setdefault(name, headings(path))
            if sec not in known:
                bad.append(f"{rel}:{no}: {name} §{sec}: {path.relative_to(ROOT)} has no section {sec}")
    return bad


def test_every_spec_the_code_cites_is_in_docs_spec():
    for name in SPECS:
        assert (SPEC_DIR / name).is_file(), name
        assert headings(SPEC_DIR / name), f"{name} has no numbered sections"


def test_every_citation_resolves_inside_the_repository():
    bad = dangling(scanned_files())
    assert not bad, f"{len(bad)} dangling citation(s):\n" + "\n".join(bad[:60])


@pytest.mark.parametrize("text,ok", [
    ("// gemma4.md §3.3 and §1.2", True),
    ("// gemma4.md §3.3, then quants.md §8.6", True),
    ("// gemma4.md §9.9", False),                 # no such section
    ("// nosuch.md §1", False),                   # no such document
    ("// see ../" + OLD_SPEC_DIR + "/gguf.md", False),   # outside the repository
    ("# G4 §1.1 and G3 §3.4", True),
    ("# G4 §3.5", False),
])
def test_the_checker_finds_dangling_citations(tmp_path, text, ok):
    f = tmp_path / "x.cpp"
    f.write_text(text + "\n")
    assert (dangling([(f, "src/models/x.cpp")]) == []) == ok


def test_a_bare_section_belongs_to_the_spec_named_before_it(tmp_path):
    f = tmp_path / "x.h"
    f.write_text("// quants.md §2\n// (§8.6)\n// gguf.md §11, §7\n// (§11)\n")
    assert [(n, s) for _, n, s in citations(f.read_text(), "src/x.h")] == [
        ("quants.md", "2"), ("quants.md", "8.6"), ("gguf.md", "11"), ("gguf.md", "7"), ("gguf.md", "11")]
    assert [(n, s) for _, n, s in citations("// spec §7.1\n", "src/tokenizer/bpe.cpp")] == [("tokenizer.md", "7.1")]
