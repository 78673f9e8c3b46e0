#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace sluice {

void Sampler::validate(const SamplingParams& p) {
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) fail("top_p must be in (0, 1], got %g", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) fail("min_p must be in [0, 1], got %g", p.min_p);
  if (p.top_k < 0) fail("top_k must be >= 0, got %d", p.top_k);
  if (!(p.repeat_penalty > 0.0f)) fail("repeat_penalty must be > 0, got %g", p.repeat_penalty);
  if (!std::isfinite(p.temperature)) fail("temperature must be finite");
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty)) fail("penalties must be finite");
}

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab) : p_(p), n_vocab_(n_vocab), rng_(p.seed) {
  if (n_vocab <= 0) fail("sampler: empty vocabulary");
  validate(p);
  cand_.reserve(n_vocab);
  counts_.assign(n_vocab, 0);
}

namespace {

int32_t argmax_scalar(const float* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

// 4 float lanes in GCC/Clang vector extensions: SSE2 on any x86-64, NEON on ARM, no ISA
// dispatch needed for a loop that reads one row of logits from cache.
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

// Greedy sampling of a batch's every row: 262144 logits a row, on the engine thread while the
// workers wait, so it is vectorized. Two passes: the largest value (16 lanes; `a > m ? a : m`
// keeps m when a is NaN, as the scalar rule does), then its first index. Same result as
// argmax_scalar: the lowest id among the maxima, NaNs never chosen unless logits[0] is one (then every lane starts NaN, nothing
// compares equal, and the scalar loop decides).
int32_t Sampler::argmax(const float* x, int32_t n) {
  if (n < 64) return argmax_scalar(x, n);
  const F4 x0 = {x[0], x[0], x[0], x[0]};
  F4 m0 = x0, m1 = x0, m2 = x0, m3 = x0;
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const F4 a = load4(x + i), b = load4(x + i + 4), c = load4(x + i + 8), d = load4(x + i + 12);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
    m2 = c > m2 ? c : m2;
    m3 = d > m3 ? d : m3;
  }
  m0 = m1 > m0 ? m1 : m0;
  m2 = m3 > m2 ? m3 : m2;
  m0 = m2 > m0 ? m2 : m0;
  float best = x[0];
  for (int j = 0; j < 4; ++j) best = m0[j] > best ? m0[j] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  const F4 bv = {best, best, best, best};
  int32_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const I4 e = (load4(x + k) == bv) | (load4(x + k + 4) == bv) | (load4(x + k + 8) == bv) | (load4(x + k + 12) == bv);
    if ((e[0] | e[1] | e[2] | e[3]) != 0) break;
  }
  for (; k < n; ++k)
    if (x[k] == best) return k;
  return argmax_scalar(x, n);
}

void Sampler::apply_penalties(float* logits, std::span<const int32_t> history) {
  if (p_.repeat_penalty == 1.0f && p_.presence_penalty == 0.0f && p_.frequency_penalty == 0.0f) return;
  size_t start = 0;
  if (p_.penalty_last_n >= 0 && history.size() > static_cast<size_t>(p_.penalty_last_n))
    start = history.size() - p_.penalty_last_n;
  for (size_t i = start; i < history.size(); ++i)
    if (history[i] >= 0 && history[i] < n_vocab_) ++counts_[history[i]];
  for (size_t i = start; i < history.size(); ++i) {
    const int32_t t = history[i];
    if (t < 0 || t >= n_vocab_ || counts_[t] == 0) continue;   // each token once
    float& l = logits[t];
    l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    l -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(counts_[t]);
    counts_[t] = 0;
  }
}

int32_t Sampler::sample(float* logits, std::span<const int32_t> history) {
  apply_penalties(logits, history);
  if (p_.temperature <= 0.0f) return argmax(logits, n_vocab_);

  cand_.clear();
  for (int32_t i = 0; i < n_vocab_; ++i) cand_.push_back({logits[i] / p_.temperature, i});
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
    n = p_.top_k;
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Softmax over the survivors (sorted, so the max is first).
  const float mx = cand_[0].first;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    cand_[i].first = std::exp(cand_[i].first - mx);
    sum += cand_[i].first;
  }
  // top-p: the smallest prefix whose mass reaches p (always at least one token).
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += cand_[i].first / sum;
      if (cum >= p_.top_p) { keep = i + 1; break; }
    }
    n = keep;
  }
  // min-p: drop tokens whose probability is below min_p times the top one.
  if (p_.min_p > 0.0f) {
    const float floor = cand_[0].first * p_.min_p;
    size_t keep = 1;
    while (keep < n && cand_[keep].first >= floor) ++keep;
    n = keep;
  }
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += cand_[i].first;
  const double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += cand_[i].first;
    if (r < cum) return cand_[i].second;
  }
  return cand_[n - 1].second;
}

}  // namespace sluice
