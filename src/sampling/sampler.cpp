#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab) : p_(p), n_vocab_(n_vocab) {
  if (n_vocab <= 0) fail("sampler: empty vocabulary");
  validate(p);
}

namespace {

// SplitMix64's finalizer: a bijection on 64 bits with full avalanche.
uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

double keyed_uniform(uint64_t seed, int64_t position, RandomStream stream) {
  const uint64_t h = mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(position)) ^ static_cast<uint64_t>(stream));
  return static_cast<double>(h >> 11) * 0x1p-53;
}

SamplerWorkspace& SamplerWorkspace::for_this_thread() {
  static thread_local SamplerWorkspace ws;
  return ws;
}

float prob_of(std::span<const TokenProb> dist, int32_t token) {
  for (const TokenProb& e : dist)
    if (e.token == token) return e.prob;
  return 0.0f;
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
// argmax_scalar: the lowest id among the maxima, NaNs never chosen unless logits[0] is one (then every lane starts NaN,
// nothing compares equal, and the scalar loop decides).
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

std::span<const int32_t> Sampler::penalized(std::span<const int32_t> history) const {
  if (p_.repeat_penalty == 1.0f && p_.presence_penalty == 0.0f && p_.frequency_penalty == 0.0f) return {};
  if (p_.penalty_last_n >= 0 && history.size() > static_cast<size_t>(p_.penalty_last_n))
    return history.subspan(history.size() - static_cast<size_t>(p_.penalty_last_n));
  return history;
}

void Sampler::apply_penalties(float* logits, std::span<const int32_t> history, SamplerWorkspace& ws) const {
  const std::span<const int32_t> window = penalized(history);
  if (window.empty()) return;
  std::vector<int32_t>& counts = ws.counts_;
  if (counts.size() < static_cast<size_t>(n_vocab_)) counts.resize(static_cast<size_t>(n_vocab_), 0);
  for (int32_t t : window)
    if (t >= 0 && t < n_vocab_) ++counts[t];
  for (int32_t t : window) {
    if (t < 0 || t >= n_vocab_ || counts[t] == 0) continue;  // each token once; counts end all zero
    float& l = logits[t];
    l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    l -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(counts[t]);
    counts[t] = 0;
  }
}

namespace {

// Candidate order: higher logit first, the lower id among equals. A strict total order, so a
// selection's first k, sorted, are exactly a full sort's first k. (A function object, not a
// function pointer, so the sorts inline it.)
constexpr auto by_logit = [](const TokenProb& a, const TokenProb& b) {
  return a.prob > b.prob || (a.prob == b.prob && a.token < b.token);
};

// exp((l - mx) / T) in double: finite l and mx cannot overflow, -inf never reaches here.
double weight_of(float l, float mx, double t) { return std::exp((static_cast<double>(l) - mx) / t); }

// Puts the candidates of rank [from, to) in c[from .. to), in order, given that c[0 .. from)
// already holds the first `from` in order. A few ranks out of many: a partial sort, which
// dismisses most candidates with one comparison against its heap's top. Many: a linear
// selection (nth_element), then a sort of the selected part only.
void sort_ranks(std::vector<TokenProb>& c, size_t from, size_t to, size_t n) {
  if ((to - from) * 64 <= n - from) {
    std::partial_sort(c.begin() + from, c.begin() + to, c.begin() + n, by_logit);
    return;
  }
  if (to < n) std::nth_element(c.begin() + from, c.begin() + to, c.begin() + n, by_logit);
  std::sort(c.begin() + from, c.begin() + to, by_logit);
}

}  // namespace

// top-p over c[0 .. n) (logits, in order when top-k ran): the smallest prefix in logit order
// whose mass reaches top_p. Sorted only as far as needed, in growing steps, each step selecting
// and sorting the next ranks; the prefix is the one a full sort would give.
size_t Sampler::cut_top_p(std::vector<TokenProb>& c, size_t n, float mx, double total, bool sorted) const {
  const double t = p_.temperature;
  double cum = 0;
  size_t done = 0;
  for (size_t k = std::min<size_t>(n, 256);; k = std::min(n, k * 8)) {
    if (!sorted) sort_ranks(c, done, k, n);
    for (; done < k; ++done) {
      cum += weight_of(c[done].prob, mx, t) / total;
      if (cum >= p_.top_p) return done + 1;
    }
    if (k == n) return n;
  }
}

std::span<const TokenProb> Sampler::distribution(float* logits, std::span<const int32_t> history,
                                                 SamplerWorkspace& ws) const {
  apply_penalties(logits, history, ws);
  std::vector<TokenProb>& c = ws.cand_;
  c.clear();
  if (greedy()) {
    c.push_back({argmax(logits, n_vocab_), 1.0f});
    return c;
  }
  c.reserve(static_cast<size_t>(n_vocab_));
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float mx = -kInf;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float l = logits[i];
    if (!(l > -kInf)) continue;  // -inf (masked) and NaN are never drawn
    c.push_back({i, l});
    mx = std::max(mx, l);
  }
  if (c.empty()) {  // everything masked: the greedy rule decides
    c.push_back({argmax(logits, n_vocab_), 1.0f});
    return c;
  }
  return process(c, mx);
}

// The candidate list of the dense call is the row's drawable entries in id order; collecting
// them from `ids` only (ascending) gives the list the dense call gets from a row whose other
// entries are -inf, and the same chain after it, so the same distribution bit for bit.
std::span<const TokenProb> Sampler::distribution_over(float* logits, std::span<const int32_t> ids,
                                                      std::span<const int32_t> history, SamplerWorkspace& ws) const {
  apply_penalties(logits, history, ws);
  std::vector<TokenProb>& c = ws.cand_;
  c.clear();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float mx = -kInf;
  int32_t best = -1;
  for (int32_t i : ids) {
    if (i < 0 || i >= n_vocab_) continue;
    const float l = logits[i];
    if (!(l > -kInf)) continue;  // -inf (banned) and NaN are never drawn
    if (best < 0 || l > logits[best]) best = i;
    if (!greedy()) c.push_back({i, l});
    mx = std::max(mx, l);
  }
  if (best < 0) return {};
  if (greedy()) {
    c.push_back({best, 1.0f});
    return c;
  }
  return process(c, mx);
}

// temperature → top-k → top-p → min-p over the candidates c (logits in .prob, mx their largest).
std::span<const TokenProb> Sampler::process(std::vector<TokenProb>& c, float mx) const {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (mx == kInf) {  // softmax's limit: the +inf logits share the mass equally
    size_t k = 0;
    for (const TokenProb& e : c)
      if (e.prob == kInf) c[k++] = {e.token, 0.0f};
    c.resize(k);
    mx = 0.0f;
  }
  const double t = p_.temperature;
  size_t n = c.size();
  const bool top_k = p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n;
  if (top_k) {
    sort_ranks(c, 0, static_cast<size_t>(p_.top_k), n);
    n = static_cast<size_t>(p_.top_k);
  }
  if (p_.top_p < 1.0f) {
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += weight_of(c[i].prob, mx, t);
    n = cut_top_p(c, n, mx, total, top_k);
  }
  // Weights, then min-p (relative to the top token, whose weight is exactly 1) and the drop
  // of weights that underflowed; the top token always stays.
  double sum = 0;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const float w = static_cast<float>(weight_of(c[i].prob, mx, t));
    if (w > 0.0f && w >= p_.min_p) {
      c[m++] = {c[i].token, w};
      sum += w;
    }
  }
  c.resize(m);
  for (TokenProb& e : c) e.prob = static_cast<float>(e.prob / sum);
  return c;
}

int32_t Sampler::draw(std::span<const TokenProb> dist, double u) {
  double total = 0;
  for (const TokenProb& e : dist) total += e.prob;
  const double r = u * total;
  double cum = 0;
  int32_t last = -1;
  for (const TokenProb& e : dist) {
    if (!(e.prob > 0.0f)) continue;
    cum += e.prob;
    last = e.token;
    if (r < cum) return e.token;
  }
  return last;  // u * total rounded up to the total
}

int32_t Sampler::sample(float* logits, std::span<const int32_t> history) const {
  return sample(logits, history, SamplerWorkspace::for_this_thread());
}

int32_t Sampler::sample(float* logits, std::span<const int32_t> history, SamplerWorkspace& ws) const {
  if (greedy()) {
    apply_penalties(logits, history, ws);
    return argmax(logits, n_vocab_);
  }
  const auto dist = distribution(logits, history, ws);
  return draw(dist, uniform(static_cast<int64_t>(history.size())));
}

}  // namespace sluice
