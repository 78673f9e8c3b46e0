"""sluice's chat-template engine must render every golden case exactly as Python jinja2 did.

The fixtures in tests/data/chat/ were written by python/make_chat_golden.py, which renders
each template over generated conversations with jinja2 in Hugging Face's environment (an
implementation we did not write). Here we render the same cases with
`sluice_chat_render_tool` and require byte-identical text, and an error wherever jinja2
raised. jinja2 itself is not needed to run this test.
"""
import json

import pytest

from conftest import ROOT, _binary, run

DATA = ROOT / "tests/data/chat"
FIXTURES = sorted(DATA.glob("*.json"))


@pytest.fixture(scope="session")
def chat_tool():
    return _binary("tests/tools/sluice_chat_render_tool")


def first_difference(a, b):
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at char {n}: jinja2 {a[max(0, n - 30):n + 30]!r} vs sluice {b[max(0, n - 30):n + 30]!r}"


def test_fixture_set():
    names = {p.stem for p in FIXTURES}
    assert {"builtin_gemma3", "builtin_gemma4"} <= names
    assert len(names) >= 6


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_identical_to_jinja2(chat_tool, path):
    fx = json.loads(path.read_text(encoding="utf-8"))
    source = (ROOT / fx["template_file"]).read_text(encoding="utf-8")
    assert source == fx["template"], (
        f"{fx['template_file']} changed since the fixture was made: rerun python/make_chat_golden.py")
    assert len(fx["cases"]) >= 100

    r = run([chat_tool, path])
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert len(results) == len(fx["cases"])

    failures = []
    for i, (case, got) in enumerate(zip(fx["cases"], results)):
        if "error" in case:
            if got["ok"]:
                failures.append(f"case {i}: jinja2 raised {case['error']!r}, sluice rendered {got['text'][:120]!r}")
        elif not got["ok"]:
            failures.append(f"case {i}: sluice raised {got['error']!r}")
        elif got["text"] != case["expected"]:
            failures.append(f"case {i}: {first_difference(case['expected'], got['text'])}")
    assert not failures, f"{len(failures)} of {len(results)} cases differ:\n" + "\n".join(failures[:10])
