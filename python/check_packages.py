"""Every system file the builds and tests use comes from a package the Makefile names.

Usage: python python/check_packages.py [--lists "pkg pkg ..."] BUILD_DIR [BUILD_DIR ...]

A package installed by hand stays on a developer's machine (and on the CI run there) but not on
a fresh one, where `make test` then fails. This check gathers what the builds really used:
  - headers: every file outside the checkout and the build folders in `ninja -t deps`;
  - link-time libraries: absolute library paths in build.ninja's LINK_LIBRARIES and what the
    compiler resolves `-lNAME` to;
  - run-time libraries: the NEEDED entries and program interpreter of every ELF file the builds
    wrote, looked up in the library folders of that file's architecture (qemu runs arm64 tests
    with the arm64 multiarch folders, not the cross compiler's);
  - programs the Makefile and test scripts start (PROGRAMS below);
maps each to its Debian package with `dpkg -S`, and fails naming every package that neither the
Makefile's lists (`make -s print-packages`, or --lists) nor their dependencies (apt-cache's
recursive Depends/Pre-Depends over installed packages) cover. A run-time library that no
installed package provides is named with the package that holds the same file for the native
architecture, qualified with the foreign one (libstdc++.so.6 for arm64 -> libstdc++6:arm64).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Programs the Makefile, tests/*.sh and the Python tests start, beside the compiler.
PROGRAMS = ["cmake", "ninja", "g++", "gcc", "clang", "clang++", "clang-format-14", "pkg-config",
            "aarch64-linux-gnu-g++", "qemu-aarch64-static", "chromium", "chromedriver",
            "python3", "readelf"]

# Packages of the base system every Debian machine has (Priority: required/essential), which
# no list needs to name. Each is here for the reason given.
BASE_SYSTEM = {
    "libc6": "essential: the C library every program links",
    "libgcc-s1": "required: the unwinder every C++ program links",
    "dpkg": "essential: the package manager this check asks",
    "binutils": "build-essential's closure",
}

ARCH_LIBDIRS = {
    "x86-64": ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib", "/lib", "/lib64"],
    "aarch64": ["/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu"],
}
NATIVE_ARCH = "x86-64" if os.uname().machine == "x86_64" else "aarch64"
DEB_ARCH = {"x86-64": "amd64", "aarch64": "arm64"}


def run(cmd: list[str], **kw) -> str:
    return subprocess.run(cmd, check=False, capture_output=True, text=True, **kw).stdout


def makefile_packages() -> list[str]:
    out = run(["make", "-s", "--no-print-directory", "-C", str(ROOT), "print-packages"])
    return out.split()


def closure(packages: list[str]) -> set[str]:
    """The listed packages and everything they depend on (installed ones, recursively)."""
    installed = [p for p in packages if is_installed(p)]
    out = run(["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
               "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
               "--no-enhances", *installed])
    names = {normalize(line.strip().strip("<>")) for line in out.splitlines()
             if line and not line[0].isspace()}
    # Depends lines name virtual packages and alternatives too; what provides them is listed
    # at column 0 by --recurse, so the set above is the closure.
    return names | {normalize(p) for p in packages}


def is_installed(pkg: str) -> bool:
    status = run(["dpkg-query", "-W", "-f=${Status}", pkg])
    return "install ok installed" in status


def normalize(pkg: str) -> str:
    native = ":" + DEB_ARCH[NATIVE_ARCH]
    return pkg[: -len(native)] if pkg.endswith(native) else pkg


def build_files(build: pathlib.Path) -> set[str]:
    """Headers and link-time libraries outside the checkout and the build folder."""
    files: set[str] = set()
    deps = run(["ninja", "-C", str(build), "-t", "deps"])
    for line in deps.splitlines():
        if line.startswith("    /"):
            files.add(line.strip())
    ninja_file = (build / "build.ninja").read_text(errors="replace") if (build / "build.ninja").exists() else ""
    compiler = compiler_of(build)
    for line in ninja_file.splitlines():
        if "LINK_LIBRARIES" not in line:
            continue
        for word in line.split("=", 1)[1].split():
            if word.startswith("/") and re.search(r"\.(so|a)(\.\d+)*$", word):
                files.add(word)
            elif word.startswith("-l") and compiler:
                for suffix in (".so", ".a"):
                    path = run([compiler, f"-print-file-name=lib{word[2:]}{suffix}"]).strip()
                    if path.startswith("/"):
                        files.add(path)
                        break
    here = (str(ROOT), str(build.resolve()))
    return {f for f in files if not f.startswith(here)}


def compiler_of(build: pathlib.Path) -> str | None:
    cache = build / "CMakeCache.txt"
    if not cache.exists():
        return None
    m = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.+)$", cache.read_text(), re.M)
    return m.group(1) if m else None


def elf_files(build: pathlib.Path):
    for path in build.rglob("*"):
        if path.is_file() and not path.is_symlink() and os.access(path, os.X_OK):
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def runtime_needs(build: pathlib.Path) -> dict[str, tuple[str, str]]:
    """{soname or interpreter: (architecture, a binary that needs it)} of the build's ELF files."""
    needs: dict[str, tuple[str, str]] = {}
    for path in elf_files(build):
        text = run(["readelf", "-h", "-d", "-l", str(path)])
        arch = "aarch64" if "AArch64" in text else "x86-64"
        for soname in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text):
            needs.setdefault(soname, (arch, str(path)))
        interp = re.search(r"Requesting program interpreter: ([^\]]+)\]", text)
        if interp:
            needs.setdefault(interp.group(1), (arch, str(path)))
    return needs


def resolve_runtime(needs: dict[str, tuple[str, str]]) -> tuple[set[str], dict[str, str]]:
    """Files the needs resolve to, and {qualified package guess: why} for those not found."""
    found: set[str] = set()
    absent: dict[str, str] = {}
    for name, (arch, binary) in needs.items():
        candidates = [name] if name.startswith("/") else [f"{d}/{name}" for d in ARCH_LIBDIRS[arch]]
        hit = next((c for c in candidates if os.path.exists(c)), None)
        if hit:
            found.add(hit)
            continue
        guess = native_package_of(name) or name
        if arch != NATIVE_ARCH:
            guess = f"{guess.split(':')[0]}:{DEB_ARCH[arch]}"
        absent[guess] = f"{name} ({arch}), needed by {binary}, is on no library path"
    return found, absent


def native_package_of(soname: str) -> str | None:
    for d in ARCH_LIBDIRS[NATIVE_ARCH]:
        candidate = f"{d}/{pathlib.PurePath(soname).name}"
        if os.path.exists(candidate):
            owners = owners_of([candidate])
            if owners:
                return normalize(next(iter(owners.values())))
    return None


def program_files() -> set[str]:
    files = set()
    for prog in PROGRAMS:
        path = shutil.which(prog)
        if path:
            files.add(path)
    return files


def owners_of(paths: list[str]) -> dict[str, str]:
    """{path: package} for the paths dpkg knows (also through symlinks and usr-merge)."""
    owners: dict[str, str] = {}
    queries: dict[str, list[str]] = {}   # a query path -> the paths it answers for
    for p in paths:
        real = os.path.realpath(p)
        for q in {p, real, re.sub(r"^/usr/lib/", "/lib/", real), re.sub(r"^/lib/", "/usr/lib/", real)}:
            queries.setdefault(q, []).append(p)
    out = run(["dpkg", "-S", *sorted(queries)])
    for line in out.splitlines():
        m = re.match(r"^([^:]+(?::[a-z0-9]+)?(?:, [^:]+(?::[a-z0-9]+)?)*): (/.*)$", line)
        if m and m.group(2) in queries:
            # A file of a Multi-Arch: same package has one owner per architecture installed;
            # the native one is what a machine without the foreign architecture has.
            pkgs = m.group(1).split(", ")
            native = [k for k in pkgs if ":" not in k or k.endswith(":" + DEB_ARCH[NATIVE_ARCH])]
            for p in queries[m.group(2)]:
                owners.setdefault(p, (native or pkgs)[0])
    return owners


def check(builds: list[pathlib.Path], listed: list[str]) -> list[str]:
    """The problems found: one line per package no list covers."""
    files: set[str] = set(program_files())
    needs: dict[str, tuple[str, str]] = {}
    for build in builds:
        files |= build_files(build)
        needs.update(runtime_needs(build))
    runtime, absent = resolve_runtime(needs)
    files |= runtime
    owners = owners_of(sorted(files))
    unowned = sorted(f for f in files - set(owners) if f.startswith(("/usr/include", "/usr/lib", "/lib")))
    covered = closure(listed) | set(BASE_SYSTEM)
    missing: dict[str, str] = {}
    for path, pkg in sorted(owners.items()):
        pkg = normalize(pkg)
        if pkg not in covered:
            missing.setdefault(pkg, path)
    problems = [f"{pkg}: provides {path}, which the build or tests use, but no Makefile package "
                f"list installs it" for pkg, path in sorted(missing.items())]
    problems += [f"{pkg}: {why}; add it to a Makefile package list" for pkg, why in sorted(absent.items())]
    problems += [f"{path}: used by the build but installed by no Debian package (by hand?)" for path in unowned]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lists", help="the packages the lists name (default: make print-packages)")
    ap.add_argument("builds", nargs="+", type=pathlib.Path)
    args = ap.parse_args()
    listed = args.lists.split() if args.lists is not None else makefile_packages()
    builds = [b for b in args.builds if (b / "build.ninja").exists()]
    problems = check(builds, listed)
    for line in problems:
        print(f"check_packages: {line}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_packages: every header, library and program of {len(builds)} build(s) comes "
          f"from a listed package")
    return 0


if __name__ == "__main__":
    sys.exit(main())
