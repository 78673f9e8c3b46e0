#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/error.h"
#include "spec/ngram_drafter.h"
#include "unit/spec/synthetic_model.h"
#include "unit/spec/verify_reference.h"

namespace sluice::spec {
namespace {

constexpr int32_t kVocab = 40;

TEST(Verify, AcceptMatchingTakesTheLongestAgreeingPrefixThenTheTargetsToken) {
  const std::vector<int32_t> target = {5, 6, 7, 8};
  int asked = 0;
  auto t = [&](int32_t i) {
    ++asked;
    return target[i];
  };
  std::vector<int32_t> out;
  EXPECT_EQ(accept_matching(std::vector<int32_t>{5, 6, 9}, t, out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(asked, 3);
  asked = 0;
  EXPECT_EQ(accept_matching(std::vector<int32_t>{1, 6, 7}, t, out), 0);  // rows after a mismatch are not asked
  EXPECT_EQ(out, std::vector<int32_t>{5});
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(accept_matching(std::vector<int32_t>{5, 6, 7}, t, out), 3);  // all accepted: the bonus token
  EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(accept_matching(std::vector<int32_t>{}, t, out), 0);
  EXPECT_EQ(out, std::vector<int32_t>{5});
}

TEST(Verify, GreedyAcceptsDraftsEqualToTheArgmax) {
  SamplingParams g;
  g.temperature = 0;
  const Sampler s(g, 4);
  SamplerWorkspace ws;
  // Rows for [last, d1, d2]: argmax 2, 3, 1.
  std::vector<float> rows = {0, 1, 5, 2, 0, 1, 2, 9, 0, 7, 3, 1};
  std::vector<int32_t> out;
  std::vector<int32_t> seq = {0, 0, 2, 3};  // history, then drafts 2, 3
  auto r = rows;
  EXPECT_EQ(verify_sampled(s, seq, 2, r.data(), 4, ws, out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{2, 3, 1}));
  seq = {0, 0, 2, 0};
  r = rows;
  EXPECT_EQ(verify_sampled(s, seq, 2, r.data(), 4, ws, out), 1);
  EXPECT_EQ(out, (std::vector<int32_t>{2, 3}));
  EXPECT_THROW(verify_sampled(s, seq, 5, r.data(), 4, ws, out), Error);
  EXPECT_THROW(verify_sampled(s, seq, -1, r.data(), 4, ws, out), Error);
}

// Drafters for the identity test: what the n-gram index proposes; an oracle that knows the
// plain output and corrupts each token with probability 0.4; uniform noise.
enum class Kind { kNgram, kOracle, kNoise };

struct Decoded {
  std::vector<int32_t> tokens;
  int accepted = 0;
  int steps = 0;
};

Decoded plain(const Sampler& s, const std::vector<int32_t>& prompt, int n) {
  SamplerWorkspace ws;
  std::vector<int32_t> seq = prompt;
  std::vector<float> row(kVocab);
  for (int i = 0; i < n; ++i) {
    test::synthetic_logits(seq, kVocab, 0, row.data());
    seq.push_back(s.sample(row.data(), seq, ws));
  }
  return {std::vector<int32_t>(seq.begin() + prompt.size(), seq.end()), 0, n};
}

Decoded speculative(const Sampler& s, const std::vector<int32_t>& prompt, int n, int32_t k, Kind kind,
                    const std::vector<int32_t>& oracle, std::mt19937& rng) {
  SamplerWorkspace ws;
  NgramDrafter ngram({1, 3});
  ngram.observe(prompt);
  std::vector<int32_t> seq = prompt, out;
  std::vector<float> rows;
  Draft d;
  Decoded r;
  while (static_cast<int>(seq.size() - prompt.size()) < n) {
    const size_t base = seq.size();
    d.clear();
    if (kind == Kind::kNgram) ngram.propose(k, d);
    for (int32_t i = 0; i < k && kind != Kind::kNgram; ++i) {
      const size_t at = base - prompt.size() + static_cast<size_t>(i);
      const bool right = kind == Kind::kOracle && at < oracle.size() && rng() % 10 < 6;
      d.push(right ? oracle[at] : static_cast<int32_t>(rng() % kVocab));
    }
    seq.insert(seq.end(), d.tokens().begin(), d.tokens().end());  // the (K+1)-token step
    rows.assign(static_cast<size_t>(d.size() + 1) * kVocab, 0.0f);
    for (int32_t i = 0; i <= d.size(); ++i)
      test::synthetic_logits(std::span<const int32_t>(seq).first(base + i), kVocab, 0, rows.data() + i * kVocab);
    r.accepted += verify_sampled(s, seq, d.size(), rows.data(), kVocab, ws, out);
    ++r.steps;
    seq.resize(base);
    const KeptRun kept = keep_until_stop(out, {}, static_cast<int64_t>(base - prompt.size()), n, 0, 1 << 30);
    seq.insert(seq.end(), out.begin(), out.begin() + kept.n_keep);
    ngram.observe(std::span<const int32_t>(out).first(static_cast<size_t>(kept.n_keep)));
  }
  r.tokens.assign(seq.begin() + prompt.size(), seq.end());
  return r;
}

// "Same seed, same output" survives speculation: deterministic drafts verified by sampling
// the target with the keyed stream give the plain tokens bit for bit, for every K and
// drafter, greedy or sampled, with penalties that make each row depend on the drafts before.
TEST(Verify, DeterministicDraftsGiveExactlyThePlainSampledOutput) {
  std::vector<SamplingParams> params(4);
  params[0].temperature = 0.0f;
  params[1].temperature = 1.0f;
  params[1].seed = 11;
  params[2] = {0.8f, 8, 0.9f, 0.02f, 1.3f, 0.2f, 0.1f, 16, 12345};
  params[3] = {1.5f, 0, 0.95f, 0.0f, 1.0f, 0.0f, 0.0f, 64, 777};
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
  std::mt19937 rng(3);
  int total_accepted = 0;
  for (const SamplingParams& p : params) {
    const Sampler s(p, kVocab);
    const Decoded ref = plain(s, prompt, 80);
    for (int32_t k = 1; k <= 8; ++k) {
      for (Kind kind : {Kind::kNgram, Kind::kOracle, Kind::kNoise}) {
        const Decoded r = speculative(s, prompt, 80, k, kind, ref.tokens, rng);
        ASSERT_EQ(r.tokens, ref.tokens) << "T " << p.temperature << " K " << k << " drafter " << static_cast<int>(kind);
        if (kind == Kind::kOracle && k >= 4) {
          EXPECT_LT(r.steps, 80) << "the oracle's drafts are accepted";
        }
        total_accepted += r.accepted;
      }
    }
  }
  EXPECT_GT(total_accepted, 1000);
}

TEST(Verify, ResidualIsThePositivePartOfPMinusQ) {
  const std::vector<TokenProb> p = {{3, 0.2f}, {1, 0.5f}, {2, 0.3f}};
  const std::vector<TokenProb> q = {{2, 0.6f}, {1, 0.2f}, {4, 0.2f}};
  std::vector<TokenProb> r;
  residual(p, q, r);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].token, 1);
  EXPECT_FLOAT_EQ(r[0].prob, 0.3f);
  EXPECT_EQ(r[1].token, 3);
  EXPECT_FLOAT_EQ(r[1].prob, 0.2f);
  residual(q, q, r);
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(accept_draft(0.5f, 0.25f, 0.99));  // p >= q: always
  EXPECT_TRUE(accept_draft(0.1f, 0.4f, 0.24));   // p/q = 0.25
  EXPECT_FALSE(accept_draft(0.1f, 0.4f, 0.25));
  EXPECT_FALSE(accept_draft(0.1f, 0.0f, 0.0));  // not in q's support: never drafted, never accepted
}

TEST(Verify, KeepUntilStopTrimsExactly) {
  const std::vector<int32_t> stops = {1, 99};
  const std::vector<int32_t> run = {5, 6, 99, 7, 8};
  KeptRun k = keep_until_stop(run, stops, 10, 100, 30, 1000);
  EXPECT_EQ(k.n_keep, 3);  // the stop token is kept, what follows is not
  EXPECT_EQ(k.end, RunEnd::kStopToken);
  k = keep_until_stop(run, stops, 10, 12, 30, 1000);  // 11th, 12th generated: max_tokens
  EXPECT_EQ(k.n_keep, 2);
  EXPECT_EQ(k.end, RunEnd::kLength);
  k = keep_until_stop(run, stops, 10, 100, 30, 31);  // the 31st sequence token fills the context
  EXPECT_EQ(k.n_keep, 1);
  EXPECT_EQ(k.end, RunEnd::kLength);
  k = keep_until_stop(std::vector<int32_t>{5, 6}, stops, 0, 100, 30, 1000);
  EXPECT_EQ(k.n_keep, 2);
  EXPECT_EQ(k.end, RunEnd::kNone);
  k = keep_until_stop(std::vector<int32_t>{1, 6}, stops, 9, 10, 0, 1000);  // a stop id at max_tokens is a stop
  EXPECT_EQ(k.n_keep, 1);
  EXPECT_EQ(k.end, RunEnd::kStopToken);
}

}  // namespace
}  // namespace sluice::spec
