// The packed matmul kernel interface: y = a · Wᵀ over a range of row groups of one packed
// matrix (packed.h) and M activation rows (act.h). Every ISA set (cpu_kernels.h) provides one
// kernel per packed format; `gemm_ref` is the scalar reference they are tested against
// (bit-identical results: same integer block sums, same f32 operations in the same order).
#pragma once

#include <cstdint>

#include "kernels/act.h"
#include "kernels/packed.h"

namespace sluice::kernels {

struct GemmArgs {
  PackedFormat format = PackedFormat::kNone;
  const uint8_t* w = nullptr;  // group 0 of the packed matrix
  uint64_t group_bytes = 0;
  int64_t k = 0;     // columns (reduction length)
  int64_t rows = 0;  // valid rows; rows of the last group past it are not written
  ActRows a;         // M activation rows in packed_act_format(format)
  int64_t m = 0;
  float* y = nullptr;  // y[mi·ldy + r] for output row r of the matrix
  int64_t ldy = 0;
  // Decode kernels only (m == 1), from tuning.h: weight bytes prefetched ahead (0: none) and
  // activation blocks fetched ahead. They move prefetches, never results.
  int32_t weight_ahead = 0;
  int32_t act_ahead = 4;
};

// Computes the outputs of row groups [g0, g1) for all M activation rows.
using GemmKernel = void (*)(const GemmArgs& args, int64_t g0, int64_t g1);

void gemm_ref(const GemmArgs& args, int64_t g0, int64_t g1);

}  // namespace sluice::kernels
