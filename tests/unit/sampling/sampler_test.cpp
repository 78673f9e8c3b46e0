#include <gtest/gtest.h>

#include <cmath>
#include <map>
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

std::map<int, int> histogram(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p, static_cast<int32_t>(logits.size()));
  std::map<int, int> h;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    ++h[s.sample(l.data(), {})];
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
  tp.top_p = 0.75f;   // 0.5 + 0.3 reaches 0.75
  h = histogram(tp, l, 2000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_GT(h[2], 0);
  SamplingParams mp;
  mp.min_p = 0.5f;    // keep p >= 0.25
  h = histogram(mp, l, 2000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.seed = 42;
  p.temperature = 1.3f;
  const auto l = logits_of({0.25, 0.25, 0.25, 0.25});
  Sampler a(p, 4), b(p, 4);
  for (int i = 0; i < 100; ++i) {
    auto la = l, lb = l;
    EXPECT_EQ(a.sample(la.data(), {}), b.sample(lb.data(), {}));
  }
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
