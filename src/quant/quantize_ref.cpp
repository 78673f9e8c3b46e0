// Scalar reference quantizers: ggml's quantize_row_*_ref (ggml-quants.c) step by step, in f32,
// without FMA contraction (this file is built with -ffp-contract=off). That is also exactly
// what gguf-py 0.19.0 computes for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/BF16, so the bytes match it.
//
// Degenerate inputs (Inf/NaN, or scales whose reciprocal overflows) are not an error: ggml
// casts out-of-range floats to small ints there, which is UB in C. We reproduce what ggml's
// x86 build does (cvttss2si: NaN and out-of-range give INT32_MIN, then the low byte is
// kept) with defined C++ so the sanitizers stay quiet and the bytes stay deterministic.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/ref_rows.h"

namespace sluice::quant::ref {

int nearest_int(float f) {
  const float val = f + 12582912.0f;  // 1.5 * 2^23: the integer lands in the low mantissa bits
  int32_t i;
  std::memcpy(&i, &val, sizeof i);
  return (i & 0x007FFFFF) - 0x00400000;
}

namespace {

// C's `(int8_t)t` / `(uint8_t)t` for a float t, as ggml's x86 build evaluates it (see top).
// Equals plain truncation toward zero whenever -129 < t < 256.
int8_t trunc_to_i8(float t) {
  const int32_t i = (t > -2147483904.0f && t < 2147483648.0f) ? static_cast<int32_t>(t) : INT32_MIN;
  return static_cast<int8_t>(i);  // C++20: modular
}

// Per-block scan of ggml's legacy quantizers: the element with the largest |x| (the first one
// on ties, since only a strictly larger |x| replaces it), sign kept.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Plain minimum and maximum (Q4_1, Q5_1). ggml starts from +-FLT_MAX.
void min_max(const float* x, int n, float* mn, float* mx) {
  float lo = 3.402823466e+38f, hi = -3.402823466e+38f;
  for (int j = 0; j < n; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  *mn = lo;
  *mx = hi;
}

inline float recip_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

}  // namespace

// ---- scalar types ----

void from_f32_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void from_f32_f16(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) store_u16(p + 2 * i, f32_to_f16(src[i]));
}

void from_f32_bf16(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) store_u16(p + 2 * i, f32_to_bf16(src[i]));
}

// ---- legacy 32-element blocks (quants.md §3.3, §3.4, §6.2) ----

// Q4_0: d = max / -8 (unrounded for id), q = min(15, trunc(x*id + 8.5)): two roundings.
void from_f32_q4_0(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float* x = src + i * kQK4_0;
    const float d = signed_absmax(x, kQK4_0) / -8;
    const float id = recip_or_zero(d);
    BlockQ4_0 b;
    b.d = f32_to_f16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQK4_0 / 2] * id;
      const auto xi0 = static_cast<uint8_t>(std::min<int>(15, trunc_to_i8(x0 + 8.5f)));
      const auto xi1 = static_cast<uint8_t>(std::min<int>(15, trunc_to_i8(x1 + 8.5f)));
      b.qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));  // ggml does not mask xi0 either
    }
    store_block(dst, i, b);
  }
}

// Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min)*id + 0.5)).
void from_f32_q4_1(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_1; ++i) {
    const float* x = src + i * kQK4_1;
    float mn, mx;
    min_max(x, kQK4_1, &mn, &mx);
    const float d = (mx - mn) / 15;
    const float id = recip_or_zero(d);
    BlockQ4_1 b;
    b.d = f32_to_f16(d);
    b.m = f32_to_f16(mn);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const float x0 = (x[j] - mn) * id;
      const float x1 = (x[j + kQK4_1 / 2] - mn) * id;
      const auto xi0 = static_cast<uint8_t>(std::min<int>(15, trunc_to_i8(x0 + 0.5f)));
      const auto xi1 = static_cast<uint8_t>(std::min<int>(15, trunc_to_i8(x1 + 0.5f)));
      b.qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
    store_block(dst, i, b);
  }
}

// Q5_0: d = max / -16, q = min(31, trunc(x*id + 16.5)); bit 4 of q[e] -> bit e of qh.
void from_f32_q5_0(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_0; ++i) {
    const float* x = src + i * kQK5_0;
    const float d = signed_absmax(x, kQK5_0) / -16;
    const float id = recip_or_zero(d);
    BlockQ5_0 b;
    b.d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQK5_0 / 2] * id;
      const auto xi0 = static_cast<uint8_t>(std::min<int>(31, trunc_to_i8(x0 + 16.5f)));
      const auto xi1 = static_cast<uint8_t>(std::min<int>(31, trunc_to_i8(x1 + 16.5f)));
      b.qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + kQK5_0 / 2);
    }
    store_u32(b.qh, qh);
    store_block(dst, i, b);
  }
}

// Q5_1: d = (max - min) / 31, q = trunc((x - min)*id + 0.5) with no clamp (cannot exceed 31).
void from_f32_q5_1(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_1; ++i) {
    const float* x = src + i * kQK5_1;
    float mn, mx;
    min_max(x, kQK5_1, &mn, &mx);
    const float d = (mx - mn) / 31;
    const float id = recip_or_zero(d);
    BlockQ5_1 b;
    b.d = f32_to_f16(d);
    b.m = f32_to_f16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const float x0 = (x[j] - mn) * id;
      const float x1 = (x[j + kQK5_1 / 2] - mn) * id;
      const auto xi0 = static_cast<uint8_t>(trunc_to_i8(x0 + 0.5f));
      const auto xi1 = static_cast<uint8_t>(trunc_to_i8(x1 + 0.5f));
      b.qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + kQK5_1 / 2);
    }
    store_u32(b.qh, qh);
    store_block(dst, i, b);
  }
}

// Q8_0: d = amax / 127, qs = roundf(x*id) (half away from zero), in [-127, 127].
void from_f32_q8_0(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float* x = src + i * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = recip_or_zero(d);
    BlockQ8_0 b;
    b.d = f32_to_f16(d);
    for (int j = 0; j < kQK8_0; ++j) b.qs[j] = trunc_to_i8(std::round(x[j] * id));
    store_block(dst, i, b);
  }
}

// ---- Q8_K, activation side (quants.md §9.4) ----

// iscale = -127/max, qs = min(127, nearest_int(iscale*x)), d = 1/iscale in f32 (not f16;
// and computed as 1/iscale: -max/127 differs in the last bit for about a quarter of inputs),
// bsums = sums of 16 codes. An all-zero block gets d = 0, qs = 0 and
// (unlike ggml, which leaves them stale) bsums = 0.
void from_f32_q8_k(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ8_K b;
    std::memset(&b, 0, sizeof b);
    const float max = signed_absmax(x, kQK_K);
    if (max != 0.0f) {
      const float iscale = -127.0f / max;
      for (int j = 0; j < kQK_K; ++j) {
        b.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
      }
      for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
        b.bsums[g] = static_cast<int16_t>(sum);
      }
      b.d = 1 / iscale;
    }
    store_block(dst, i, b);
  }
}

}  // namespace sluice::quant::ref
