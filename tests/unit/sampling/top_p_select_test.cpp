// Top-p by selection (histogram threshold + radix sort of the survivors) against the sorting
// rule it replaced (Sampler::use_sorted_top_p): the same distribution bit for bit — the same
// tokens in the same order with the same probabilities — and the same drawn token, on 60 rows
// of different shapes (normal tails, spikes, ties, ±0, masked and NaN entries, huge logits)
// under several parameter sets, through both the dense and the masked (grammar) call.
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

// Row r of the 60: its vocabulary size and logits.
std::vector<float> make_row(int r) {
  static const int32_t kSizes[] = {262144, 20000, 4099, 2048, 65536, 3001};
  const int32_t n = kSizes[r % 6];
  std::mt19937 rng(static_cast<uint32_t>(1000 + r));
  const float sigma = 0.3f + 1.7f * static_cast<float>(r % 5);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> row(static_cast<size_t>(n));
  for (auto& v : row) v = nd(rng);
  switch (r % 10) {
    case 0:  // a few strong candidates over the tail, as a model gives
      row[17] = 14.0f, row[99] = 13.0f, row[n / 2] = 12.5f;
      break;
    case 1:  // logits on a coarse grid: many ties, broken by id
      for (auto& v : row) v = std::round(v * 2.0f) / 2.0f;
      break;
    case 2:  // zeros of both signs among the tail
      for (size_t i = 0; i < row.size(); i += 3) row[i] = (i / 3) % 2 ? -0.0f : 0.0f;
      break;
    case 3:  // a third masked, a few NaNs
      for (size_t i = 0; i < row.size(); i += 3) row[i] = -kInf;
      for (size_t i = 1; i < row.size(); i += 97) row[i] = std::numeric_limits<float>::quiet_NaN();
      break;
    case 4:  // every logit equal
      for (auto& v : row) v = 1.25f;
      break;
    case 5:  // huge logits: differences overflow the buckets' float arithmetic
      for (auto& v : row) v *= 1e36f;
      break;
    case 6:  // a flat plateau just below the top (the cut falls inside a run of equals)
      for (size_t i = 0; i < row.size() / 4; ++i) row[i * 4] = 3.0f;
      row[5] = 3.5f;
      break;
    default: break;
  }
  return row;
}

std::vector<SamplingParams> parameter_sets(int r) {
  const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f, 4.0f};
  const float top_ps[] = {0.5f, 0.9f, 0.95f, 0.99f, 0.999999f, 0.05f};
  std::vector<SamplingParams> sets;
  for (int k = 0; k < 4; ++k) {
    SamplingParams p;
    p.temperature = temps[(r + k) % 5];
    p.top_p = top_ps[(r + 2 * k) % 6];
    p.min_p = k == 2 ? 0.05f : 0.0f;
    p.repeat_penalty = k == 3 ? 1.3f : 1.0f;
    p.seed = static_cast<uint64_t>(r * 4 + k);
    sets.push_back(p);
  }
  return sets;
}

void expect_same(std::span<const TokenProb> want, std::span<const TokenProb> got, const std::string& where) {
  ASSERT_EQ(want.size(), got.size()) << where;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].token, got[i].token) << where << " rank " << i;
    uint32_t a, b;
    std::memcpy(&a, &want[i].prob, 4);
    std::memcpy(&b, &got[i].prob, 4);
    ASSERT_EQ(a, b) << where << " rank " << i << " token " << want[i].token;
  }
}

// The distribution of `row` under p (a copy: penalties change it), as a list that outlives ws.
std::vector<TokenProb> distribution_of(const Sampler& s, const std::vector<float>& row,
                                       std::span<const int32_t> history, const std::vector<int32_t>* ids) {
  SamplerWorkspace ws;
  std::vector<float> l = row;
  const auto d = ids != nullptr ? s.distribution_over(l.data(), *ids, history, ws)
                                : s.distribution(l.data(), history, ws);
  return {d.begin(), d.end()};
}

TEST(TopPSelect, SameDistributionAndTokenAsTheSortingRule) {
  std::vector<int32_t> history(80);
  size_t selected = 0;  // lists long enough for the selection, to know the test reached it
  for (int r = 0; r < 60; ++r) {
    const std::vector<float> row = make_row(r);
    const int32_t n = static_cast<int32_t>(row.size());
    for (size_t i = 0; i < history.size(); ++i) history[i] = static_cast<int32_t>((i * 7919 + r) % n);
    std::vector<int32_t> ids;  // a grammar's allowed tokens: every other id
    for (int32_t i = r % 2; i < n; i += 2) ids.push_back(i);
    for (const SamplingParams& p : parameter_sets(r)) {
      const std::string where = "row " + std::to_string(r) + " T " + std::to_string(p.temperature) + " top_p " +
                                std::to_string(p.top_p) + " min_p " + std::to_string(p.min_p);
      Sampler sorting(p, n);
      const Sampler selecting(p, n);
      sorting.use_sorted_top_p(true);
      for (const std::vector<int32_t>* allowed :
           {static_cast<const std::vector<int32_t>*>(nullptr), static_cast<const std::vector<int32_t>*>(&ids)}) {
        const std::string at = where + (allowed != nullptr ? " (masked)" : "");
        const auto want = distribution_of(sorting, row, history, allowed);
        const auto got = distribution_of(selecting, row, history, allowed);
        expect_same(want, got, at);
        if (::testing::Test::HasFatalFailure()) return;
        const double u = selecting.uniform(static_cast<int64_t>(history.size()));
        EXPECT_EQ(Sampler::draw(want, u), Sampler::draw(got, u)) << at;
        selected += static_cast<size_t>(n) >= 2 * 2048 ? 1 : 0;
      }
      std::vector<float> a = row, b = row;
      EXPECT_EQ(sorting.sample(a.data(), history), selecting.sample(b.data(), history)) << where;
    }
  }
  EXPECT_GT(selected, 100u);
}

}  // namespace
}  // namespace sluice
