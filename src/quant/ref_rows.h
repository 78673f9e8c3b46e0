// Per-type scalar reference row functions (internal to sluice_quant; traits.cpp puts them in
// the traits table). All take n = number of elements, a multiple of the type's block size
// (the callers check); src/dst may have any alignment.
#pragma once

#include <cstdint>

namespace sluice::quant::ref {

// dequant_ref.cpp: raw blocks -> f32, ggml's operation order (quants.md §1).
void to_f32_f32(const void* src, float* dst, int64_t n);
void to_f32_f16(const void* src, float* dst, int64_t n);
void to_f32_bf16(const void* src, float* dst, int64_t n);
void to_f32_q4_0(const void* src, float* dst, int64_t n);
void to_f32_q4_1(const void* src, float* dst, int64_t n);
void to_f32_q5_0(const void* src, float* dst, int64_t n);
void to_f32_q5_1(const void* src, float* dst, int64_t n);
void to_f32_q8_0(const void* src, float* dst, int64_t n);
void to_f32_q2_k(const void* src, float* dst, int64_t n);
void to_f32_q3_k(const void* src, float* dst, int64_t n);
void to_f32_q4_k(const void* src, float* dst, int64_t n);
void to_f32_q5_k(const void* src, float* dst, int64_t n);
void to_f32_q6_k(const void* src, float* dst, int64_t n);
void to_f32_q8_k(const void* src, float* dst, int64_t n);
void to_f32_iq4_nl(const void* src, float* dst, int64_t n);
void to_f32_iq4_xs(const void* src, float* dst, int64_t n);

// quantize_ref.cpp, quantize_q6_k.cpp: f32 -> raw blocks, ggml's quantize_row_*_ref.
void from_f32_f32(const float* src, void* dst, int64_t n);
void from_f32_f16(const float* src, void* dst, int64_t n);
void from_f32_bf16(const float* src, void* dst, int64_t n);
void from_f32_q4_0(const float* src, void* dst, int64_t n);
void from_f32_q4_1(const float* src, void* dst, int64_t n);
void from_f32_q5_0(const float* src, void* dst, int64_t n);
void from_f32_q5_1(const float* src, void* dst, int64_t n);
void from_f32_q8_0(const float* src, void* dst, int64_t n);
void from_f32_q6_k(const float* src, void* dst, int64_t n);
void from_f32_q8_k(const float* src, void* dst, int64_t n);

// ggml's nearest_int (quants.md §8.4): add 1.5*2^23 and read the low mantissa bits.
// Round to nearest, ties to even, for |f| <= 4194303; outside that range (and for Inf/NaN)
// it returns the same well-defined garbage as ggml instead of invoking UB.
int nearest_int(float f);

}  // namespace sluice::quant::ref
