#include "unit/spec/verify_reference.h"

#include <algorithm>

#include "base/error.h"

namespace sluice::spec {

int32_t verify_sampled(const Sampler& s, std::span<const int32_t> seq, int32_t n_drafts, float* rows, size_t row_stride,
                       SamplerWorkspace& ws, std::vector<int32_t>& out) {
  if (n_drafts < 0 || static_cast<size_t>(n_drafts) > seq.size())
    fail("verify: %d drafts in a sequence of %zu tokens", n_drafts, seq.size());
  const size_t base = seq.size() - static_cast<size_t>(n_drafts);
  return accept_matching(
      seq.subspan(base),
      [&](int32_t i) {
        return s.sample(rows + static_cast<size_t>(i) * row_stride, seq.first(base + static_cast<size_t>(i)), ws);
      },
      out);
}

void residual(std::span<const TokenProb> p, std::span<const TokenProb> q, std::vector<TokenProb>& out) {
  out.assign(p.begin(), p.end());
  auto by_token = [](const TokenProb& a, const TokenProb& b) { return a.token < b.token; };
  std::sort(out.begin(), out.end(), by_token);
  for (const TokenProb& e : q) {
    const auto it = std::lower_bound(out.begin(), out.end(), e, by_token);
    if (it != out.end() && it->token == e.token) it->prob = std::max(0.0f, it->prob - e.prob);
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const TokenProb& e) { return !(e.prob > 0.0f); }), out.end());
}

KeptRun keep_until_stop(std::span<const int32_t> run, std::span<const int32_t> stop_ids, int64_t n_generated,
                        int64_t max_tokens, int64_t n_tokens, int64_t ctx_size) {
  for (size_t i = 0; i < run.size(); ++i) {
    const int32_t n = static_cast<int32_t>(i) + 1;
    if (std::find(stop_ids.begin(), stop_ids.end(), run[i]) != stop_ids.end()) return {n, RunEnd::kStopToken};
    if (n_generated + n >= max_tokens || n_tokens + n >= ctx_size) return {n, RunEnd::kLength};
  }
  return {static_cast<int32_t>(run.size()), RunEnd::kNone};
}

}  // namespace sluice::spec
