// Bidirectional multi-head attention over one image's n patches (docs/spec/gemma4.md §9.3,
// scale 1): out_h = softmax(q_h·k_hᵀ)·v_h per head h. q, k, v and out are [n][H·hd] rows, head h
// at columns [h·hd, (h+1)·hd).
#pragma once

#include <cstdint>
#include <vector>

#include "threading/thread_pool.h"

namespace sluice::models::gemma4 {

struct VisionAttnArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  int64_t n = 0, heads = 0, head_dim = 0;
};

// The scalar reference: one (head, query) at a time, libm exp.
void vision_attention_ref(const VisionAttnArgs& a, ThreadPool& pool);

// The blocked kernel: kᵀ per head once, then q·kᵀ and p·v as register-tiled matmuls over blocks
// of 6 queries, exp by the engine's fixed polynomial (kernels::exp_ref, relative error < 2e-7),
// AVX2+FMA code where the CPU has it and head_dim is a multiple of 16. `kt` is scratch.
void vision_attention(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& kt);

}  // namespace sluice::models::gemma4
