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

// Which code runs the blocked kernel: the best the CPU has (kAuto), or one asked for (tests).
// The AVX2 and AVX-512 paths give the same bits (the same FMA chain per output).
enum class VisionAttnPath { kAuto, kPortable, kAvx2, kAvx512 };

// The blocked kernel: kᵀ per head once, then q·kᵀ and p·v as register-tiled matmuls over blocks
// of 6 queries, exp by the engine's fixed polynomial (kernels::exp_ref, relative error < 2e-7),
// AVX-512 or AVX2+FMA code where the CPU has it and head_dim is a multiple of 16; a path the
// CPU lacks falls back to the portable one. `kt` is scratch.
// = vision_attention_pack, then vision_attention_rows over [0, n).
void vision_attention(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& kt,
                      VisionAttnPath path = VisionAttnPath::kAuto);
// Whether `path` itself runs here for this head_dim (not a fallback).
bool vision_attention_runs(VisionAttnPath path, int64_t head_dim);

// The same in two halves, for an encode cut into row ranges (models::EncodeJob): pack k and v
// into `kt` once they are complete, then any query ranges [i0, i1), i0 a multiple of
// kVisionQueryBlock and i1 one too or n. A query's output has the same bits whichever range
// computes it (each block of queries is computed alone, in the same order).
constexpr int64_t kVisionQueryBlock = 6;
void vision_attention_pack(const VisionAttnArgs& a, ThreadPool& pool, std::vector<float>& kt,
                           VisionAttnPath path = VisionAttnPath::kAuto);
void vision_attention_rows(const VisionAttnArgs& a, ThreadPool& pool, const std::vector<float>& kt, int64_t i0,
                           int64_t i1, VisionAttnPath path = VisionAttnPath::kAuto);

}  // namespace sluice::models::gemma4
