// Rejection sampling keeps the target's distribution: speculative runs with sampled drafts
// against the exact distribution of the first tokens, enumerated from the target's processed
// distributions, by a chi-square test (cells pooled to an expected count >= 5, fixed seeds);
// and the same test rejects a deliberately biased acceptance rule, so it has the power to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "unit/spec/synthetic_model.h"
#include "unit/spec/verify_reference.h"

namespace sluice::spec {
namespace {

constexpr int32_t kVocab = 24;
constexpr int kDepth = 3;  // the test looks at the first 3 generated tokens

// Regularized upper incomplete gamma Q(a, x): the series for x < a + 1, else the continued
// fraction (modified Lentz), both in double.
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_pre = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && std::fabs(term) > 1e-17 * std::fabs(sum); ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_pre);
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-16) break;
  }
  return std::exp(log_pre) * h;
}

double chi2_p_value(double chi2, int df) { return gamma_q(df / 2.0, chi2 / 2.0); }

TEST(ChiSquare, PValuesMatchTables) {
  EXPECT_NEAR(chi2_p_value(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(chi2_p_value(18.307038, 10), 0.05, 1e-6);
  EXPECT_NEAR(chi2_p_value(124.342113, 100), 0.05, 1e-6);
  EXPECT_NEAR(chi2_p_value(2.0, 2), std::exp(-1.0), 1e-12);
  EXPECT_NEAR(chi2_p_value(6.634897, 1), 0.01, 1e-6);
  EXPECT_NEAR(chi2_p_value(0.5, 3), 0.918891, 1e-6);
}

struct Setup {
  SamplingParams target;
  SamplingParams draft;
  std::vector<int32_t> prompt = {4, 8, 15, 16, 23};
};

Setup make_setup() {
  Setup s;
  s.target.temperature = 1.0f;
  s.target.top_k = 8;
  s.draft.temperature = 1.4f;  // flatter, on different logits: supports overlap only in part
  s.draft.top_k = 8;
  return s;
}

// The target's processed distribution after `history`, copied out of the workspace.
std::vector<TokenProb> target_dist(const Sampler& s, std::span<const int32_t> history, SamplerWorkspace& ws) {
  std::vector<float> row(kVocab);
  test::synthetic_logits(history, kVocab, 0, row.data());
  const auto d = s.distribution(row.data(), history, ws);
  return {d.begin(), d.end()};
}

// Exact probability of every sequence of kDepth tokens, enumerated.
void enumerate(const Sampler& s, std::vector<int32_t>& seq, double prob, int depth, SamplerWorkspace& ws,
               std::map<std::vector<int32_t>, double>& cells, size_t n_prompt) {
  if (depth == kDepth) {
    cells[std::vector<int32_t>(seq.begin() + n_prompt, seq.end())] += prob;
    return;
  }
  for (const TokenProb& e : target_dist(s, seq, ws)) {
    seq.push_back(e.token);
    enumerate(s, seq, prob * e.prob, depth + 1, ws, cells, n_prompt);
    seq.pop_back();
  }
}

int64_t g_accepted = 0, g_drafted = 0;  // acceptance of the correct rule's runs

// An acceptance rule: the right one, or one that accepts a draft too often.
using AcceptRule = bool (*)(float p_x, float q_x, double u);
bool biased_accept(float p_x, float q_x, double u) { return q_x > 0 && u * q_x < 1.3f * p_x; }

// The first kDepth tokens of a speculative run with seed `seed`, K sampled drafts per step.
std::vector<int32_t> run_once(const Setup& st, uint64_t seed, int32_t k, AcceptRule rule, SamplerWorkspace& ws) {
  SamplingParams tp = st.target, dp = st.draft;
  tp.seed = dp.seed = seed;
  const Sampler target(tp, kVocab), drafter(dp, kVocab);
  std::vector<int32_t> seq = st.prompt, out;
  std::vector<float> row(kVocab);
  std::vector<std::vector<TokenProb>> p_rows;
  RejectionScratch scratch;
  Draft d;
  while (seq.size() < st.prompt.size() + kDepth) {
    const size_t base = seq.size();
    d.clear();
    for (int32_t i = 0; i < k; ++i) {  // the draft model samples with its own stream
      test::synthetic_logits(seq, kVocab, 1, row.data());
      const auto q = drafter.distribution(row.data(), seq, ws);
      const int32_t x = Sampler::draw(q, drafter.uniform(static_cast<int64_t>(seq.size()), RandomStream::kDraft));
      d.push(x, q);
      seq.push_back(x);
    }
    p_rows.clear();
    for (int32_t i = 0; i <= k; ++i)
      p_rows.push_back(target_dist(target, std::span<const int32_t>(seq).first(base + i), ws));
    seq.resize(base);
    auto p_of = [&](int32_t i) { return std::span<const TokenProb>(p_rows[i]); };
    if (rule == nullptr) {
      g_accepted += verify_rejection(target, d, static_cast<int64_t>(base), p_of, scratch, out);
      g_drafted += k;
    } else {  // the same loop with another acceptance test
      out.clear();
      int32_t i = 0;
      for (; i < k; ++i) {
        const int32_t x = d.tokens()[i];
        if (!rule(prob_of(p_rows[i], x), prob_of(d.q(i), x),
                  target.uniform(static_cast<int64_t>(base) + i, RandomStream::kAccept)))
          break;
        out.push_back(x);
      }
      if (i < k) {
        residual(p_rows[i], d.q(i), scratch.residual);
        out.push_back(Sampler::draw(scratch.residual.empty() ? std::span<const TokenProb>(p_rows[i]) : scratch.residual,
                                    target.uniform(static_cast<int64_t>(base) + i, RandomStream::kResidual)));
      } else {
        out.push_back(Sampler::draw(p_rows[k], target.uniform(static_cast<int64_t>(base) + k, RandomStream::kDraw)));
      }
    }
    seq.insert(seq.end(), out.begin(), out.end());
  }
  return std::vector<int32_t>(seq.begin() + st.prompt.size(), seq.begin() + st.prompt.size() + kDepth);
}

struct Chi2 {
  double stat;
  int df;
  double p;
};

// Observed counts of n runs against the exact cells, pooled in order of expected count so
// every pooled cell expects at least 5.
Chi2 chi_square(const std::map<std::vector<int32_t>, double>& exact, const std::map<std::vector<int32_t>, int>& seen,
                int n) {
  std::vector<std::pair<double, int>> cells;  // (expected, observed)
  for (const auto& [key, prob] : exact) {
    const auto it = seen.find(key);
    cells.push_back({prob * n, it == seen.end() ? 0 : it->second});
  }
  for (const auto& [key, count] : seen)
    EXPECT_TRUE(exact.count(key)) << "a sequence the target cannot produce was produced";
  std::sort(cells.begin(), cells.end());
  std::vector<std::pair<double, int>> pooled;
  std::pair<double, int> acc{0.0, 0};
  for (const auto& c : cells) {
    acc.first += c.first;
    acc.second += c.second;
    if (acc.first >= 5) pooled.push_back(acc), acc = {0.0, 0};
  }
  if (acc.first > 0) pooled.back().first += acc.first, pooled.back().second += acc.second;
  double stat = 0;
  for (const auto& [e, o] : pooled) stat += (o - e) * (o - e) / e;
  const int df = static_cast<int>(pooled.size()) - 1;
  return {stat, df, chi2_p_value(stat, df)};
}

Chi2 test_rule(int32_t k, AcceptRule rule, int n) {
  const Setup st = make_setup();
  SamplerWorkspace ws;
  SamplingParams tp = st.target;
  const Sampler target(tp, kVocab);
  std::map<std::vector<int32_t>, double> exact;
  std::vector<int32_t> seq = st.prompt;
  enumerate(target, seq, 1.0, 0, ws, exact, st.prompt.size());
  std::map<std::vector<int32_t>, int> seen;
  g_accepted = g_drafted = 0;
  for (int t = 0; t < n; ++t) ++seen[run_once(st, 1000 + static_cast<uint64_t>(t), k, rule, ws)];
  return chi_square(exact, seen, n);
}

TEST(Rejection, SampledDraftsKeepTheTargetsDistribution) {
  for (int32_t k : {1, 2, 4}) {
    const Chi2 c = test_rule(k, nullptr, 30000);
    const double acceptance = static_cast<double>(g_accepted) / static_cast<double>(g_drafted);
    std::printf("K %d: chi2 %.1f, df %d, p %.4g, acceptance %.3f\n", k, c.stat, c.df, c.p, acceptance);
    EXPECT_GT(c.df, 100) << "the test covers many cells";
    EXPECT_GT(acceptance, 0.3) << "both acceptance and the residual draw are exercised";
    EXPECT_LT(acceptance, 0.8);
    EXPECT_GT(c.p, 1e-3) << "K " << k << " chi2 " << c.stat << " df " << c.df;
  }
}

TEST(Rejection, TheTestRejectsABiasedAcceptanceRule) {
  const Chi2 c = test_rule(2, biased_accept, 30000);
  std::printf("biased: chi2 %.1f df %d p %.4g\n", c.stat, c.df, c.p);
  EXPECT_LT(c.p, 1e-6) << "chi2 " << c.stat << " df " << c.df;
}

}  // namespace
}  // namespace sluice::spec
