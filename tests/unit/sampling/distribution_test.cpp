// The processed distribution: greedy below the temperature threshold, never a NaN whatever
// the logits (overflowing logits / T, -inf, NaN, +inf, every token masked), equal to the
// chain's definition computed here independently in double precision, and memory that does
// not grow with the number of requests.
#include <gtest/gtest.h>

#include <cstring>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace sluice {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMax = std::numeric_limits<float>::max();

// Every entry finite and > 0, distinct tokens in range, the sum 1.
void expect_proper(std::span<const TokenProb> d, int32_t n_vocab) {
  ASSERT_FALSE(d.empty());
  double sum = 0;
  std::vector<bool> seen(static_cast<size_t>(n_vocab), false);
  for (const TokenProb& e : d) {
    ASSERT_TRUE(std::isfinite(e.prob)) << e.token;
    ASSERT_GT(e.prob, 0.0f) << e.token;
    ASSERT_GE(e.token, 0);
    ASSERT_LT(e.token, n_vocab);
    ASSERT_FALSE(seen[e.token]) << e.token;
    seen[e.token] = true;
    sum += e.prob;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

std::vector<int32_t> draws(const Sampler& s, const std::vector<float>& row, int n) {
  const std::vector<int32_t> history(static_cast<size_t>(n), -1);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    auto l = row;
    out.push_back(s.sample(l.data(), std::span<const int32_t>(history.data(), static_cast<size_t>(i))));
  }
  return out;
}

TEST(SamplerDistribution, TemperatureBelowTheThresholdIsGreedy) {
  // The tokens after the maximum are the least likely. Dividing the second row by 1e-38
  // overflows its top logits to +inf, inf - inf is NaN, and the sampler this replaced fell
  // through to its last candidate: token 5, the least likely of all (issue 24, D10).
  for (const std::vector<float>& row : {std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f, -5.0f, -7.0f},
                                        std::vector<float>{10.0f, 40.0f, 20.0f, 39.0f, -5.0f, -7.0f}}) {
    for (float t : {1e-38f, 1e-30f, 1e-12f, 1e-6f, 9.9e-6f, 0.0f, -1.0f}) {
      SamplingParams p;
      p.temperature = t;
      p.seed = 5;
      Sampler s(p, 6);
      EXPECT_TRUE(s.greedy()) << t;
      for (int32_t tok : draws(s, row, 50)) EXPECT_EQ(tok, 1) << t;
      SamplerWorkspace ws;
      auto l = row;
      const auto d = s.distribution(l.data(), {}, ws);
      ASSERT_EQ(d.size(), 1u);
      EXPECT_EQ(d[0].token, 1);
      EXPECT_EQ(d[0].prob, 1.0f);
    }
  }
  SamplingParams p;
  p.temperature = kGreedyTemperature;
  EXPECT_FALSE(Sampler(p, 6).greedy());
}

TEST(SamplerDistribution, SmallestSampledTemperatureWithHugeLogitsIsFinite) {
  SamplingParams p;
  p.temperature = kGreedyTemperature;
  Sampler s(p, 5);
  SamplerWorkspace ws;
  // (l - max) / T is ~1e43 here: out of float range, inside double's.
  std::vector<float> row = {-kMax, kMax, kMax * 0.5f, 1e30f, kMax};
  auto l = row;
  auto d = s.distribution(l.data(), {}, ws);
  expect_proper(d, 5);
  ASSERT_EQ(d.size(), 2u);  // the two maxima share the mass, the rest underflow away
  EXPECT_FLOAT_EQ(prob_of(d, 1), 0.5f);
  EXPECT_FLOAT_EQ(prob_of(d, 4), 0.5f);
  for (int32_t tok : draws(s, row, 200)) EXPECT_TRUE(tok == 1 || tok == 4) << tok;
  // A close second survives at this temperature.
  row = {0.0f, 1.0f, 1.0f - 2e-5f, -1.0f, -3.0f};
  l = row;
  d = s.distribution(l.data(), {}, ws);
  expect_proper(d, 5);
  EXPECT_NEAR(prob_of(d, 2) / prob_of(d, 1), std::exp(-2.0), 1e-3);
}

TEST(SamplerDistribution, MaskedAndNaNLogitsAreNeverDrawn) {
  std::vector<float> row(64);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : row) v = nd(rng);
  for (int i = 0; i < 64; i += 3) row[i] = -kInf;
  for (int i = 1; i < 64; i += 5) row[i] = kNaN;
  for (SamplingParams p : {SamplingParams{}, SamplingParams{0.7f, 10}, SamplingParams{1.5f, 0, 0.9f, 0.05f}}) {
    Sampler s(p, 64);
    SamplerWorkspace ws;
    auto l = row;
    const auto d = s.distribution(l.data(), {}, ws);
    expect_proper(d, 64);
    for (const TokenProb& e : d) EXPECT_TRUE(std::isfinite(row[e.token])) << e.token;
    for (int32_t tok : draws(s, row, 500)) EXPECT_TRUE(std::isfinite(row[tok])) << tok;
  }
}

TEST(SamplerDistribution, AnAllMaskedRowFallsBackToTheGreedyToken) {
  Sampler s(SamplingParams{}, 8);
  SamplerWorkspace ws;
  for (const std::vector<float>& row : {std::vector<float>(8, -kInf), std::vector<float>(8, kNaN),
                                        std::vector<float>{-kInf, kNaN, -kInf, kNaN, -kInf, -kInf, kNaN, -kInf}}) {
    auto l = row;
    const auto d = s.distribution(l.data(), {}, ws);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].token, Sampler::argmax(row.data(), 8));
    EXPECT_EQ(d[0].prob, 1.0f);
    for (int32_t tok : draws(s, row, 20)) EXPECT_EQ(tok, d[0].token);
  }
}

TEST(SamplerDistribution, InfiniteLogitsShareTheMass) {
  const std::vector<float> row = {kInf, 1.0f, kInf, 5.0f, kNaN};
  Sampler s(SamplingParams{}, 5);
  SamplerWorkspace ws;
  auto l = row;
  const auto d = s.distribution(l.data(), {}, ws);
  expect_proper(d, 5);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FLOAT_EQ(prob_of(d, 0), 0.5f);
  EXPECT_FLOAT_EQ(prob_of(d, 2), 0.5f);
  int zeros = 0;
  for (int32_t tok : draws(s, row, 400)) {
    EXPECT_TRUE(tok == 0 || tok == 2);
    zeros += tok == 0;
  }
  EXPECT_NEAR(zeros, 200, 50);
}

TEST(SamplerDistribution, PenaltiesThatOverflowStayFinite) {
  SamplingParams p;
  p.repeat_penalty = 1e-38f;  // a positive logit / 1e-38 overflows to +inf
  Sampler s(p, 4);
  SamplerWorkspace ws;
  std::vector<float> l = {100.0f, 2.0f, 3.0f, -1.0f};
  const std::vector<int32_t> hist = {0, 3};
  auto d = s.distribution(l.data(), hist, ws);
  expect_proper(d, 4);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].token, 0);
  SamplingParams f;
  f.frequency_penalty = 3e38f;  // presence + frequency × 2 overflows to +inf
  Sampler s2(f, 4);
  l = {100.0f, 2.0f, 3.0f, -1.0f};
  d = s2.distribution(l.data(), std::vector<int32_t>{0, 0, 2}, ws);
  expect_proper(d, 4);
  EXPECT_EQ(prob_of(d, 0), 0.0f);
}

// The chain's definition in double precision, written apart from the sampler: penalties
// (none here) → softmax(l / T) → top-k → renormalize → smallest prefix reaching top_p →
// min-p against the top → renormalize. Ties by lower id.
std::vector<std::pair<int32_t, double>> reference(const std::vector<float>& row, const SamplingParams& p) {
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < ids.size()) ids.resize(static_cast<size_t>(p.top_k));
  std::vector<double> w;
  double total = 0;
  for (int32_t i : ids) {
    w.push_back(std::exp((static_cast<double>(row[i]) - row[ids[0]]) / p.temperature));
    total += w.back();
  }
  size_t n = ids.size();
  double cum = 0;
  for (size_t i = 0; i < ids.size() && p.top_p < 1.0f; ++i) {
    cum += w[i] / total;
    if (cum >= p.top_p) {
      n = i + 1;
      break;
    }
  }
  std::vector<std::pair<int32_t, double>> out;
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    if (w[i] >= p.min_p * w[0] && w[i] > 0) out.push_back({ids[i], w[i]}), sum += w[i];
  for (auto& e : out) e.second /= sum;
  return out;
}

TEST(SamplerDistribution, EqualsTheChainsDefinition) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int32_t n = 5000;
  std::vector<float> row(n);
  for (auto& v : row) v = nd(rng);
  // Flat rows put thousands of tokens in the nucleus: the sort that grows in steps must still
  // cut where a full sort would.
  const SamplingParams cases[] = {{1.0f},
                                  {0.8f, 40},
                                  {1.0f, 0, 0.9f},
                                  {2.5f, 0, 0.95f},
                                  {1.0f, 0, 0.5f, 0.01f},
                                  {0.6f, 0, 1.0f, 0.2f},
                                  {1.2f, 300, 0.8f, 0.05f},
                                  {1.0f, 1},
                                  {5.0f, 0, 0.999f}};
  SamplerWorkspace ws;
  for (const SamplingParams& p : cases) {
    Sampler s(p, n);
    auto l = row;
    const auto d = s.distribution(l.data(), {}, ws);
    expect_proper(d, n);
    auto ref = reference(row, p);
    ASSERT_EQ(d.size(), ref.size()) << p.temperature << " " << p.top_k << " " << p.top_p << " " << p.min_p;
    std::sort(ref.begin(), ref.end());
    std::vector<TokenProb> got(d.begin(), d.end());
    std::sort(got.begin(), got.end(), [](const TokenProb& a, const TokenProb& b) { return a.token < b.token; });
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(got[i].token, ref[i].first);
      ASSERT_NEAR(got[i].prob, ref[i].second, 1e-6 + 1e-5 * ref[i].second);
    }
  }
}

TEST(SamplerDistribution, DrawWalksTheListInOrder) {
  const std::vector<TokenProb> d = {{7, 0.25f}, {3, 0.5f}, {9, 0.25f}};
  EXPECT_EQ(Sampler::draw(d, 0.0), 7);
  EXPECT_EQ(Sampler::draw(d, 0.2499), 7);
  EXPECT_EQ(Sampler::draw(d, 0.25), 3);
  EXPECT_EQ(Sampler::draw(d, 0.7499), 3);
  EXPECT_EQ(Sampler::draw(d, 0.75), 9);
  EXPECT_EQ(Sampler::draw(d, std::nextafter(1.0, 0.0)), 9);
  EXPECT_EQ(Sampler::draw(std::vector<TokenProb>{{4, 0.0f}, {5, 1.0f}, {6, 0.0f}}, std::nextafter(1.0, 0.0)), 5);
  EXPECT_EQ(Sampler::draw({}, 0.5), -1);
}

// A sampler is its parameters; the vocabulary-sized scratch lives in a workspace that many
// requests reuse, so it does not grow with their number.
TEST(SamplerDistribution, WorkspaceIsBoundedAndReusedAcrossRequests) {
  EXPECT_LE(sizeof(Sampler), 64u);
  const int32_t n = 262144;
  std::vector<float> row(n);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (auto& v : row) v = nd(rng);
  std::vector<int32_t> history(300);
  for (auto& t : history) t = static_cast<int32_t>(rng() % n);
  SamplerWorkspace ws;
  size_t after_first = 0;
  for (int req = 0; req < 8; ++req) {
    SamplingParams p;
    p.temperature = 0.5f + 0.05f * req;
    p.top_p = req % 2 ? 0.9f : 1.0f;
    p.repeat_penalty = 1.1f;
    p.penalty_last_n = -1;
    p.seed = static_cast<uint64_t>(req);
    const Sampler s(p, n);
    auto l = row;
    s.sample(l.data(), history, ws);
    if (req == 1) after_first = ws.bytes_reserved();  // after a row of each kind
    if (req >= 1) {
      EXPECT_EQ(ws.bytes_reserved(), after_first) << req;
    }
  }
  // 8 bytes a candidate, 4 a count, 8 a nucleus entry (top-p's selection)
  EXPECT_LE(after_first, static_cast<size_t>(n) * 20 + 4096);
}

TEST(SamplerDistribution, AWeightIsTheSameBitsWhereverItsLogitSits) {
  // The weights of a dense row come in vector blocks (up to 16 lanes on this host) and a
  // scalar tail; the masked path's in 4-lane blocks of its candidates. Equal logits must get
  // equal probabilities wherever they sit, and the temperature-only row must stay the chain's
  // definition (EqualsTheChainsDefinition covers the values).
  constexpr int32_t n = 16 * 40 + 13;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> row(n);
  for (auto& v : row) v = nd(rng);
  for (int32_t j = 0; j < 13; ++j) row[n - 1 - j] = row[static_cast<size_t>(j * 37)];  // tail copies of block entries
  row[100] = row[n - 1] + 60.0f;  // weights down to e^-60 and below: the underflow edge too
  SamplerWorkspace ws;
  for (float t : {0.3f, 1.0f, 2.0f}) {
    Sampler s({t}, n);
    auto l = row;
    const auto d = s.distribution(l.data(), {}, ws);
    std::vector<float> p(n, -1.0f);
    for (const TokenProb& e : d) p[static_cast<size_t>(e.token)] = e.prob;
    for (int32_t j = 0; j < 13; ++j)
      EXPECT_EQ(std::memcmp(&p[static_cast<size_t>(n - 1 - j)], &p[static_cast<size_t>(j * 37)], sizeof(float)), 0)
          << "T " << t << " logit " << row[static_cast<size_t>(j * 37)];
    double sum = 0;
    for (const TokenProb& e : d) sum += e.prob;
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

}  // namespace
}  // namespace sluice
