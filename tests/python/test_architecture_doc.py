"""docs/architecture.md's module table is the build's module list: one row per
`sluice_add_module` target under src/ (plus apps), its folder, and a "may use" column equal to
the target's DEPS; the diagram above it names every module."""
import re

from module_graph import ROOT, cmake_modules

DOC = ROOT / "docs" / "architecture.md"


def doc_table(text):
    """{module: (folder, set of modules it may use)} from the table under the diagram."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]   # \| is a pipe inside a cell
        if len(cells) != 4 or not cells[1].startswith("`") or cells[0] in ("module", "room"):
            continue
        uses = cells[3]
        mods = set() if uses in ("std only", "any module") else {u.strip() for u in uses.split(",")}
        rows[cells[0]] = (cells[1].strip("`"), mods)
    return rows


def diagram(text):
    return text.split("```")[1]


def test_the_table_lists_every_cmake_module_with_its_deps():
    text = DOC.read_text()
    rows = doc_table(text.split("## Rooms for what comes next")[0])
    mods = cmake_modules()
    assert set(rows) - {"apps"} == set(mods), f"table vs CMake targets: {(set(rows) - {'apps'}) ^ set(mods)}"
    for m, deps in mods.items():
        folder, uses = rows[m]
        assert folder == f"src/{m}/", f"{m}: the table says {folder}"
        assert uses == deps | ({"base"} if m != "base" else set()), f"{m}: table {sorted(uses)}, DEPS {sorted(deps)}"


def test_every_src_folder_is_a_module():
    folders = {d.name for d in (ROOT / "src").iterdir() if d.is_dir()}
    assert folders == set(cmake_modules())


def test_the_diagram_names_every_module():
    pic = diagram(DOC.read_text())
    missing = [m for m in list(cmake_modules()) + ["apps/sluice"] if not re.search(rf"\b{re.escape(m)}\b", pic)]
    assert not missing, f"the diagram misses {missing}"


def test_the_doc_names_the_rooms_for_media_encoders_and_deployment():
    text = DOC.read_text()
    for room in ("src/media/", "models/encoder.h", "engine/encoder_cache.cpp", "media key", "kv/kv_events.h",
                 "chat/format.h", "src/jinja/", "server/metric_names.cpp", "never splits across prefill chunks"):
        assert room in text, room
    assert len(text.encode()) < 20_000, "keep docs/architecture.md under 20 KB"


def test_the_comparison_fails_on_a_missing_row_and_a_wrong_deps(tmp_path):
    """The checks above can fail: a module the table lacks, a DEPS the table does not say."""
    (tmp_path / "foo").mkdir()
    (tmp_path / "foo" / "CMakeLists.txt").write_text("sluice_add_module(sluice_foo\n  SOURCES a.cpp\n  DEPS sluice_gguf sluice_base)\n")
    mods = cmake_modules(tmp_path)
    assert mods == {"foo": {"gguf", "base"}}
    rows = doc_table("| foo | `src/foo/` | x | kv, base |\n")
    assert rows["foo"][1] != mods["foo"]
    assert "foo" not in doc_table(DOC.read_text())
