#!/usr/bin/env bash
# Fuzz the audio decoders: tests/fuzz/run_audio.sh BUILD_DIR [SECONDS]   (from the repository root)
# Seeds from the golden decode cases (tests/data/golden/audio/decode), runs libFuzzer for
# SECONDS (default 60), keeping new inputs in fuzz-corpus/audio and crash reproducers in
# fuzz-corpus/crashes (fuzz-corpus/ is gitignored). Exits non-zero if the fuzzer finds anything.
set -euo pipefail
build=${1:?usage: tests/fuzz/run_audio.sh BUILD_DIR [SECONDS]}
seconds=${2:-60}
bin="$build/tests/fuzz/audio_decode_fuzz"
root=fuzz-corpus
mkdir -p "$root/audio" "$root/audio-seeds" "$root/crashes"
cp tests/data/golden/audio/decode/*.wav tests/data/golden/audio/decode/*.flac \
   tests/data/golden/audio/decode/*.ogg tests/data/golden/audio/decode/*.mp3 "$root/audio-seeds/"
"$bin" -max_total_time="$seconds" -max_len=40000 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$root/crashes/" "$root/audio" "$root/audio-seeds"
