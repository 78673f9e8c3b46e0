// Sampler::distribution_over (the allowed ids only) against Sampler::distribution over the
// dense row with every other entry at -inf: the same list, bit for bit, for every parameter
// set, so a grammar's sparse redraw draws the same token as the dense masked redraw.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace sluice {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<SamplingParams> param_sets() {
  std::vector<SamplingParams> out;
  SamplingParams p;
  p.temperature = 0;  // greedy
  out.push_back(p);
  p.repeat_penalty = 1.3f;  // greedy with penalties
  out.push_back(p);
  p = {};
  out.push_back(p);  // plain T = 1
  p.temperature = 0.7f;
  p.top_k = 40;
  out.push_back(p);
  p.top_p = 0.9f;
  out.push_back(p);
  p.top_k = 0;
  p.top_p = 0.5f;
  p.min_p = 0.05f;
  out.push_back(p);
  p = {};
  p.temperature = 1.3f;
  p.repeat_penalty = 1.2f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.penalty_last_n = 16;
  p.top_k = 3;
  out.push_back(p);
  return out;
}

bool same(std::span<const TokenProb> a, std::span<const TokenProb> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].token != b[i].token || std::memcmp(&a[i].prob, &b[i].prob, sizeof(float)) != 0) return false;
  return true;
}

TEST(MaskedDistribution, SparseEqualsDenseMaskedRow) {
  constexpr int32_t V = 3000;
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  SamplerWorkspace ws_dense, ws_sparse;
  int draws = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<float> row(V);
    for (float& x : row) x = std::round(logit(rng) * 4) / 4;  // rounded: many ties
    for (int i = 0; i < 50; ++i) row[rng() % V] = -kInf;      // banned ids
    const int density = 1 + trial % 5;                        // 1/2 .. 1/32 of the ids allowed
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < V; ++i)
      if (rng() % (1u << density) == 0) ids.push_back(i);
    std::vector<int32_t> history(40);
    for (int32_t& t : history) t = ids[rng() % ids.size()];  // penalties hit allowed ids
    for (const SamplingParams& p : param_sets()) {
      const Sampler s(p, V);
      std::vector<float> dense(V, -kInf), sparse = row;
      for (int32_t i : ids) dense[i] = row[i];
      const auto d = s.distribution(dense.data(), history, ws_dense);
      const auto sp = s.distribution_over(sparse.data(), ids, history, ws_sparse);
      ASSERT_TRUE(same(d, sp)) << "trial " << trial << " T " << p.temperature << " k " << p.top_k;
      for (int u = 0; u < 50; ++u, ++draws) {
        const double x = keyed_uniform(trial, u, RandomStream::kGrammar);
        ASSERT_EQ(Sampler::draw(d, x), Sampler::draw(sp, x));
      }
    }
  }
  EXPECT_GT(draws, 10000);
}

TEST(MaskedDistribution, EmptyWhenNoAllowedIdIsDrawable) {
  std::vector<float> row = {1, -kInf, std::nanf(""), 2};
  const std::vector<int32_t> ids = {1, 2};
  SamplerWorkspace ws;
  for (float t : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = t;
    EXPECT_TRUE(Sampler(p, 4).distribution_over(row.data(), ids, {}, ws).empty());
  }
  const std::vector<int32_t> with_3 = {1, 2, 3};
  const auto d = Sampler({}, 4).distribution_over(row.data(), with_3, {}, ws);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].token, 3);
}

TEST(MaskedDistribution, PenalizedIsThePenaltyWindow) {
  const std::vector<int32_t> h = {5, 6, 7, 8};
  SamplingParams p;
  EXPECT_TRUE(Sampler(p, 10).penalized(h).empty());  // penalties off
  p.repeat_penalty = 1.1f;
  p.penalty_last_n = 3;
  EXPECT_EQ(Sampler(p, 10).penalized(h).size(), 3u);
  EXPECT_EQ(Sampler(p, 10).penalized(h)[0], 6);
  p.penalty_last_n = -1;
  EXPECT_EQ(Sampler(p, 10).penalized(h).size(), 4u);
  p.penalty_last_n = 0;
  EXPECT_TRUE(Sampler(p, 10).penalized(h).empty());
}

}  // namespace
}  // namespace sluice
