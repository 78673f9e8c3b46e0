// Verification of a draft against the target's rows, as the engine runs it
// (ModelRunner::verify): the target computed K+1 rows for [last token, d1 .. dK] in one step;
// row i is its view of the token after the sequence plus d1 .. di. The target's token at each
// position is drawn exactly as plain decoding would draw it — the same processed distribution,
// the same keyed random number — and verification stops at the first mismatch, so the output
// is bitwise the plain output for the same seed, whatever K and whatever the drafts (greedy
// target, n-gram, greedy model drafts: point masses; docs/speculative.md has the proof).
// Rejection sampling for drafts that carry their own distribution is kept as a tested
// reference, not run by the engine: tests/unit/spec/verify_reference.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::spec {

// Returns how many drafts were accepted, a, and leaves a + 1 tokens in `out`: the accepted
// drafts, then one token of the target's (its correction at the first mismatch, or the bonus
// token after all K). target(i) is the target's token after the sequence plus drafts[0 .. i),
// asked for i = 0, 1, .. only until it differs from drafts[i].
template <class TargetFn>
int32_t accept_matching(std::span<const int32_t> drafts, TargetFn&& target, std::vector<int32_t>& out) {
  out.clear();
  const int32_t k = static_cast<int32_t>(drafts.size());
  for (int32_t i = 0;; ++i) {
    const int32_t t = target(i);
    out.push_back(t);
    if (i == k || t != drafts[i]) return i;
  }
}

}  // namespace sluice::spec
