// Compute ops on f32 activations. Shapes in comments are [rows × cols], row-major.
// Every reduction runs in a fixed order that depends only on the vector length, never on
// the batch size or the thread count, so a sequence's results are identical alone or
// batched (batch invariance).
#pragma once

#include <cstdint>

#include "tensor/weights.h"

namespace sluice {
class ThreadPool;
}

namespace sluice::kernels {

// y[M × W.rows] = x[M × W.cols] · Wᵀ for any supported weight type, in f32: each weight
// row is decoded once and dotted with every activation row. The exact path the models use
// today (it matches transformers on the dequantized weights to ~1e-6).
void matmul(ThreadPool& pool, const Mat& w, const float* x, int64_t m, float* y);

// The same product in llama.cpp's scheme: each activation row is converted once to the
// weight type's vec_dot_type (Q8_0 / Q8_1 / Q8_K / F16 / BF16) and rows are dotted with
// dot_ref (dot_ref.h). The scalar reference of the int8 SIMD kernels (next step); not yet
// used by the models, because without SIMD it is slower for prefill than `matmul`.
void matmul_act_quant(ThreadPool& pool, const Mat& w, const float* x, int64_t m, float* y);

// Row r of W decoded to f32 (embedding lookup). out has W.cols elements.
void dequant_row(const Mat& w, int64_t r, float* out);

// Dot product with a fixed reduction order (8 interleaved partial sums, then a fixed tree).
float dot(const float* a, const float* b, int64_t n);

// y = x / sqrt(mean(x²) + eps) · w   (w == nullptr: no weight). x and y may alias.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
float gelu_tanh(float x);

// NeoX ("rotate half") RoPE on one head of length head_dim in place: pairs (i, i + n_rot/2)
// for i < n_rot/2 rotate by pos·freq_scale·base^(−2i/n_rot) / freq_factors[i]
// (freq_factors may be nullptr; Gemma 4's proportional RoPE uses them).
void rope_neox(float* x, int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors);

}  // namespace sluice::kernels
