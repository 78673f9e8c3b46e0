#!/usr/bin/env bash
# Fuzz a media decoder: tests/fuzz/run_media.sh image|audio|multipart BUILD_DIR [SECONDS] (from
# the repository root). Seeds from the kind's golden decode cases (tests/data/golden/vision/decode,
# tests/data/golden/audio/decode; the transcription upload's multipart bodies in
# tests/fuzz/multipart), runs libFuzzer ({image,audio}_decode_fuzz, multipart_fuzz) for SECONDS
# (default 60), keeping new inputs in fuzz-corpus/KIND and crash reproducers in
# fuzz-corpus/crashes (fuzz-corpus/ is gitignored). Exits non-zero if the fuzzer finds anything.
set -euo pipefail
usage="usage: tests/fuzz/run_media.sh image|audio|multipart BUILD_DIR [SECONDS]"
kind=${1:?$usage}
build=${2:?$usage}
seconds=${3:-60}
case "$kind" in
  image) seeds=(tests/data/golden/vision/decode/*.{png,jpg,webp,gif}) max_len=16384 ;;
  audio) seeds=(tests/data/golden/audio/decode/*.{wav,flac,ogg,mp3}) max_len=40000 ;;
  multipart) seeds=(tests/fuzz/multipart/*.txt) max_len=4096 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
root=fuzz-corpus
mkdir -p "$root/$kind" "$root/$kind-seeds" "$root/crashes"
cp "${seeds[@]}" "$root/$kind-seeds/"
target="$build/tests/fuzz/${kind}_decode_fuzz"
[ "$kind" = multipart ] && target="$build/tests/fuzz/multipart_fuzz"
"$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$root/crashes/" "$root/$kind" "$root/$kind-seeds"
