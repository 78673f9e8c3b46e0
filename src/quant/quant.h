// Scalar reference (de)quantization for every weight format sluice reads (quants.md).
// These are the definition of correct: SIMD kernels are tested against them. They are
// compiled with -ffp-contract=off so results never depend on FMA contraction, and they
// follow ggml's operation order so dequantized values match ggml / gguf-py bit for bit.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace sluice::quant {

struct QuantTraits {
  DType type;
  // dst[0..n) = decoded values of n elements (n a multiple of the block size).
  void (*to_f32_ref)(const void* src, float* dst, int64_t n);
  // Encodes n floats into n / block_elems blocks; nullptr where we have no quantizer.
  void (*from_f32_ref)(const float* src, void* dst, int64_t n);
};

// Traits for a supported type (dtype_info(t).supported); nullptr otherwise.
const QuantTraits* traits(DType t);

// Convenience wrappers; throw sluice::Error for unsupported types or n not a block multiple.
void dequantize_ref(DType t, const void* src, float* dst, int64_t n);
void quantize_ref(DType t, const float* src, void* dst, int64_t n);
bool can_quantize(DType t);

// Q8_K, the activation format of the K-quant dot products (quants.md §9.4; block layout in
// quant/blocks.h). Not a weight type, so not in the traits table. n must be a multiple of 256
// (sluice::Error otherwise). An all-zero block gets d = 0, qs = 0 and bsums = 0.
void quantize_row_q8_k_ref(const float* src, void* dst, int64_t n);
void dequantize_row_q8_k_ref(const void* src, float* dst, int64_t n);

}  // namespace sluice::quant
