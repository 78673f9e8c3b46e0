// The scheduler and the engine step with a fake model: chunked prefill, joining running
// batches, one forward per step, preemption and recompute, prefix-cache hits, window
// release, stops, aborts. Every test ends with the block pools empty.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "base/error.h"

#include "engine/engine_core.h"
#include "engine_rig.h"

namespace sluice::engine {
namespace {

struct Rig {
  // Global group + sliding group (window 8), blocks of 4 positions.
  Rig(int32_t blocks, SchedulerConfig sc, int32_t sliding_blocks = -1, bool prefix = true)
      : model(kVocab, rig_groups()),
        kv(model.spec().kv_groups, 4, {blocks, sliding_blocks < 0 ? blocks : sliding_blocks}, KvType::F32),
        core(model, kv, EngineConfig{sc, prefix}) {}
  ~Rig() { EXPECT_EQ(core.blocks().n_used_all(), 0) << "blocks leaked"; }

  EngineRequest req(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens) {
    return greedy_request(id, std::move(prompt), max_tokens);
  }
  // Runs until idle; collects the generated tokens and the final output of each request.
  void run_all(int max_steps = 10000) {
    for (int i = 0; i < max_steps && core.has_work(); ++i) collect(core.step());
    collect(core.take_outputs());
    EXPECT_FALSE(core.has_work());
  }
  void collect(const std::vector<TokenOutput>& outs) {
    for (const TokenOutput& o : outs) {
      if (o.token >= 0 && !o.is_stop_token) tokens[o.id].push_back(o.token);
      if (o.finish) last[o.id] = o;
    }
  }

  FakeModel model;
  KvCache kv;
  EngineCore core;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, TokenOutput> last;
};

SchedulerConfig cfg(int32_t parallel, int32_t budget, int32_t ctx = 512) { return {parallel, budget, ctx}; }

TEST(Scheduler, ChunkedPrefillThenDecode) {
  Rig r(64, cfg(4, 8));
  const auto prompt = make_prompt(20, kVocab, 1);
  r.core.add(r.req(1, prompt, 3));
  r.run_all();
  // 20 prompt tokens in chunks of 8, 8, 4; then 2 decodes (the 3rd token needs no forward).
  EXPECT_EQ(r.model.tokens_per_call, (std::vector<int64_t>{8, 8, 4, 1, 1}));
  EXPECT_EQ(r.tokens[1], r.model.reference_greedy(prompt, 3));
  EXPECT_EQ(r.last[1].finish, FinishReason::kLength);
  EXPECT_EQ(r.model.errors, 0);
}

TEST(Scheduler, NewRequestsJoinTheRunningBatchInOneForward) {
  Rig r(64, cfg(4, 16));
  const auto pa = make_prompt(6, kVocab, 2), pb = make_prompt(30, kVocab, 3);
  r.core.add(r.req(1, pa, 10));
  r.collect(r.core.step());  // a's prefill
  r.collect(r.core.step());  // a decodes
  r.core.add(r.req(2, pb, 4));
  r.collect(r.core.step());  // a's decode and b's first chunk, together
  EXPECT_EQ(r.model.seqs_per_call.back(), 2);
  EXPECT_EQ(r.model.tokens_per_call.back(), 16);  // 1 decode + 15 of b's prompt
  r.run_all();
  EXPECT_EQ(r.tokens[1], r.model.reference_greedy(pa, 10));
  EXPECT_EQ(r.tokens[2], r.model.reference_greedy(pb, 4));
  EXPECT_EQ(r.model.errors, 0);
}

TEST(Scheduler, AllRunningDecodesGoInOneForwardPerStep) {
  Rig r(128, cfg(8, 128));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(make_prompt(5 + i, kVocab, 10 + i));
    r.core.add(r.req(i + 1, prompts.back(), 6));
  }
  r.run_all();
  // One prefill step for all 8, then 5 decode steps of 8 sequences each.
  ASSERT_EQ(r.model.seqs_per_call.size(), 6u);
  for (size_t i = 1; i < 6; ++i) {
    EXPECT_EQ(r.model.seqs_per_call[i], 8);
    EXPECT_EQ(r.model.tokens_per_call[i], 8);
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(r.tokens[i + 1], r.model.reference_greedy(prompts[i], 6));
}

TEST(Scheduler, MaxRunningBoundsTheBatchAndTheRestWait) {
  Rig r(128, cfg(2, 64));
  for (int i = 0; i < 5; ++i) r.core.add(r.req(i + 1, make_prompt(4, kVocab, 20 + i), 3));
  r.collect(r.core.step());
  EXPECT_EQ(r.core.scheduler().n_running(), 2);
  EXPECT_EQ(r.core.scheduler().n_waiting(), 3);
  r.run_all();
  EXPECT_EQ(r.last.size(), 5u);
  for (size_t n : r.model.seqs_per_call) EXPECT_LE(n, 2u);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndRecomputesIt) {
  // 10 global blocks of 4 = 40 positions for two sequences that each grow to 8 + 20 = 28.
  Rig r(10, cfg(2, 32));
  const auto pa = make_prompt(8, kVocab, 4), pb = make_prompt(8, kVocab, 5);
  r.core.add(r.req(1, pa, 20));
  r.core.add(r.req(2, pb, 20));
  r.run_all();
  EXPECT_GT(r.core.scheduler().counters().preemptions, 0);
  // Preemption changes nothing in the output: b was recomputed from its tokens.
  EXPECT_EQ(r.tokens[1], r.model.reference_greedy(pa, 20));
  EXPECT_EQ(r.tokens[2], r.model.reference_greedy(pb, 20));
  EXPECT_EQ(r.last[1].finish, FinishReason::kLength);
  EXPECT_EQ(r.last[1].n_generated, 20);
  EXPECT_EQ(r.last[2].n_generated, 20);
  EXPECT_EQ(r.model.errors, 0);
}

TEST(Scheduler, SampledSequencesSurvivePreemptionUnchanged) {
  // Same seed, same request: the same tokens, whether it ran alone or was preempted.
  auto sampled = [](int32_t blocks, bool crowd) {
    Rig r(blocks, cfg(3, 32));
    EngineRequest q = r.req(1, make_prompt(8, kVocab, 6), 24);
    q.sampling.temperature = 1.0f;
    q.sampling.seed = 1234;
    if (crowd) {
      r.core.add(r.req(2, make_prompt(8, kVocab, 7), 24));  // older: q is the newest
      r.core.add(r.req(3, make_prompt(8, kVocab, 8), 24));
    }
    r.core.add(std::move(q));
    r.run_all();
    return std::make_pair(r.tokens[1], r.core.scheduler().counters().preemptions);
  };
  const auto alone = sampled(64, false);
  const auto crowded = sampled(18, true);
  EXPECT_GT(crowded.second, 0);
  EXPECT_EQ(alone.first, crowded.first);
  EXPECT_EQ(alone.first.size(), 24u);
}

TEST(Scheduler, ASequenceThatOutgrowsThePoolAloneEndsWithLength) {
  Rig r(5, cfg(2, 32));  // 20 positions
  r.core.add(r.req(1, make_prompt(6, kVocab, 9), 100));
  r.run_all();
  EXPECT_EQ(r.last[1].finish, FinishReason::kLength);
  EXPECT_EQ(r.last[1].n_generated, 20 - 6 + 1);  // positions 0..19 computed, plus one sampled last
}

TEST(Scheduler, StopsAtTheEndOfTheContext) {
  Rig r(64, cfg(2, 32, /*ctx=*/16));
  r.core.add(r.req(1, make_prompt(10, kVocab, 11), 100));
  r.run_all();
  EXPECT_EQ(r.last[1].finish, FinishReason::kLength);
  EXPECT_EQ(r.last[1].n_generated, 6);  // 10 + 6 = 16 tokens fill the context
}

TEST(Scheduler, RejectsPromptsThatCanNeverRun) {
  Rig r(4, cfg(2, 8, /*ctx=*/64));
  EXPECT_TRUE(r.core.check_admissible(0).has_value());
  EXPECT_TRUE(r.core.check_admissible(64).has_value());  // context: no room to generate
  EXPECT_TRUE(r.core.check_admissible(16).has_value());  // pool: 17 positions > 16
  EXPECT_FALSE(r.core.check_admissible(15).has_value());
  EXPECT_THROW(r.core.add(r.req(1, make_prompt(20, kVocab, 1), 1)), Error);
}

TEST(Scheduler, PrefixCacheHitSkipsComputeAndKeepsOutputs) {
  Rig r(64, cfg(2, 64));
  const auto system = make_prompt(24, kVocab, 12);
  auto p1 = system, p2 = system;
  for (int32_t t : make_prompt(5, kVocab, 13)) p1.push_back(t);
  for (int32_t t : make_prompt(7, kVocab, 14)) p2.push_back(t);
  r.core.add(r.req(1, p1, 4));
  r.run_all();
  const int64_t before = r.model.tokens_computed();
  r.core.add(r.req(2, p2, 4));
  r.run_all();
  EXPECT_EQ(r.last[1].n_cached, 0);
  EXPECT_EQ(r.last[2].n_cached, 24);  // the 6 full blocks of the shared prefix
  EXPECT_EQ(r.model.tokens_computed() - before, 31 - 24 + 3);
  EXPECT_EQ(r.tokens[2], r.model.reference_greedy(p2, 4));
  EXPECT_EQ(r.model.errors, 0);
}

TEST(Scheduler, PrefixCacheCanBeSwitchedOff) {
  Rig r(64, cfg(2, 64), -1, /*prefix=*/false);
  const auto p = make_prompt(24, kVocab, 15);
  r.core.add(r.req(1, p, 2));
  r.run_all();
  r.core.add(r.req(2, p, 2));
  r.run_all();
  EXPECT_EQ(r.last[2].n_cached, 0);
  EXPECT_EQ(r.tokens[1], r.tokens[2]);
}

TEST(Scheduler, EvictedPrefixesAreRecomputed) {
  Rig r(12, cfg(1, 64));
  const auto p = make_prompt(20, kVocab, 16);
  r.core.add(r.req(1, p, 2));
  r.run_all();
  r.core.add(r.req(2, make_prompt(45, kVocab, 17), 2));  // needs all 12 blocks: evicts
  r.run_all();
  r.core.add(r.req(3, p, 2));
  r.run_all();
  EXPECT_EQ(r.last[3].n_cached, 0);
  EXPECT_EQ(r.tokens[3], r.tokens[1]);
}

TEST(Scheduler, SlidingBlocksAreReleasedWhileASequenceRuns) {
  // The sliding group has only 6 blocks; a 100-token sequence needs 25 global blocks but at
  // most window + chunk positions in the sliding group at a time.
  Rig r(40, cfg(1, 8), /*sliding_blocks=*/6);
  const auto p = make_prompt(60, kVocab, 18);
  r.core.add(r.req(1, p, 40));
  int32_t peak = 0;
  while (r.core.has_work()) {
    r.collect(r.core.step());
    peak = std::max(peak, r.core.blocks().n_used(1));
  }
  EXPECT_LE(peak, 5);
  EXPECT_EQ(r.tokens[1], r.model.reference_greedy(p, 40));
  EXPECT_EQ(r.model.errors, 0);
}

TEST(Scheduler, StopIdsEndGenerationAndMinTokensBansThem) {
  Rig r(64, cfg(2, 64));
  const auto p = make_prompt(6, kVocab, 19);
  const auto ref = r.model.reference_greedy(p, 8);
  EngineRequest a = r.req(1, p, 20);
  a.stop_ids = {ref[2]};
  r.core.add(std::move(a));
  r.run_all();
  EXPECT_EQ(r.last[1].finish, FinishReason::kStop);
  EXPECT_TRUE(r.last[1].is_stop_token);
  EXPECT_EQ(r.tokens[1], std::vector<int32_t>(ref.begin(), ref.begin() + 2));  // stop token not emitted as text
  EngineRequest b = r.req(2, p, 6);
  b.stop_ids = {ref[0], ref[1], ref[2]};
  b.min_tokens = 4;
  r.core.add(std::move(b));
  r.run_all();
  ASSERT_GE(r.tokens[2].size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(r.tokens[2][i] != ref[0] && r.tokens[2][i] != ref[1] && r.tokens[2][i] != ref[2]);
}

TEST(Scheduler, AbortFreesBlocksMidPrefillAndWhileWaiting) {
  Rig r(64, cfg(1, 8));
  r.core.add(r.req(1, make_prompt(40, kVocab, 21), 5));
  r.core.add(r.req(2, make_prompt(10, kVocab, 22), 5));
  r.collect(r.core.step());  // request 1: first chunk of 8; request 2 waits
  EXPECT_GT(r.core.blocks().n_used_all(), 0);
  r.core.abort(1);
  r.core.abort(2);
  r.core.abort(99);  // unknown: ignored
  r.collect(r.core.take_outputs());
  EXPECT_EQ(r.core.blocks().n_used_all(), 0);
  EXPECT_EQ(r.last[1].finish, FinishReason::kAbort);
  EXPECT_EQ(r.last[2].finish, FinishReason::kAbort);
  EXPECT_FALSE(r.core.has_work());
}

TEST(Scheduler, LogprobsAreTheRawLogSoftmax) {
  Rig r(64, cfg(1, 64));
  const auto p = make_prompt(7, kVocab, 23);
  EngineRequest q = r.req(1, p, 1);
  q.top_logprobs = 3;
  r.core.add(std::move(q));
  std::vector<TokenOutput> outs;
  while (r.core.has_work())
    for (auto& o : r.core.step()) outs.push_back(o);
  ASSERT_EQ(outs.size(), 1u);
  const auto row = r.model.reference_logits(p);
  double z = 0;
  for (float l : row) z += std::exp(l);
  const int32_t tok = outs[0].token;
  ASSERT_TRUE(outs[0].logprob.has_value());
  EXPECT_NEAR(outs[0].logprob->logprob, row[tok] - std::log(z), 1e-5);
  ASSERT_EQ(outs[0].top.size(), 3u);
  EXPECT_EQ(outs[0].top[0].token, tok);  // greedy: the best is the chosen one
  EXPECT_GE(outs[0].top[0].logprob, outs[0].top[1].logprob);
  EXPECT_GE(outs[0].top[1].logprob, outs[0].top[2].logprob);
}

}  // namespace
}  // namespace sluice::engine
