// Prompt lookup over prompt + output: the longest suffix of the sequence of length n in
// [min_n, max_n] that occurred before proposes the tokens that followed its most recent
// earlier occurrence. A copied run that reaches the end of the sequence continues with its own
// proposed tokens, so a loop of period q keeps being proposed in full.
//
// The index is updated per observed token and never rescans the sequence: for each n, a hash
// of the n tokens before position t maps to t, the latest position such an n-gram was
// followed at (the sequence's own suffix has no follower yet, so a lookup never finds itself).
// Every insertion keeps the value it replaced, so `truncate` restores the index exactly.
// Memory: the tokens, one map entry per distinct n-gram and 4 bytes per (token, n).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/drafter.h"

namespace sluice::spec {

struct NgramConfig {
  int32_t min_n = 2;  // shortest suffix that may match
  int32_t max_n = 4;  // longest suffix tried (first)
};

class NgramDrafter final : public Drafter {
 public:
  static constexpr int32_t kMaxN = 32;
  explicit NgramDrafter(const NgramConfig& cfg = {});  // throws sluice::Error on 1 <= min_n <= max_n <= kMaxN broken

  void observe(std::span<const int32_t> tokens) override;
  void propose(int32_t max_k, Draft& out) override;
  void truncate(int64_t n_tokens) override;
  void reset() override;
  int64_t n_tokens() const override { return static_cast<int64_t>(tokens_.size()); }
  bool cheap() const override { return true; }

  // Length of the suffix the last propose() matched (0: none).
  int32_t last_match_n() const { return last_match_n_; }

 private:
  uint64_t key(int64_t end, int32_t n) const;  // hash of tokens_[end - n, end) and n
  bool same(int64_t end_a, int64_t end_b, int32_t n) const;
  int32_t n_inserted_at(int64_t t) const;  // how many n-grams position t was the follower of

  NgramConfig cfg_;
  std::vector<int32_t> tokens_;
  std::unordered_map<uint64_t, int32_t> last_;  // n-gram → latest follower position
  std::vector<int32_t> replaced_;               // per insertion in order: the value it replaced, -1 none
  int32_t last_match_n_ = 0;
};

}  // namespace sluice::spec
