#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "base/error.h"
#include "sampling/sampler.h"

namespace sluice {
namespace {

std::vector<float> logits_of(std::vector<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// n draws at positions 0 .. n-1 (each position has its own random number; the history's
// tokens are ids out of range, which the penalties ignore).
std::map<int, int> histogram(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p, static_cast<int32_t>(logits.size()));
  const std::vector<int32_t> history(static_cast<size_t>(n), -1);
  std::map<int, int> h;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    ++h[s.sample(l.data(), std::span<const int32_t>(history.data(), static_cast<size_t>(i)))];
  }
  return h;
}

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 4);
  std::vector<float> l = {1, 5, 5, 2};
  EXPECT_EQ(s.sample(l.data(), {}), 1);
}

// The vectorized argmax against the plain first-maximum loop on long rows: random values,
// ties placed before and after each other in every lane position, the maximum in the tail,
// -inf rows, NaNs (never chosen unless the row starts with one).
TEST(Sampler, GreedyArgmaxOfLongRowsIsTheFirstMaximum) {
  auto first_max = [](const std::vector<float>& x) {
    int32_t best = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(x.size()); ++i)
      if (x[i] > x[best]) best = i;
    return best;
  };
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  int checked = 0;
  for (int32_t n : {64, 65, 77, 128, 1000, 4099, 262144}) {
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = nd(rng);
      const int32_t a = static_cast<int32_t>(rng() % n), b = static_cast<int32_t>(rng() % n);
      if (trial % 4 == 1) x[a] = x[b] = 100.0f;                          // a tie: the lower id wins
      if (trial % 4 == 2) x[n - 1] = 100.0f;                             // the maximum in the tail
      if (trial % 4 == 3) std::fill(x.begin(), x.end(), -inf);           // every logit masked
      if (trial % 3 == 1) x[(a + 1) % n] = nan;                          // a NaN somewhere
      if (trial == 10) x[1] = nan, x[n / 2 + 1 - (n / 2) % 4] = 200.0f;  // a NaN in the lane of the maximum
      if (trial == 11) x[0] = nan;                                       // a NaN first
      SamplingParams p;
      p.temperature = 0;
      Sampler s(p, n);
      auto l = x;
      EXPECT_EQ(s.sample(l.data(), {}), first_max(x)) << "n " << n << " trial " << trial;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 84);
}

TEST(Sampler, FollowsTheDistribution) {
  SamplingParams p;
  p.seed = 3;
  const auto h = histogram(p, logits_of({0.1, 0.2, 0.7}), 20000);
  EXPECT_NEAR(h.at(0) / 20000.0, 0.1, 0.015);
  EXPECT_NEAR(h.at(2) / 20000.0, 0.7, 0.015);
}

TEST(Sampler, TopKTopPMinPCut) {
  const auto l = logits_of({0.05, 0.15, 0.3, 0.5});
  SamplingParams k;
  k.top_k = 2;
  auto h = histogram(k, l, 2000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  SamplingParams tp;
  tp.top_p = 0.75f;  // 0.5 + 0.3 reaches 0.75
  h = histogram(tp, l, 2000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_GT(h[2], 0);
  SamplingParams mp;
  mp.min_p = 0.5f;  // keep p >= 0.25
  h = histogram(mp, l, 2000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.seed = 42;
  p.temperature = 1.3f;
  const auto l = logits_of({0.25, 0.25, 0.25, 0.25});
  Sampler a(p, 4), b(p, 4);
  std::vector<int32_t> ha, hb;
  std::map<int32_t, int> seen;
  for (int i = 0; i < 100; ++i) {
    auto la = l, lb = l;
    ha.push_back(a.sample(la.data(), ha));
    hb.push_back(b.sample(lb.data(), hb));
    ++seen[ha.back()];
  }
  EXPECT_EQ(ha, hb);
  EXPECT_EQ(seen.size(), 4u);  // and the positions really draw different numbers
  p.seed = 43;
  Sampler c(p, 4);
  std::vector<int32_t> hc;
  for (int i = 0; i < 100; ++i) {
    auto lc = l;
    hc.push_back(c.sample(lc.data(), hc));
  }
  EXPECT_NE(ha, hc);
}

// The token at position p depends on (seed, p) and the row only: drawing it first, or after
// any number of other draws, or through distribution() + draw(), gives the same token.
TEST(Sampler, KeyedStreamDoesNotDependOnEarlierDraws) {
  SamplingParams p;
  p.seed = 7;
  p.top_k = 5;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> row(50);
  for (auto& v : row) v = nd(rng);
  std::vector<int32_t> history(40);
  for (auto& t : history) t = static_cast<int32_t>(rng() % 50);
  Sampler fresh(p, 50), used(p, 50);
  for (int i = 0; i < 17; ++i) {  // unrelated draws on `used`
    auto l = row;
    used.sample(l.data(), std::span<const int32_t>(history.data(), static_cast<size_t>(i)));
  }
  SamplerWorkspace ws;
  for (size_t pos = 0; pos < history.size(); ++pos) {
    const std::span<const int32_t> h(history.data(), pos);
    auto l1 = row, l2 = row, l3 = row;
    const int32_t a = fresh.sample(l1.data(), h);
    EXPECT_EQ(used.sample(l2.data(), h), a);
    EXPECT_EQ(Sampler::draw(fresh.distribution(l3.data(), h, ws), fresh.uniform(static_cast<int64_t>(pos))), a);
  }
}

TEST(Sampler, KeyedUniformsLookUniformAndIndependent) {
  // 16 equal bins over 64k positions, and the kAccept stream against kDraw at the same position.
  std::vector<int> bins(16, 0);
  int both_low = 0;
  const int n = 1 << 16;
  for (int64_t pos = 0; pos < n; ++pos) {
    const double u = keyed_uniform(99, pos, RandomStream::kDraw);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++bins[static_cast<int>(u * 16)];
    if (u < 0.5 && keyed_uniform(99, pos, RandomStream::kAccept) < 0.5) ++both_low;
  }
  for (int b : bins) EXPECT_NEAR(b, n / 16, 5 * std::sqrt(n / 16.0));
  EXPECT_NEAR(both_low, n / 4, 5 * std::sqrt(n * 3.0 / 16));
  EXPECT_NE(keyed_uniform(1, 5, RandomStream::kDraw), keyed_uniform(2, 5, RandomStream::kDraw));
  EXPECT_NE(keyed_uniform(1, 5, RandomStream::kDraw), keyed_uniform(1, 6, RandomStream::kDraw));
}

TEST(Sampler, PenaltiesPushRepeatsDown) {
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  std::vector<float> l = {3.0f, 2.0f, -1.0f};
  const std::vector<int32_t> hist = {0, 0, 2};
  EXPECT_EQ(s.sample(l.data(), hist), 1);
  EXPECT_FLOAT_EQ(l[0], 1.5f);
  EXPECT_FLOAT_EQ(l[2], -2.0f);
  SamplingParams f;
  f.temperature = 0;
  f.frequency_penalty = 1.0f;
  f.presence_penalty = 0.5f;
  Sampler s2(f, 3);
  l = {3.0f, 2.0f, -1.0f};
  s2.sample(l.data(), hist);
  EXPECT_FLOAT_EQ(l[0], 3.0f - 0.5f - 2.0f);
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_THROW(Sampler(p, 4), Error);
  p = {};
  p.min_p = 2;
  EXPECT_THROW(Sampler(p, 4), Error);
  p = {};
  p.top_k = -1;
  EXPECT_THROW(Sampler(p, 4), Error);
}

}  // namespace
}  // namespace sluice
