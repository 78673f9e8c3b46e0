#!/usr/bin/env bash
# The aarch64 suites under qemu-aarch64-static (make test-arm64). Arguments: the cross build
# folder (cmake/toolchain-aarch64-linux-gnu.cmake), the native x86 build folder and the real
# model file (both for the cross-architecture token check; that check is skipped when the model
# is absent).
#   -cpu max         (every feature: i8mm, dotprod, SVE): every test binary built (the kernel
#                    tests and the model tests' ISA test run every set themselves), the
#                    dispatch picking i8mm; the tiny golden tests again with each other set
#                    forced (SLUICE_ISA); then `sluice run -n 8 --temp 0` on the real model,
#                    whose text must equal the x86 build's, with each ARM set, and once
#                    sampled (--temp 0.8 --seed 3)
#   -cpu cortex-a76  (dotprod, no i8mm): the dispatch picks dotprod; the tiny golden tests
#   -cpu cortex-a72  (Armv8.0 NEON):     the dispatch picks neon;    the tiny golden tests
set -euo pipefail
ARM=${1:?arm64 build folder}
X86=${2:?x86 build folder}
MODEL=${3:-models/gemma-3-270m-q4_k_m.gguf}
QEMU=${QEMU:-qemu-aarch64-static}
T=$ARM/tests/unit

qrun() {  # qrun CPU [ENV=VALUE...] -- BINARY ARGS...
  local cpu=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== qemu -cpu $cpu ${envs[*]}: $*"
  env "${envs[@]}" "$QEMU" -cpu "$cpu" "$@"
}
brief=(--gtest_brief=1)

qrun max -- "$T/base/base_test" "${brief[@]}"
qrun max -- "$T/threading/threading_test" "${brief[@]}"
qrun max -- "$T/quant/quant_test" "${brief[@]}"
qrun max SLUICE_EXPECT_ISA=i8mm -- "$T/kernels/kernels_test" "${brief[@]}"
qrun max -- "$T/models/models_test" "${brief[@]}"
qrun max -- "$T/sampling/sampling_test" "${brief[@]}"
qrun max -- "$T/media/media_test" "${brief[@]}"   # image and audio decoding, the features
golden='*Golden*'
for isa in scalar neon dotprod; do
  qrun max SLUICE_ISA=$isa -- "$T/models/models_test" "${brief[@]}" --gtest_filter="$golden"
done

qrun cortex-a76 SLUICE_EXPECT_ISA=dotprod -- "$T/kernels/kernels_test" "${brief[@]}" --gtest_filter=CpuKernels.DispatchPicksExpectedSet
qrun cortex-a76 -- "$T/models/models_test" "${brief[@]}" --gtest_filter="$golden"
qrun cortex-a72 SLUICE_EXPECT_ISA=neon -- "$T/kernels/kernels_test" "${brief[@]}" --gtest_filter=CpuKernels.DispatchPicksExpectedSet
qrun cortex-a72 -- "$T/models/models_test" "${brief[@]}" --gtest_filter="$golden"

# Serving with KV-cache events: the arm64 build links the target's libzmq5 (Debian's
# libzmq3-dev is not multiarch), so the publisher starts and the server comes up.
klog=$(mktemp)
"$QEMU" -cpu max "$ARM/apps/sluice/sluice" serve -m tests/data/golden/tiny-gemma3.q8_0.gguf --port 0 -c 256 \
  -t 2 --kv-events tcp://127.0.0.1:9 --kv-events-replay 'tcp://127.0.0.1:*' > "$klog" 2>&1 &
kpid=$!
for _ in $(seq 1200); do
  grep -q "listening on" "$klog" && break
  kill -0 "$kpid" 2> /dev/null || break
  sleep 0.1
done
kill -TERM "$kpid" 2> /dev/null || true
wait "$kpid" || true
echo "== qemu -cpu max: serve --kv-events: $(grep -h 'KV events on' "$klog")"
if ! grep -q "KV events on" "$klog" || ! grep -q "KV-event replay on" "$klog" || ! grep -q "listening on" "$klog"; then
  cat "$klog" >&2
  echo "FAIL: the arm64 build does not serve with --kv-events" >&2
  exit 1
fi
rm -f "$klog"

if [ ! -f "$MODEL" ]; then
  echo "== $MODEL absent: cross-architecture token check skipped"
  exit 0
fi
# Greedy decoding of the real model: the same text on ARM (each set) as on x86.
args=(run -m "$MODEL" -p "The river begins high in the mountains, where" -n 8 --temp 0 -t 2)
want=$("$X86/apps/sluice/sluice" "${args[@]}" 2>/dev/null)
echo "== x86: $want"
for isa in neon dotprod i8mm; do
  got=$(QEMU_CPU=max SLUICE_ISA=$isa "$QEMU" -cpu max "$ARM/apps/sluice/sluice" "${args[@]}" 2>/dev/null)
  echo "== qemu -cpu max, $isa: $got"
  if [ "$got" != "$want" ]; then
    echo "FAIL: arm64 ($isa) greedy text differs from x86" >&2
    exit 1
  fi
done
# Sampled decoding: the sampler's weights (4 NEON lanes here, 16 AVX-512 lanes on most x86
# hosts) must be the same bits, so the same seed draws the same tokens.
sargs=(run -m "$MODEL" -p "The river begins high in the mountains, where" -n 8 --temp 0.8 --seed 3 -t 2)
want=$("$X86/apps/sluice/sluice" "${sargs[@]}" 2>/dev/null)
got=$(QEMU_CPU=max "$QEMU" -cpu max "$ARM/apps/sluice/sluice" "${sargs[@]}" 2>/dev/null)
echo "== sampled, x86: $want"
echo "== sampled, qemu -cpu max: $got"
if [ "$got" != "$want" ]; then
  echo "FAIL: arm64 sampled text differs from x86 (same seed)" >&2
  exit 1
fi
# Stronger: the logits of a short sequence, bit for bit (the default set, i8mm).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids=(logits -m "$MODEL" --ids 2,818,5279,563,1024,2003 -t 2)
"$X86/apps/sluice/sluice" "${ids[@]}" --out "$tmp/x86.f32" > /dev/null 2>&1
QEMU_CPU=max "$QEMU" -cpu max "$ARM/apps/sluice/sluice" "${ids[@]}" --out "$tmp/arm64.f32" > /dev/null 2>&1
if ! cmp -s "$tmp/x86.f32" "$tmp/arm64.f32"; then
  echo "FAIL: arm64 logits differ from x86 ($(cmp "$tmp/x86.f32" "$tmp/arm64.f32" | head -1))" >&2
  exit 1
fi
echo "== logits of 6 positions: bitwise equal on x86 and arm64"
echo "arm64 suites passed"
