"""No C++ function in src/ or apps/ longer than 100 lines (house rule), measured by lizard.

    python python/check_function_length.py [--max 100] [--allow python/function_length_allow.txt]

lizard's "length" counts a function's lines from its signature to its closing brace. Functions
named in the allow-list ("path:qualified_name" lines) may be longer: the Jinja interpreter's
dispatch for good, and today's offenders until the branches that split them are merged. An
allow-list entry whose function is no longer too long is an error too, so the list only
shrinks. Exit status 1 on any finding, with one line per function. Only C++ is measured: lizard's
JavaScript reader loses its place on newer syntax (`??`, spreads in calls) and reports whole files
as one function, so the chat page's modules are kept short by review.
"""
import argparse
import csv
import io
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def read_allow(path):
    allow = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            allow.add(line)
    return allow


def measure(dirs):
    """(path, qualified name, first line, length) of every function lizard finds under dirs."""
    lizard = pathlib.Path(sys.executable).parent / "lizard"
    out = subprocess.run([str(lizard), "--csv", "-l", "cpp", *dirs], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    rows = []
    for r in csv.reader(io.StringIO(out)):
        # NLOC, CCN, tokens, params, length, location, file, name, long name, start, end
        if len(r) < 11 or not r[4].isdigit():
            continue
        rows.append((r[6], r[7], int(r[9]), int(r[4])))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=100)
    ap.add_argument("--allow", type=pathlib.Path, default=ROOT / "python" / "function_length_allow.txt")
    ap.add_argument("dirs", nargs="*", default=["src", "apps"])
    a = ap.parse_args()
    allow = read_allow(a.allow)
    long_ones = {}
    for path, name, line, length in measure(a.dirs):
        if length > a.max:
            long_ones[f"{path}:{name}"] = (line, length)
    bad = 0
    for key, (line, length) in sorted(long_ones.items()):
        if key not in allow:
            path, name = key.split(":", 1)
            print(f"{path}:{line}: {name} is {length} lines (limit {a.max}): split it")
            bad += 1
    for key in sorted(allow - long_ones.keys()):
        print(f"{a.allow.name}: {key} is no longer over {a.max} lines (or no longer exists): remove it from the list")
        bad += 1
    if bad:
        return 1
    print(f"function length: every function in {' '.join(a.dirs)} is at most {a.max} lines "
          f"({len(long_ones)} allowed by {a.allow.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
