#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/cpu_features.h"
#include "base/error.h"
#include "sampling/top_p_select.h"
#include "sampling/weights.h"

namespace sluice {

using namespace sampling_detail;

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

// The largest logit above -inf (NaN never counts); -inf when there is none. Four lanes:
// `a > m ? a : m` keeps m for -inf and NaN alike.
float Sampler::drawable_max(const float* x, int32_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  F4 m0 = F4{} - kInf, m1 = m0;
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const F4 a = load4(x + i), b = load4(x + i + 4);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
  }
  m0 = m1 > m0 ? m1 : m0;
  float best = -kInf;
  for (int j = 0; j < 4; ++j) best = m0[j] > best ? m0[j] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
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

// The rest of top-p by the reference rule: c[0 .. done) already in logit order with its
// running mass in cum; sorts the next ranks in growing steps and adds them on until the mass
// reaches top_p. The prefix is the one a full sort would give.
size_t Sampler::cut_top_p_sorting(std::vector<TokenProb>& c, size_t done, size_t n, float mx, double total, double cum,
                                  bool sorted) const {
  const float inv_t = inverse_temperature();
  for (size_t k = std::min(n, std::max<size_t>(done, 256));; k = std::min(n, std::max<size_t>(k, 1) * 8)) {
    if (!sorted) sort_ranks(c, done, k, n);
    for (; done < k; ++done) {
      cum += weight_of(c[done].prob, mx, inv_t) / total;
      if (cum >= p_.top_p) return done + 1;
    }
    if (k == n) return n;
  }
}

// top-p over c[0 .. n) (logits; in order when top-k ran, else in token-id order): the smallest
// prefix in logit order whose mass reaches top_p, its running sum taken in that order. A list
// in order is walked; a long one in id order goes through the selection (top_p_select.cpp),
// which gives the same prefix without sorting what lies outside it.
size_t Sampler::cut_top_p(std::vector<TokenProb>& c, size_t n, float mx, bool sorted, SamplerWorkspace& ws) const {
  const float inv_t = inverse_temperature();
  if (!sorted && n >= kTopPSelectMin && !sorted_top_p_) {
    const TopPCut r = select_top_p(c, n, mx, inv_t, p_.top_p, ws.spare_);
    return r.cut > 0 ? r.cut : cut_top_p_sorting(c, r.sorted, n, mx, r.total, r.cum, false);
  }
  double total = 0;  // in list order: the sum the running mass is divided by
  for (size_t i = 0; i < n; ++i) total += weight_of(c[i].prob, mx, inv_t);
  return cut_top_p_sorting(c, 0, n, mx, total, 0.0, sorted);
}

std::span<const TokenProb> Sampler::distribution(float* logits, std::span<const int32_t> history,
                                                 SamplerWorkspace& ws) const {
  apply_penalties(logits, history, ws);
  // c is not cleared first: the paths below overwrite it, and resizing a list that is already
  // long (the previous row's) does not zero a vocabulary's worth of entries again.
  std::vector<TokenProb>& c = ws.cand_;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float mx = greedy() ? -kInf : drawable_max(logits, n_vocab_);
  if (mx == -kInf) {  // greedy, or everything masked (then the greedy rule decides): one entry
    c.assign(1, {argmax(logits, n_vocab_), 1.0f});
    return c;
  }
  if (p_.top_k == 0 && p_.top_p >= 1.0f && mx < kInf) return dense(logits, mx, c);
  // Every drawable entry in id order, without a branch per entry: each is written, and the
  // count moves past it only when it is drawable (-inf, masked, and NaN are never drawn).
  c.resize(static_cast<size_t>(n_vocab_));
  size_t k = 0;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float l = logits[i];
    c[k] = {i, l};
    k += l > -kInf ? 1 : 0;
  }
  c.resize(k);
  return process(ws, mx);
}

// The weights exp((l − mx) / T) of logits[0 .. n) into out, W lanes at a time (n a multiple
// of W): the same operations per lane whatever W, so the same bits. Instantiated at 4 lanes
// for every host, and at 8 and 16 under AVX2 and AVX-512F where the CPU has them: the exp is
// most of a sampled row's cost, and a row of 262,144 is 65,536 four-lane blocks.
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));

template <class FW, class IW>
__attribute__((always_inline)) inline void weights_lanes(const float* logits, float mx, float inv_t, float* out,
                                                         int32_t n) {
  constexpr int32_t W = sizeof(FW) / sizeof(float);
  const FW mxv = FW{} + mx, invv = FW{} + inv_t;
  for (int32_t i = 0; i < n; i += W) {
    FW l;
    std::memcpy(&l, logits + i, sizeof l);
    const FW x = (l - mxv) * invv;
    const FW w = exp_nonpos_t<FW, IW>(x);
    std::memcpy(out + i, &w, sizeof w);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void weights_avx512(const float* l, float mx, float inv_t, float* out, int32_t n) {
  weights_lanes<F16, I16>(l, mx, inv_t, out, n);
}
__attribute__((target("avx2"))) void weights_avx2(const float* l, float mx, float inv_t, float* out, int32_t n) {
  weights_lanes<F8, I8>(l, mx, inv_t, out, n);
}
#endif

int32_t sampling_detail::block_weights(const float* logits, float mx, float inv_t, float* out, int32_t n) {
  const int32_t n16 = n / 16 * 16;
#if defined(__x86_64__)
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512f) return weights_avx512(logits, mx, inv_t, out, n16), n16;
  if (cpu.avx2) return weights_avx2(logits, mx, inv_t, out, n16), n16;
#endif
  weights_lanes<F4, I4>(logits, mx, inv_t, out, n16);
  return n16;
}

// Without top-k and top-p the chain needs no candidate list before the weights: they come
// straight from the row, four lanes at a time, into the list process() would end with — the
// same weights of the same drawable entries in id order, the same cut, the same four sums
// (chain id & 3, each in id order) — so both give the same bits (the masked tests compare this
// path with distribution_over's).
std::span<const TokenProb> Sampler::dense(const float* logits, float mx, std::vector<TokenProb>& c) const {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float inv_t = inverse_temperature(), floor = p_.min_p;
  c.resize(static_cast<size_t>(n_vocab_));
  double sums[4] = {0, 0, 0, 0};
  size_t m = 0;
  const F4 floor4 = F4{} + floor, ninf4 = F4{} - kInf, zero4 = F4{};
  // A chunk at a time: its weights first (independent vector work, 4 KB on the stack), then
  // the cut, the sums and the list over them. Chunks start at multiples of 16, so lane j of a
  // 4-block is id & 3.
  constexpr int32_t kChunk = 1024;
  alignas(64) float wbuf[kChunk];
  int32_t i = 0;
  for (int32_t n_blocks = kChunk; n_blocks == kChunk; i += n_blocks) {
    n_blocks = block_weights(logits + i, mx, inv_t, wbuf, std::min(kChunk, n_vocab_ - i));
    for (int32_t j = 0; j < n_blocks; j += 4) {
      const int32_t id = i + j;
      const F4 l = load4(logits + id), w = load4(wbuf + j);
      const I4 keep = (l > ninf4) & (w > zero4) & (w >= floor4);  // -1 where kept
      const F4 wk = keep ? w : zero4;
      for (int k = 0; k < 4; ++k) sums[k] += wk[k];
      if ((keep[0] & keep[1] & keep[2] & keep[3]) != 0) {  // the usual block: all four kept
        I4 wbits;
        std::memcpy(&wbits, &w, sizeof w);
        const I4 ids = I4{0, 1, 2, 3} + id;
        const I4 lo = __builtin_shufflevector(ids, wbits, 0, 4, 1, 5),
                 hi = __builtin_shufflevector(ids, wbits, 2, 6, 3, 7);
        std::memcpy(&c[m], &lo, sizeof lo);  // TokenProb is {int32 token, float prob}
        std::memcpy(&c[m + 2], &hi, sizeof hi);
        m += 4;
        continue;
      }
      for (int k = 0; k < 4; ++k) {
        c[m] = {id + k, wk[k]};
        m -= static_cast<size_t>(static_cast<int64_t>(keep[k]));
      }
    }
  }
  for (; i < n_vocab_; ++i) {  // fewer than 16 left
    const float l = logits[i], w = weight_of(l, mx, inv_t);
    const bool keep = l > -kInf && w > 0.0f && w >= floor;
    c[m] = {i, w};
    m += keep ? 1 : 0;
    sums[i & 3] += keep ? w : 0.0f;
  }
  return normalize(c, m, sums);
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
  return process(ws, mx);
}

// temperature → top-k → top-p → min-p over the candidates c (logits in .prob, mx their largest).
std::span<const TokenProb> Sampler::process(SamplerWorkspace& ws, float mx) const {
  std::vector<TokenProb>& c = ws.cand_;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (mx == kInf) {  // softmax's limit: the +inf logits share the mass equally
    size_t k = 0;
    for (const TokenProb& e : c)
      if (e.prob == kInf) c[k++] = {e.token, 0.0f};
    c.resize(k);
    mx = 0.0f;
  }
  const float inv_t = inverse_temperature();
  size_t n = c.size();
  const bool top_k = p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n;
  if (top_k) {
    sort_ranks(c, 0, static_cast<size_t>(p_.top_k), n);
    n = static_cast<size_t>(p_.top_k);
  }
  if (p_.top_p < 1.0f) n = cut_top_p(c, n, mx, top_k, ws);
  // c keeps its length past n (the distribution is a span of it): shrinking it here would
  // have the next row's resize zero the vocabulary's worth again.
  // Weights in place, four at a time, then min-p (relative to the top token, whose weight is
  // exactly 1) and the drop of weights that underflowed, compacting without a branch; the top
  // token always stays. The sum runs in four double chains (by token id & 3, each in list
  // order), not one long chain of dependent additions.
  const F4 mx4 = F4{} + mx, inv4 = F4{} + inv_t;
  size_t i4 = 0;
  for (; i4 + 4 <= n; i4 += 4) {
    TokenProb* e = &c[i4];
    const F4 w = exp_nonpos4((F4{e[0].prob, e[1].prob, e[2].prob, e[3].prob} - mx4) * inv4);
    for (int j = 0; j < 4; ++j) e[j].prob = w[j];
  }
  for (; i4 < n; ++i4) c[i4].prob = weight_of(c[i4].prob, mx, inv_t);
  const float floor = p_.min_p;
  double sums[4] = {0, 0, 0, 0};
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const TokenProb e = c[i];
    const bool keep = e.prob > 0.0f && e.prob >= floor;
    c[m] = e;
    m += keep ? 1 : 0;
    sums[e.token & 3] += keep ? e.prob : 0.0f;
  }
  return normalize(c, m, sums);
}

// The kept weights c[0 .. m), divided by their sum (its four chains added in a fixed order);
// the distribution is that prefix (c itself keeps its length for the next row).
std::span<const TokenProb> Sampler::normalize(std::vector<TokenProb>& c, size_t m, const double (&sums)[4]) {
  const double inv_sum = 1.0 / ((sums[0] + sums[1]) + (sums[2] + sums[3]));
  for (size_t i = 0; i < m; ++i) c[i].prob = static_cast<float>(c[i].prob * inv_sum);
  return {c.data(), m};
}

int32_t Sampler::draw(std::span<const TokenProb> dist, double u) {
  // The inverse CDF in list order: the first entry whose running sum passes u · total. Sums
  // go block by block (64 entries, four interleaved chains each), then entry by entry only
  // inside the block where the running sum passes, so a 262,144-entry list is not one chain of
  // dependent additions. Entries that are not > 0 (none in a processed distribution) count 0.
  constexpr size_t kBlock = 64;
  const size_t n = dist.size();
  const auto weight = [&](size_t i) { return dist[i].prob > 0.0f ? static_cast<double>(dist[i].prob) : 0.0; };
  const auto block_sum = [&](size_t b0, size_t b1) {
    double s[4] = {0, 0, 0, 0};
    for (size_t i = b0; i < b1; ++i) s[i & 3] += weight(i);
    return (s[0] + s[1]) + (s[2] + s[3]);
  };
  double total = 0;
  for (size_t b = 0; b < n; b += kBlock) total += block_sum(b, std::min(n, b + kBlock));
  const double r = u * total;
  double cum = 0;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t end = std::min(n, b + kBlock);
    const double s = block_sum(b, end);
    if (!(r < cum + s) && end < n) {
      cum += s;
      continue;
    }
    for (size_t i = b; i < end; ++i) {
      cum += weight(i);
      if (weight(i) > 0 && r < cum) return dist[i].token;
    }
  }
  // u * total rounded up to the total: the last entry that has weight.
  for (size_t i = n; i-- > 0;)
    if (weight(i) > 0) return dist[i].token;
  return -1;
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
