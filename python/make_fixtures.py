#!/usr/bin/env python3
"""Rebuild the tiny-model GGUFs the tests read (tests/data/golden/<id>.<type>.gguf) from the
committed manifest, and check each against the sha256 that python/make_golden.py recorded.

    .venv/bin/python python/make_fixtures.py           # `make fixtures`; every test target runs it

Only the transformers outputs (logits, taps) and the manifest are committed. The weights are
drawn from the manifest's seed with numpy (make_tiny_model.draw_state) and converted with
python/convert_hf_to_gguf.py, exactly as make_golden.py did before it ran transformers on the
same weights; the hash check proves the rebuilt file is the one the golden logits belong to.
Needs numpy + gguf only (the main .venv). A file already present with the right hash is kept.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import convert_hf_to_gguf as conv  # noqa: E402
import convert_audio_mmproj as conv_audio  # noqa: E402
import convert_vision_mmproj as conv_vision  # noqa: E402
import make_tiny_model as tiny  # noqa: E402
import tiny_audio  # noqa: E402
import tiny_vision  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden"


def sha256(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def model_state(entry: dict):
    """The HF tensors of one manifest model, drawn from its seed."""
    return tiny.draw_state(entry["arch"], entry["seed"], entry["hf_tensors"], entry["options"])


def write_gguf(mid: str, entry: dict, outtype: str, path, state=None) -> dict:
    """Write one variant's GGUF; returns the converter's tensor summary."""
    state = model_state(entry) if state is None else state
    return conv.convert_state(entry["hf_config"], state, path, outtype, name=mid, verbose=False,
                              **entry.get("convert_options", {}))


def rebuild(golden: pathlib.Path, manifest: dict, verbose: bool = True) -> list[str]:
    """Make every variant's GGUF present and hash-correct. Returns the problems found."""
    problems = []
    # "drafts": smaller models with the same vocabulary, for the speculative-decoding tests;
    # "assistants": Gemma 4 assistants (make_assistant_golden.py)
    entries = {**manifest["models"], **manifest.get("drafts", {}), **manifest.get("assistants", {})}
    for mid, entry in entries.items():
        state = None
        for ot, v in entry["variants"].items():
            path = golden / v["gguf"]
            if path.exists() and sha256(path) == v["gguf_sha256"]:
                continue
            if state is None:
                state = model_state(entry)
            tmp = path.with_suffix(".gguf.tmp")
            write_gguf(mid, entry, ot, tmp, state)
            got = sha256(tmp)
            if got != v["gguf_sha256"]:
                tmp.unlink()
                problems.append(f"{path.name}: rebuilt file has sha256 {got}, the manifest says "
                                f"{v['gguf_sha256']} (numpy/gguf versions differ from "
                                f"python/requirements.txt, or the manifest is stale: make golden)")
                continue
            tmp.replace(path)
            if verbose:
                print(f"fixtures: wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
                      f"({path.stat().st_size} B, sha256 ok)", file=sys.stderr)
    return problems


def rebuild_towers(golden: pathlib.Path, verbose: bool = True) -> list[str]:
    """The tiny encoder towers' mmproj GGUFs: vision/manifest.json and audio/towers.json
    "towers" (make_vision_golden.py, make_audio_tower_golden.py)."""
    def vision(t, tmp):
        opts = t["options"]
        conv_vision.convert_vision_state(tiny_vision.hf_vision_config(opts), opts["text_hidden"],
                                         tiny_vision.draw_state(t["seed"], opts), tmp, "f32", name=t["id"],
                                         verbose=False)

    def audio(t, tmp):
        opts = t["options"]
        conv_audio.convert_audio_state(tiny_audio.hf_audio_config(opts), opts["text_hidden"],
                                       tiny_audio.draw_state(t["seed"], opts), tmp, "f32", name=t["id"],
                                       verbose=False)

    problems = []
    for kind, file, write in (("vision", "manifest.json", vision), ("audio", "towers.json", audio)):
        path = golden / kind / file
        if not path.exists():
            continue
        for t in json.loads(path.read_text()).get("towers", []):
            out = golden / t["gguf"]
            if out.exists() and sha256(out) == t["gguf_sha256"]:
                continue
            tmp = out.with_suffix(".gguf.tmp")
            write(t, tmp)
            if sha256(tmp) != t["gguf_sha256"]:
                tmp.unlink()
                problems.append(f"{out.name}: rebuilt file's sha256 differs from {kind}/{file}")
                continue
            tmp.replace(out)
            if verbose:
                print(f"fixtures: wrote {out.name} ({out.stat().st_size} B, sha256 ok)", file=sys.stderr)
    return problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default=str(GOLDEN), help="golden directory (manifest.json inside)")
    p.add_argument("-q", "--quiet", action="store_true")
    a = p.parse_args(argv)
    golden = pathlib.Path(a.dir)
    manifest = json.loads((golden / "manifest.json").read_text())
    problems = rebuild(golden, manifest, verbose=not a.quiet) + rebuild_towers(golden, verbose=not a.quiet)
    for msg in problems:
        print(f"fixtures: {msg}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
