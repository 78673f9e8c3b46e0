// The packed-matmul driver shared by the x86 ISA translation units: which tile runs which
// (row group, activation rows) of a call. Internal linkage, as x86_common.h explains.
#pragma once

#include <cstdint>

#include "kernels/gemm.h"

namespace sluice::kernels {
namespace {

using TileFn = void (*)(const GemmArgs&, int64_t gi, int64_t m0);

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
