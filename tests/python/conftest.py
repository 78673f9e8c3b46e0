"""Shared fixtures for the Python cross-checks: they run sluice's binaries and compare
with implementations we did not write (the PyPI `gguf` package, later transformers)."""
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("SLUICE_BUILD_DIR", ROOT / "build"))
MODELS = pathlib.Path(os.environ.get("SLUICE_MODELS_DIR", ROOT / "models"))
# No test calibrates the kernels or touches the user's tuning cache unless it asks to
# (test_tune.py): every sluice command a test starts uses the default parameters.
os.environ["SLUICE_NO_TUNE"] = "1"


def pytest_sessionstart(session):
    """The tiny-model GGUFs are not committed: rebuild any that are missing (numpy + gguf,
    <1 s) and check every one against the manifest's sha256, as `make fixtures` does."""
    import json
    import sys
    sys.path.insert(0, str(ROOT / "python"))
    import make_fixtures
    golden = make_fixtures.GOLDEN
    problems = make_fixtures.rebuild(golden, json.loads((golden / "manifest.json").read_text()), verbose=False)
    problems += make_fixtures.rebuild_towers(golden, verbose=False)
    if problems:
        pytest.exit("golden fixtures: " + "; ".join(problems), returncode=1)


def _binary(rel):
    p = BUILD / rel
    if not p.exists():
        pytest.fail(f"{p} is missing: build first (make build)")
    return p


@pytest.fixture(scope="session")
def sluice_bin():
    return _binary("apps/sluice/sluice")


@pytest.fixture(scope="session")
def quant_tool():
    return _binary("tests/tools/sluice_quant_tool")


@pytest.fixture(scope="session")
def gemma3_path():
    p = MODELS / "gemma-3-270m-q4_k_m.gguf"
    if not p.exists():
        pytest.fail(f"{p} is missing: run `make model`")
    return p


def run(args, **kw):
    """Run a command, returning CompletedProcess; never raises on a non-zero exit."""
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


SPEC_LINE = re.compile(r"\[spec: drafted (\d+), accepted (\d+) ")


def run_spec(args, spec, timeout):
    """`sluice run` with `--spec spec` among args, which must succeed: (stdout, (drafted,
    accepted)) from its [spec: ...] stderr line, None when spec is "none" (no such line)."""
    r = run(args, timeout=timeout)
    assert r.returncode == 0, r.stderr
    m = SPEC_LINE.search(r.stderr)
    assert (m is not None) == (spec != "none"), r.stderr
    return r.stdout, (int(m.group(1)), int(m.group(2))) if m else None
