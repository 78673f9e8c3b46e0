// What Gemma 4's two encoder towers share: transformers' Gemma4ClippableLinear as llama.cpp
// stores it (a weight plus optional 1-element input_min/input_max/output_min/output_max
// tensors), and reading a whole small tensor as f32.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/linear.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"

namespace sluice {
class ThreadPool;
namespace gguf {
class GgufFile;
struct TensorInfo;
}  // namespace gguf
namespace kernels {
struct CpuKernels;
}
}  // namespace sluice

namespace sluice::models::gemma4 {

// y = clamp(W·clamp(x, in_lo, in_hi), out_lo, out_hi); ±inf bounds: no clamp.
struct ClampedLinear {
  static constexpr float kInf = std::numeric_limits<float>::infinity();
  kernels::Linear lin;
  float in_lo = -kInf, in_hi = kInf, out_lo = -kInf, out_hi = kInf;

  bool clamps_input() const { return in_lo > -kInf || in_hi < kInf; }
  bool clamps_output() const { return out_lo > -kInf || out_hi < kInf; }
  // Binds `base`.weight ([cols, rows]) and whichever of its clamp scalars the file has.
  static ClampedLinear bind(const WeightBinder& wb, ThreadPool& pool, const std::string& base, int64_t cols,
                            int64_t rows);
  // y[m × rows] from x[m × cols]; `in` holds the clamped copy of x when the input is clamped.
  void run(ThreadPool& pool, const float* x, int64_t m, float* y, std::vector<float>& in, kernels::ActScratch& scratch,
           const kernels::CpuKernels* isa) const;
};

// fn(i0, i1) over the n rows [0, n) split across the pool: the row ops between a tower's
// matmuls (norms, clips, RoPE, activations) are per row, or read rows written by an earlier
// call, so the split changes no result.
template <class Fn>
void for_rows(ThreadPool& pool, int64_t n, Fn&& fn) {
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(n, ith, nth, &i0, &i1);
    if (i0 < i1) fn(i0, i1);
  });
}

// The whole tensor dequantized to f32 (checked: a type sluice reads).
std::vector<float> read_all_f32(const gguf::GgufFile& f, const gguf::TensorInfo& t);

}  // namespace sluice::models::gemma4
