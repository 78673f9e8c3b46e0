// Entry points of the AVX-512 set defined in this folder's translation units, for its table
// (dot_avx512.cpp). Included only by files compiled with the AVX-512 flags.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cpu_kernels.h"
#include "kernels/gemm.h"

namespace sluice::kernels::avx512 {

void gemm_q4_0(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_q5_0(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_q8_0(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_q4_k(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_q6_k(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_q6_k_gfni(const GemmArgs& p, int64_t g0, int64_t g1);  // needs GFNI too
void gemm_q6_k8(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_f32(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_f16(const GemmArgs& p, int64_t g0, int64_t g1);
void gemm_bf16(const GemmArgs& p, int64_t g0, int64_t g1);
void quantize_a8_32(const float* x, int64_t k, uint8_t* out);
void quantize_a8_256(const float* x, int64_t k, uint8_t* out);

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void add_rms_norm(float* x, const float* a, const float* w, int64_t n, float eps);
void gelu_mul(const float* g, const float* u, float* out, int64_t n);
void sigmoid_mul(const float* a, const float* b, float* out, int64_t n);
void softcap(float* x, int64_t n, float cap);
void scale(float* x, int64_t n, float s);
void rope(float* x, const float* cs, int64_t n_rot);
int64_t argmax(const float* x, int64_t n);
void to_f16(const float* x, uint16_t* out, int64_t n);
void to_bf16(const float* x, uint16_t* out, int64_t n);
void attention(const AttnArgs& a);
void attention_chunks(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states);
void attention_merge(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out);
uint64_t stream_sum(const uint8_t* p, uint64_t bytes);

}  // namespace sluice::kernels::avx512
