"""The module graph as the build declares it: each `sluice_add_module` target under src/ and its
DEPS (the one source the layering test and the architecture document are held to)."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADD_MODULE = re.compile(r"sluice_add_module\(\s*sluice_(\w+)(.*?)\)", re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = (".h", ".cpp", ".hpp", ".cc", ".inc")


def cmake_modules(src=ROOT / "src"):
    """{module: set of modules in its DEPS} from every src/<module>/CMakeLists.txt."""
    out = {}
    for cm in sorted(src.glob("*/CMakeLists.txt")):
        for name, body in ADD_MODULE.findall(cm.read_text()):
            deps = re.search(r"\bDEPS\b(.*)", body, re.S)
            words = deps.group(1).split() if deps else []
            out[name] = {w[len("sluice_"):] for w in words if w.startswith("sluice_")}
            assert cm.parent.name == name, f"{cm}: module sluice_{name} outside src/{name}/"
    return out


def includes(path):
    return INCLUDE.findall(path.read_text(errors="replace"))


def sources(folder):
    return sorted(f for f in folder.rglob("*") if f.suffix in SOURCE_SUFFIXES)
