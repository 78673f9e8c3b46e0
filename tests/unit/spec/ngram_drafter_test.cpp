#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/error.h"
#include "spec/ngram_drafter.h"

namespace sluice::spec {
namespace {

std::vector<int32_t> propose(NgramDrafter& d, int32_t k) {
  Draft out;
  d.propose(k, out);
  return {out.tokens().begin(), out.tokens().end()};
}

// The definition, by scanning: the longest n in [lo, hi] whose suffix occurred earlier ending
// at e < T; the latest such e; then seq[e], seq[e + 1], .. continuing into the proposal itself.
std::vector<int32_t> brute_force(const std::vector<int32_t>& seq, int32_t lo, int32_t hi, int32_t k) {
  const int64_t T = static_cast<int64_t>(seq.size());
  for (int32_t n = hi; n >= lo; --n) {
    if (n > T) continue;
    for (int64_t e = T - 1; e >= n; --e) {
      if (!std::equal(seq.begin() + (e - n), seq.begin() + e, seq.end() - n)) continue;
      std::vector<int32_t> ext = seq, out;
      for (int32_t j = 0; j < k; ++j) {
        out.push_back(ext[e + j]);
        ext.push_back(out.back());
      }
      return out;
    }
  }
  return {};
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  NgramDrafter d({2, 4});
  d.observe(std::vector<int32_t>{1, 2, 3, 4, 5, 9, 9, 1, 2, 3, 7, 8, 6, 1, 2, 3});
  Draft out;
  d.propose(4, out);
  EXPECT_EQ(std::vector<int32_t>(out.tokens().begin(), out.tokens().end()), (std::vector<int32_t>{7, 8, 6, 1}));
  EXPECT_EQ(out.source, 10);  // the 7
  EXPECT_EQ(d.last_match_n(), 3);
  EXPECT_FALSE(out.has_q());
  EXPECT_EQ(propose(d, 2), (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(propose(d, 0).empty());
}

TEST(NgramDrafter, TheLongestSuffixWins) {
  // "5 1 2" was followed by 40; "1 2" most recently by 50.
  const std::vector<int32_t> seq = {5, 1, 2, 40, 9, 1, 2, 50, 8, 5, 1, 2};
  NgramDrafter d3({2, 3});
  d3.observe(seq);
  EXPECT_EQ(propose(d3, 1), std::vector<int32_t>{40});
  NgramDrafter d2({2, 2});
  d2.observe(seq);
  EXPECT_EQ(propose(d2, 1), std::vector<int32_t>{50});
}

TEST(NgramDrafter, NeverMatchesItsOwnSuffixAndRespectsMinN) {
  NgramDrafter d({2, 4});
  d.observe(std::vector<int32_t>{1, 2, 3});
  EXPECT_TRUE(propose(d, 4).empty());
  d.observe(std::vector<int32_t>{9, 3});  // "3" repeats, but only a 1-gram matches
  EXPECT_TRUE(propose(d, 4).empty());
  NgramDrafter d1({1, 4});
  d1.observe(std::vector<int32_t>{1, 2, 3, 9, 3});
  EXPECT_EQ(propose(d1, 2), (std::vector<int32_t>{9, 3}));
}

TEST(NgramDrafter, ALoopIsProposedInFullPastTheEnd) {
  NgramDrafter d({2, 4});
  d.observe(std::vector<int32_t>{7, 1, 2, 3, 1, 2, 3, 1, 2});
  EXPECT_EQ(propose(d, 8), (std::vector<int32_t>{3, 1, 2, 3, 1, 2, 3, 1}));
  NgramDrafter rep({2, 4});
  rep.observe(std::vector<int32_t>{4, 4, 4});
  EXPECT_EQ(propose(rep, 5), (std::vector<int32_t>{4, 4, 4, 4, 4}));
}

// Token by token, in chunks, and against the scanning definition, on random sequences over a
// small vocabulary (many repeats).
TEST(NgramDrafter, IncrementalIndexEqualsTheScanningDefinition) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    const int32_t lo = 1 + trial % 3, hi = lo + trial % 4;
    const int32_t vocab = 3 + trial % 5;
    NgramDrafter one({lo, hi}), chunked({lo, hi});
    std::vector<int32_t> seq;
    std::vector<int32_t> pending;
    for (int t = 0; t < 300; ++t) {
      const int32_t tok = static_cast<int32_t>(rng() % vocab);
      seq.push_back(tok);
      pending.push_back(tok);
      one.observe(std::vector<int32_t>{tok});
      const int32_t k = 1 + static_cast<int32_t>(rng() % 8);
      const auto want = brute_force(seq, lo, hi, k);
      ASSERT_EQ(propose(one, k), want) << "trial " << trial << " t " << t;
      if (rng() % 3 == 0) {
        chunked.observe(pending);
        pending.clear();
        ASSERT_EQ(propose(chunked, k), want) << "trial " << trial << " t " << t;
      }
    }
  }
}

// A rejected run's n-grams are forgotten: the match falls back to the occurrence before.
TEST(NgramDrafter, RollbackRestoresTheEarlierOccurrence) {
  NgramDrafter d({2, 3});
  d.observe(std::vector<int32_t>{1, 2, 3, 9, 5, 1, 2, 3, 8, 6});
  d.truncate(8);  // [1 2 3 9 5 1 2 3]: "1 2 3" was followed by 8 only in the part dropped
  Draft out;
  d.propose(4, out);
  EXPECT_EQ(std::vector<int32_t>(out.tokens().begin(), out.tokens().end()), (std::vector<int32_t>{9, 5, 1, 2}));
  EXPECT_EQ(out.source, 3);
  d.observe(std::vector<int32_t>{4});
  d.truncate(8);
  d.truncate(5);  // [1 2 3 9 5]: no 2-gram repeats
  EXPECT_TRUE(propose(d, 4).empty());
}

// Rollbacks restore the index exactly: after any mix of observe and truncate, the proposal
// equals the definition over the tokens kept.
TEST(NgramDrafter, TruncateRestoresTheIndexExactly) {
  std::mt19937 rng(9);
  NgramDrafter d({2, 5});
  std::vector<int32_t> seq;
  for (int step = 0; step < 2000; ++step) {
    if (rng() % 4 == 0 && !seq.empty()) {
      const size_t keep = seq.size() - std::min<size_t>(seq.size(), 1 + rng() % 9);
      seq.resize(keep);
      d.truncate(static_cast<int64_t>(keep));
    } else {
      std::vector<int32_t> add(1 + rng() % 6);
      for (auto& t : add) t = static_cast<int32_t>(rng() % 4);
      seq.insert(seq.end(), add.begin(), add.end());
      d.observe(add);
    }
    ASSERT_EQ(d.n_tokens(), static_cast<int64_t>(seq.size()));
    ASSERT_EQ(propose(d, 6), brute_force(seq, 2, 5, 6)) << "step " << step;
  }
  d.reset();
  EXPECT_EQ(d.n_tokens(), 0);
  EXPECT_TRUE(propose(d, 4).empty());
}

TEST(NgramDrafter, RejectsBadConfigAndTruncation) {
  EXPECT_THROW(NgramDrafter({0, 3}), Error);
  EXPECT_THROW(NgramDrafter({3, 2}), Error);
  EXPECT_THROW(NgramDrafter({1, NgramDrafter::kMaxN + 1}), Error);
  NgramDrafter d;
  d.observe(std::vector<int32_t>{1, 2, 3});
  EXPECT_THROW(d.truncate(4), Error);
  EXPECT_THROW(d.truncate(-1), Error);
  d.truncate(3);
  EXPECT_EQ(d.n_tokens(), 3);
}

}  // namespace
}  // namespace sluice::spec
