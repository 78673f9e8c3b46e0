#!/usr/bin/env bash
# Fuzz the GGUF reader: tests/fuzz/run.sh BUILD_DIR [SECONDS]   (from the repository root)
# Writes the seed corpus (malformed cases + valid files, from tests/unit/gguf/gguf_corpus.cpp)
# to fuzz-corpus/gguf-seeds, then runs libFuzzer for SECONDS (default 60), keeping new inputs
# in fuzz-corpus/gguf and crash reproducers in fuzz-corpus/crashes (fuzz-corpus/ is gitignored).
# Exits non-zero if the fuzzer finds anything.
set -euo pipefail
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}
seconds=${2:-60}
bin="$build/tests/fuzz/gguf_reader_fuzz"
root=fuzz-corpus
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$root/gguf" "$root/gguf-seeds" "$root/crashes"
"$bin" --write-seeds="$root/gguf-seeds"
"$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -dict="$here/gguf.dict" -print_final_stats=1 -artifact_prefix="$root/crashes/" \
  "$root/gguf" "$root/gguf-seeds"
