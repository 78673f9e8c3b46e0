#!/usr/bin/env bash
# Fuzz the image decoders: tests/fuzz/run_image.sh BUILD_DIR [SECONDS]   (from the repository root)
# Seeds from the golden decode cases (tests/data/golden/vision/decode), runs libFuzzer for
# SECONDS (default 60), keeping new inputs in fuzz-corpus/image and crash reproducers in
# fuzz-corpus/crashes (fuzz-corpus/ is gitignored). Exits non-zero if the fuzzer finds anything.
set -euo pipefail
build=${1:?usage: tests/fuzz/run_image.sh BUILD_DIR [SECONDS]}
seconds=${2:-60}
bin="$build/tests/fuzz/image_decode_fuzz"
root=fuzz-corpus
mkdir -p "$root/image" "$root/image-seeds" "$root/crashes"
cp tests/data/golden/vision/decode/*.png tests/data/golden/vision/decode/*.jpg \
   tests/data/golden/vision/decode/*.webp tests/data/golden/vision/decode/*.gif "$root/image-seeds/"
"$bin" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$root/crashes/" "$root/image" "$root/image-seeds"
