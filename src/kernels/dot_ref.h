// Scalar reference of llama.cpp's CPU matmul scheme (quants.md §9): the activation row is
// quantized once to the weight type's `vec_dot_type`, then each weight row is dotted with it
// block by block — exact integer sums inside a block, f32 scale products accumulated in block
// order. This is the definition of correct for the SIMD kernels. Everything here depends only
// on the two rows passed in (batch invariance), and is compiled with -ffp-contract=off.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

namespace sluice::kernels {

// The activation format that pairs with a weight type on llama.cpp's CPU backend (§9.1):
//   Q4_0, Q5_0, Q8_0, IQ4_NL     -> Q8_0
//   Q4_1, Q5_1                   -> Q8_1
//   Q2_K..Q6_K, IQ4_XS           -> Q8_K
//   F32 -> F32, F16 -> F16, BF16 -> BF16
// sluice::Error for a type outside quant::traits.
DType vec_dot_type(DType weight_type);

// Bytes of one activation row of n elements quantized for `weight_type` (n a multiple of the
// weight's block size, which is also the activation format's).
size_t act_row_bytes(DType weight_type, int64_t n);

// out[0 .. act_row_bytes) = x[0..n) in vec_dot_type(weight_type):
//   Q8_0: d = amax/127 (f16), qs = roundf(x·(1/d)) — ggml's quantize_row_q8_0_ref;
//   Q8_1: the Q8_0 codes and d, plus s = f16(d·Σqs);
//   Q8_K: quant::quantize_row_q8_k_ref;  F16 / BF16: round to nearest even;  F32: copy.
// sluice::Error for an unsupported type or n not a block multiple.
void quantize_act_row(DType weight_type, const float* x, void* out, int64_t n);

// Σ w·a of one weight row (raw blocks of weight_type) and one activation row made by
// quantize_act_row(weight_type, ...), both of n elements. Neither pointer needs alignment.
float dot_ref(DType weight_type, const void* w_row, const void* act_row, int64_t n);

}  // namespace sluice::kernels
