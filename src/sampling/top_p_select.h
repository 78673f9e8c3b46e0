// Internal to src/sampling: top-p's cut by selection rather than by sorting.
#pragma once

#include <cstddef>
#include <vector>

#include "sampling/sampler.h"

namespace sluice::sampling_detail {

// Top-p's cut over a candidate list in token-id order (top_p_select.cpp), as Sampler's chain
// defines it: the smallest prefix in logit order (higher first, lower id among equals) whose
// running mass, summed in that order and divided by the list's total summed in id order,
// reaches top_p. `cut` is that prefix's length with c[0 .. cut) in order; 0 when the mass
// did not reach top_p within the `sorted` first ranks it put in order (c[0 .. sorted), mass
// `cum`), the rest c[sorted .. n) all lower and still in id order, for the caller to go on.
struct TopPCut {
  size_t cut = 0;
  size_t sorted = 0;
  double cum = 0;
  double total = 0;
};
TopPCut select_top_p(std::vector<TokenProb>& c, size_t n, float mx, float inv_t, float top_p,
                     std::vector<TokenProb>& spare);
// Lists shorter than this are cut by the sorting rule (a partial sort of a few ranks is cheaper).
inline constexpr size_t kTopPSelectMin = 2048;

}  // namespace sluice::sampling_detail
