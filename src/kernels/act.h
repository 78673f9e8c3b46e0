// Activation rows in the formats the packed matmul kernels read (packed.h). Each activation
// row is quantized ONCE per matmul (per row: batch invariant) and then dotted with every
// weight row.
//
//   kA8_32  (pairs with Q4_0, Q5_0, Q8_0): the Q8_0 activation of dot_ref — per 32 elements
//           d = f16(amax/127) and codes round(x/d') (d' the unrounded d) — stored for SIMD:
//           qs[K] i8 | d[K/32] f32 (the f16 value, widened) | sum[K/32] i32 (Σ qs of the block)
//   kA8_256 (pairs with Q4_K, Q6_K): Q8_K — per 256 elements d = 1/iscale (f32), codes
//           nearest(x·iscale) — stored as
//           qs[K] i8 | d[K/256] f32 | bsum[K/16] i32 (Σ qs per 16)
//   kF32    (pairs with F32, F16, BF16): the f32 values themselves.
// Codes and scales are bit-identical to quantize_act_row (dot_ref.h); only the layout differs.
#pragma once

#include <cstdint>

#include "kernels/packed.h"

namespace sluice::kernels {

// Bytes of one row of K elements in format f, rounded up to 64 so rows stay aligned.
uint64_t act_row_stride(ActFormat f, int64_t k);

// Element counts a row of format f needs K to be a multiple of (32, 256, 1).
int64_t act_block_elems(ActFormat f);

// A view of M activation rows: row m starts at base + m·stride.
struct ActRows {
  ActFormat format = ActFormat::kF32;
  const uint8_t* base = nullptr;
  uint64_t stride = 0;
  int64_t k = 0;
  const int8_t* qs(int64_t m) const { return reinterpret_cast<const int8_t*>(base + m * stride); }
  const float* d(int64_t m) const { return reinterpret_cast<const float*>(base + m * stride + k); }
  // kA8_32: block sums; kA8_256: per-16 sums.
  const int32_t* sums(int64_t m) const {
    const int64_t nd = format == ActFormat::kA8_32 ? k / 32 : k / 256;
    return reinterpret_cast<const int32_t*>(base + m * stride + k + 4 * nd);
  }
  const float* f32(int64_t m) const { return reinterpret_cast<const float*>(base + m * stride); }
};

// Scalar reference quantizer of one row (x has k elements) into out (act_row_stride bytes).
void quantize_act_ref(ActFormat f, const float* x, int64_t k, uint8_t* out);

}  // namespace sluice::kernels
