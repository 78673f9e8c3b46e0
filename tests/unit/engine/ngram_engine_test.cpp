// The engine with its own n-gram drafter per sequence (EngineConfig::spec = kNgram): eight
// concurrent sequences, greedy and seeded-sampled with penalties, mixed prefill, a sliding
// group, and a pool small enough to preempt. The tokens must be bitwise those of the same
// engine without speculation, and every block must be back in the pool at the end.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine_core.h"
#include "engine_drive.h"
#include "fake_model.h"
#include "threading/thread_pool.h"

namespace sluice::engine {
namespace {

using test::FakeModel;
using test::make_prompt;

// A small vocabulary, so n-grams recur and the model's tokens sometimes match the drafts.
constexpr int32_t kVocab = 7;

struct Outcome {
  std::map<RequestId, std::vector<int32_t>> tokens;
  EngineStats stats;
};

Outcome run_ngram(const std::vector<EngineRequest>& reqs, int32_t k, int32_t blocks_per_group,
                  const spec::DraftPolicy& policy = {}, ThreadPool* sample_pool = nullptr,
                  std::map<RequestId, std::vector<float>>* logprobs = nullptr, int32_t max_running = 8) {
  FakeModel model(kVocab, {{1, 1, 2, 0}, {1, 1, 2, 8}});
  KvCache kv(model.spec().kv_groups, 4, {blocks_per_group, blocks_per_group}, KvType::F32);
  EngineConfig cfg;
  cfg.sample_pool = sample_pool;
  cfg.sched = SchedulerConfig{max_running, 24, 512};
  cfg.sched.draft_max = k;
  cfg.sched.policy = policy;
  cfg.spec = k > 0 ? SpecMethod::kNgram : SpecMethod::kNone;
  Outcome r;
  {
    EngineCore core(model, kv, cfg);
    if (logprobs) {
      for (const EngineRequest& q : reqs) core.add(q);
      while (core.has_work())
        for (const TokenOutput& o : core.step())
          if (o.token >= 0) {
            r.tokens[o.id].push_back(o.token);
            if (o.logprob) (*logprobs)[o.id].push_back(o.logprob->logprob);
          }
    } else {
      run_to_end(core, reqs, r.tokens);
    }
    r.stats = core.stats();
  }
  EXPECT_EQ(model.errors, 0) << "a query read a wrong or missing key";
  return r;
}

std::vector<EngineRequest> mixed_requests() {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    EngineRequest r;
    r.id = static_cast<RequestId>(i + 1);
    r.prompt = make_prompt(3 + 7 * i, kVocab, 100 + static_cast<uint64_t>(i));  // up to 52 > window 8
    r.max_tokens = 40 + 3 * i;
    if (i % 2 == 0) {
      r.sampling.temperature = 0;
    } else {
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 17 + static_cast<uint64_t>(i);
      if (i == 3) r.sampling.repeat_penalty = 1.3f;
      if (i == 5) r.sampling.top_k = 3;
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

TEST(NgramEngine, OutputIsBitwiseThePlainOutputAmongEightSequences) {
  const auto reqs = mixed_requests();
  const Outcome plain = run_ngram(reqs, 0, 256);
  EXPECT_EQ(plain.stats.drafted_tokens, 0);
  for (int32_t k : {1, 3, 8}) {
    const Outcome spec = run_ngram(reqs, k, 256);
    EXPECT_EQ(spec.tokens, plain.tokens) << "k=" << k;
    EXPECT_GT(spec.stats.accepted_tokens, 0) << "k=" << k;
    EXPECT_LT(spec.stats.accepted_tokens, spec.stats.drafted_tokens) << "k=" << k;
    // Every n-gram draft is a copy, from the prompt or from the output; both occur here.
    const EngineStats& st = spec.stats;
    EXPECT_EQ(st.drafted_prompt + st.drafted_output, st.drafted_tokens) << "k=" << k;
    EXPECT_EQ(st.accepted_prompt + st.accepted_output, st.accepted_tokens) << "k=" << k;
    EXPECT_GT(st.drafted_prompt, 0) << "k=" << k;
    EXPECT_GT(st.drafted_output, 0) << "k=" << k;
  }
}

TEST(NgramEngine, PreemptionForgetsAndRebuildsTheDrafter) {
  // 12 blocks of 4 positions per group cannot hold eight sequences of up to ~110 positions.
  const auto reqs = mixed_requests();
  const Outcome plain = run_ngram(reqs, 0, 256);
  const Outcome spec = run_ngram(reqs, 4, 36);
  EXPECT_GT(spec.stats.preemptions, 0);
  EXPECT_GT(spec.stats.accepted_tokens, 0);
  EXPECT_EQ(spec.tokens, plain.tokens);
}

TEST(NgramEngine, AdaptivePolicyKeepsTheTokensWhateverLengthItPicks) {
  // Sampled requests draw their number keyed by (seed, position), so the tokens cannot depend
  // on how many drafts each step verified. A curve that turns compute-bound at a few tokens
  // makes the policy change K as sequences come and go; a linear one switches speculation off.
  // Four at a time, so that requests wait for most of the run: then every expected token
  // counts (with nothing waiting, a batch whose slowest is never offered a draft drafts nothing).
  const auto reqs = mixed_requests();
  const Outcome plain = run_ngram(reqs, 0, 256);
  const Outcome fixed = run_ngram(reqs, 8, 256, {}, nullptr, nullptr, 4);
  spec::DraftPolicy steep;
  steep.adaptive = true;
  steep.curve = spec::StepCostCurve{{{1, 1.0}, {12, 1.1}, {20, 1.6}, {64, 30.0}}};
  steep.margin = 0;  // the model alone, so that every length gets used
  const Outcome adaptive = run_ngram(reqs, 8, 256, steep, nullptr, nullptr, 4);
  EXPECT_EQ(adaptive.tokens, plain.tokens);
  EXPECT_GT(adaptive.stats.accepted_tokens, 0);
  EXPECT_LT(adaptive.stats.drafted_tokens, fixed.stats.drafted_tokens);
  // Several lengths were used, and the deep positions less often than at a fixed K.
  ASSERT_EQ(adaptive.stats.drafted_at.size(), 8u);
  // (Shadow proposals keep the estimate at this random text's low acceptance, so the lengths
  // stay short: 1, 2 and 3 all occur.)
  EXPECT_GT(adaptive.stats.drafted_at[0], adaptive.stats.drafted_at[2]);
  EXPECT_GT(adaptive.stats.drafted_at[2], 0);
  EXPECT_LT(adaptive.stats.drafted_at[7], fixed.stats.drafted_at[7]);
  const Outcome preempted = run_ngram(reqs, 8, 36, steep);
  EXPECT_GT(preempted.stats.preemptions, 0);
  EXPECT_EQ(preempted.tokens, plain.tokens);
  spec::DraftPolicy compute_bound;
  compute_bound.adaptive = true;
  compute_bound.curve = spec::StepCostCurve{{{1, 1.0}, {64, 64.0}}};
  const Outcome off = run_ngram(reqs, 8, 256, compute_bound);
  EXPECT_EQ(off.stats.drafted_tokens, 0);
  EXPECT_EQ(off.tokens, plain.tokens);
}

TEST(NgramEngine, PerPositionCountersAndTheRequestsOwnCap) {
  auto reqs = mixed_requests();
  reqs[0].draft_max = 0;   // off for this request
  reqs[1].draft_max = 2;   // at most 2
  reqs[2].draft_max = 50;  // above the engine's 4: the engine's
  const Outcome plain = run_ngram(reqs, 0, 256);
  FakeModel model(kVocab, {{1, 1, 2, 0}, {1, 1, 2, 8}});
  KvCache kv(model.spec().kv_groups, 4, {256, 256}, KvType::F32);
  EngineConfig cfg;
  cfg.sched = SchedulerConfig{8, 24, 512};
  cfg.sched.draft_max = 4;
  cfg.spec = SpecMethod::kNgram;
  EngineCore core(model, kv, cfg);
  for (const EngineRequest& q : reqs) core.add(q);
  std::map<RequestId, TokenOutput> last;
  std::map<RequestId, std::vector<int32_t>> tokens;
  int64_t max_drafts_1 = 0;
  while (core.has_work())
    for (const TokenOutput& o : core.step()) {
      if (o.token >= 0) tokens[o.id].push_back(o.token);
      if (o.id == 2) max_drafts_1 = std::max<int64_t>(max_drafts_1, o.n_drafted - last[2].n_drafted);
      last[o.id] = o;
    }
  EXPECT_EQ(tokens, plain.tokens);
  EXPECT_EQ(last[1].n_drafted, 0);
  EXPECT_GT(last[2].n_drafted, 0);
  EXPECT_LE(max_drafts_1, 2);
  EXPECT_GT(last[3].n_drafted, 0);
  const EngineStats st = core.stats();
  ASSERT_EQ(st.accepted_at.size(), 4u);
  int64_t drafted = 0, accepted = 0, req_drafted = 0, req_accepted = 0;
  for (size_t i = 0; i < 4; ++i) {
    drafted += st.drafted_at[i];
    accepted += st.accepted_at[i];
    EXPECT_LE(st.accepted_at[i], st.drafted_at[i]);
    if (i > 0) EXPECT_LE(st.accepted_at[i], st.accepted_at[i - 1]) << "position i accepted only after i - 1";
  }
  for (const auto& [id, o] : last) {
    req_drafted += o.n_drafted;
    req_accepted += o.n_accepted;
  }
  EXPECT_EQ(drafted, st.drafted_tokens);
  EXPECT_EQ(accepted, st.accepted_tokens);
  EXPECT_EQ(req_drafted, st.drafted_tokens);
  EXPECT_EQ(req_accepted, st.accepted_tokens);
}

TEST(NgramEngine, SamplingOnAPoolGivesTheSameTokens) {
  // A step's sequences sampled on four workers (ModelRunner::sample_tasks): greedy, sampled,
  // penalised, top-k and logprob requests, plain and with drafts verified, give the tokens and
  // logprobs of sampling them one after another on the calling thread.
  auto reqs = mixed_requests();
  for (size_t i = 0; i < reqs.size(); i += 3) reqs[i].top_logprobs = 2;
  ThreadPool pool(4);
  for (int32_t k : {0, 3}) {
    std::map<RequestId, std::vector<float>> lp_one, lp_pool;
    const Outcome one = run_ngram(reqs, k, 256, {}, nullptr, &lp_one);
    const Outcome many = run_ngram(reqs, k, 256, {}, &pool, &lp_pool);
    EXPECT_EQ(many.tokens, one.tokens) << "k=" << k;
    EXPECT_EQ(lp_pool, lp_one) << "k=" << k;
    EXPECT_FALSE(lp_one.empty());
    if (k > 0) EXPECT_GT(many.stats.accepted_tokens, 0);
  }
}

}  // namespace
}  // namespace sluice::engine
