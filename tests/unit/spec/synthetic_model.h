// A stand-in for a language model: logits that are a fixed function of the last three tokens
// of the history (and of a salt, so a "draft model" can be a related but different function).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"

namespace sluice::spec::test {

inline void synthetic_logits(std::span<const int32_t> history, int32_t n_vocab, uint64_t salt, float* out,
                             float noise = 1.0f) {
  uint64_t ctx = 0x51ce;
  for (size_t i = history.size() >= 3 ? history.size() - 3 : 0; i < history.size(); ++i)
    ctx = ctx * 1000003u + static_cast<uint64_t>(history[i] + 1);
  for (int32_t v = 0; v < n_vocab; ++v) {
    // A shared base (what a draft model learns of the target) plus a salted part.
    const double base = keyed_uniform(ctx, v, RandomStream::kDraw);
    const double own = keyed_uniform(ctx ^ (salt * 0x9e3779b97f4a7c15ull), v, RandomStream::kDraft);
    out[v] = static_cast<float>(6.0 * base + noise * 2.0 * own);
  }
}

}  // namespace sluice::spec::test
