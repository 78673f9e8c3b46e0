// The packed-matmul driver shared by the x86 ISA translation units: which tile runs which
// (row group, activation rows) of a call. Internal linkage, as x86_common.h explains.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm.h"

namespace sluice::kernels {
namespace {

using TileFn = void (*)(const GemmArgs&, int64_t gi, int64_t m0);

// The decode row kernels' activation fetch, called at every even block b of a 32-block
// activation row (codes qs, scales da, sums): its codes `ahead` blocks (GemmArgs::act_ahead,
// default 4: two lines) ahead, and
// the next line of scales and of sums every 16 blocks. A row group of a long-K matrix (ffn_down:
// K = 6144-12288, 55-110 KB a group) streams more weights through L1 between two uses of an
// activation line than L1 holds, so every group re-read the activation from L2. Much further
// ahead the lines are gone again before use (docs/perf-log.md has the sweep). Prefetches never
// fault: reaching past the row is harmless.
// always_inline: GCC 12 treats a function of nothing but prefetches as free of side effects;
// when the branch kept it from being inlined early, the call was deleted outright.
__attribute__((always_inline)) inline void prefetch_act_ahead(const int8_t* qs, const float* da, const int32_t* sums,
                                                              int64_t b, int64_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(qs + 32 * (b + ahead)), _MM_HINT_T0);
  if ((b & 15) == 0) {
    _mm_prefetch(reinterpret_cast<const char*>(da + b + 16), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(sums + b + 16), _MM_HINT_T0);
  }
}

// The weight lines [p, p + bytes) of a decode kernel's tuned prefetch (GemmArgs::weight_ahead
// bytes ahead of the block being read; past the group it is the next group a thread reads).
__attribute__((always_inline)) inline void prefetch_lines(const uint8_t* p, int64_t bytes) {
  for (int64_t l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
}

// tiles[1][0] is the decode kernel (one activation row, one group at a time: one sequential
// stream per thread); several rows are compute-bound, so each group is done with up to MTMax
// rows sharing every decoded block (tiles[0][mt − 1] for mt rows).
template <int MTMax>
void drive(const GemmArgs& p, int64_t g0, int64_t g1, const TileFn (&tiles)[2][MTMax]) {
  if (p.m == 1) {
    for (int64_t gi = g0; gi < g1; ++gi) tiles[1][0](p, gi, 0);
    return;
  }
  for (int64_t gi = g0; gi < g1; ++gi)
    for (int64_t m0 = 0; m0 < p.m; m0 += MTMax) {
      const int64_t mt = p.m - m0 < MTMax ? p.m - m0 : MTMax;
      tiles[0][mt - 1](p, gi, m0);
    }
}

}  // namespace
}  // namespace sluice::kernels
