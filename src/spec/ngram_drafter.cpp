#include "spec/ngram_drafter.h"

#include <algorithm>
#include <limits>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/error.h"

namespace sluice::spec {

NgramDrafter::NgramDrafter(const NgramConfig& cfg) : cfg_(cfg) {
  if (cfg.min_n < 1 || cfg.min_n > cfg.max_n || cfg.max_n > kMaxN)
    fail("ngram drafter: need 1 <= min_n <= max_n <= %d, got min_n %d, max_n %d", kMaxN, cfg.min_n, cfg.max_n);
}

uint64_t NgramDrafter::key(int64_t end, int32_t n) const {
  return XXH3_64bits_withSeed(tokens_.data() + (end - n), static_cast<size_t>(n) * sizeof(int32_t),
                              static_cast<uint64_t>(n));
}

bool NgramDrafter::same(int64_t end_a, int64_t end_b, int32_t n) const {
  return std::equal(tokens_.begin() + (end_a - n), tokens_.begin() + end_a, tokens_.begin() + (end_b - n));
}

// Position t follows the n-grams ending at t for n in [min_n, min(max_n, t)].
int32_t NgramDrafter::n_inserted_at(int64_t t) const {
  const int64_t hi = std::min<int64_t>(cfg_.max_n, t);
  return hi < cfg_.min_n ? 0 : static_cast<int32_t>(hi - cfg_.min_n + 1);
}

void NgramDrafter::observe(std::span<const int32_t> tokens) {
  if (tokens_.size() + tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("ngram drafter: sequence longer than 2^31 tokens");
  for (int32_t tok : tokens) {
    const int64_t t = static_cast<int64_t>(tokens_.size());
    tokens_.push_back(tok);
    for (int32_t n = cfg_.min_n; n <= cfg_.max_n && n <= t; ++n) {
      auto [it, fresh] = last_.try_emplace(key(t, n), static_cast<int32_t>(t));
      replaced_.push_back(fresh ? -1 : it->second);
      it->second = static_cast<int32_t>(t);
    }
  }
}

void NgramDrafter::propose(int32_t max_k, Draft& out) {
  out.clear();
  last_match_n_ = 0;
  const int64_t T = static_cast<int64_t>(tokens_.size());
  if (max_k <= 0) return;
  for (int32_t n = static_cast<int32_t>(std::min<int64_t>(cfg_.max_n, T)); n >= cfg_.min_n; --n) {
    const auto it = last_.find(key(T, n));
    if (it == last_.end()) continue;
    const int64_t c = it->second;  // follower of the latest earlier occurrence: c < T
    if (!same(c, T, n)) continue;  // a hash collision: not a match
    for (int64_t j = 0; j < max_k; ++j) {
      const int64_t i = c + j;  // past the end, the copy continues with its own proposals
      out.push(i < T ? tokens_[i] : out.tokens()[i - T]);
    }
    out.source = c;
    last_match_n_ = n;
    return;
  }
}

void NgramDrafter::truncate(int64_t n_tokens) {
  if (n_tokens < 0 || n_tokens > static_cast<int64_t>(tokens_.size()))
    fail("ngram drafter: truncate to %lld tokens, %zu observed", static_cast<long long>(n_tokens), tokens_.size());
  while (static_cast<int64_t>(tokens_.size()) > n_tokens) {
    const int64_t t = static_cast<int64_t>(tokens_.size()) - 1;
    for (int32_t n = cfg_.min_n + n_inserted_at(t) - 1; n >= cfg_.min_n; --n) {  // reverse insertion order
      const uint64_t k = key(t, n);
      const int32_t prev = replaced_.back();
      replaced_.pop_back();
      if (prev < 0) last_.erase(k);
      else last_[k] = prev;
    }
    tokens_.pop_back();
  }
}

void NgramDrafter::reset() {
  tokens_.clear();
  last_.clear();
  replaced_.clear();
  last_match_n_ = 0;
}

}  // namespace sluice::spec
