// Multi-token engine steps: a slice carries [last sampled, d1..dK] from a drafter, the
// runner verifies greedily, the scheduler keeps the accepted tokens and rolls the KV back
// over the rest. The output must be bitwise the output without drafts; the pools must end
// empty; the prefix cache must never serve a position a rejected draft wrote.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine_core.h"
#include "engine_rig.h"

namespace sluice::engine {
namespace {

// A drafter built on the oracle: right guesses except where `wrong` says so.
DraftHook oracle_drafter(const FakeModel& m, std::function<bool(RequestId, size_t n_tokens, int32_t i)> wrong) {
  return [&m, wrong](RequestId id, std::span<const int32_t> tokens, int32_t k_max, std::vector<int32_t>& drafts) {
    const std::vector<int32_t> t(tokens.begin(), tokens.end());
    drafts = m.reference_greedy(t, k_max);
    for (int32_t i = 0; i < k_max; ++i)
      if (wrong(id, tokens.size(), i)) drafts[static_cast<size_t>(i)] = (drafts[static_cast<size_t>(i)] + 1) % kVocab;
  };
}

struct Outcome {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, TokenOutput> last;
  EngineStats stats;
};

// Global group + sliding group (window 8), blocks of 4 positions; prefix caching on.
Outcome run_engine(const std::vector<EngineRequest>& reqs, int32_t k, bool bad_drafts, int32_t budget = 32) {
  FakeModel model(kVocab, rig_groups());
  KvCache kv(model.spec().kv_groups, 4, {256, 256}, KvType::F32);
  SchedulerConfig sc{8, budget, 512};
  sc.draft_max = k;
  if (k > 0)
    sc.draft_hook = oracle_drafter(model, [bad_drafts](RequestId id, size_t n, int32_t i) {
      return bad_drafts && (id * 7 + n * 3 + static_cast<size_t>(i)) % 4 == 0;
    });
  Outcome r;
  {
    EngineCore core(model, kv, EngineConfig{sc, true});
    for (const EngineRequest& q : reqs) core.add(q);
    for (int i = 0; i < 10000 && core.has_work(); ++i)
      for (const TokenOutput& o : core.step()) {
        if (o.token >= 0 && !o.is_stop_token) r.tokens[o.id].push_back(o.token);
        if (o.finish) r.last[o.id] = o;
      }
    EXPECT_FALSE(core.has_work());
    EXPECT_EQ(core.blocks().n_used_all(), 0) << "blocks leaked";
    r.stats = core.stats();
  }
  EXPECT_EQ(model.errors, 0) << "a query read a wrong or missing key";
  return r;
}

constexpr auto req = &greedy_request;

TEST(SpecStep, GreedyOutputIsBitwiseTheSameWithDraftsAmongEightSequences) {
  std::vector<EngineRequest> reqs;
  const auto shared = make_prompt(12, kVocab, 40);  // a common prefix: prefix-cache hits
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : std::vector<int32_t>{};
    for (int32_t t : make_prompt(5 + 6 * i, kVocab, 50 + i)) p.push_back(t);  // up to 59 > window 8
    reqs.push_back(req(i + 1, p, 20 + i));
  }
  const Outcome plain = run_engine(reqs, 0, false);
  for (int32_t k : {1, 3, 8})
    for (bool bad : {false, true}) {
      const Outcome spec = run_engine(reqs, k, bad);
      EXPECT_EQ(spec.tokens, plain.tokens) << "k=" << k << " bad=" << bad;
      for (const auto& [id, o] : plain.last) EXPECT_EQ(spec.last.at(id).n_generated, o.n_generated);
      EXPECT_GT(spec.stats.accepted_tokens, 0);
      if (bad) EXPECT_LT(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
      else EXPECT_EQ(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
      if (k > 1 && !bad) EXPECT_LT(spec.stats.steps, plain.stats.steps * 2 / 3);  // several tokens per step
    }
}

TEST(SpecStep, AStopInsideAnAcceptedRunEndsTheOutputThere) {
  FakeModel oracle(kVocab, rig_groups());
  const auto p = make_prompt(9, kVocab, 3);
  const auto want = oracle.reference_greedy(p, 12);
  EngineRequest q = req(1, p, 12);
  q.stop_ids = {want[5]};           // the 6th token (if it appears earlier, that one)
  EngineRequest q2 = req(2, p, 4);  // max_tokens inside a run
  for (int32_t k : {0, 8}) {
    const Outcome r = run_engine({q, q2}, k, false);
    const size_t n_stop = static_cast<size_t>(std::find(want.begin(), want.end(), want[5]) - want.begin());
    EXPECT_EQ(r.tokens.at(1), std::vector<int32_t>(want.begin(), want.begin() + n_stop)) << "k=" << k;
    EXPECT_TRUE(r.last.at(1).is_stop_token);
    EXPECT_EQ(r.last.at(1).n_generated, static_cast<int32_t>(n_stop) + 1);
    EXPECT_EQ(r.tokens.at(2), std::vector<int32_t>(want.begin(), want.begin() + 4));
    EXPECT_EQ(*r.last.at(2).finish, FinishReason::kLength);
  }
}

TEST(SpecStep, RejectedDraftsNeverReachThePrefixCache) {
  FakeModel model(kVocab, rig_groups());
  KvCache kv(model.spec().kv_groups, 4, {64, 64}, KvType::F32);
  SchedulerConfig sc{2, 32, 512};
  sc.draft_max = 8;
  std::vector<int32_t> first_drafts;
  sc.draft_hook = [&](RequestId, std::span<const int32_t> tokens, int32_t k_max, std::vector<int32_t>& drafts) {
    drafts = model.reference_greedy(std::vector<int32_t>(tokens.begin(), tokens.end()), k_max);
    for (int32_t& d : drafts) d = (d + 1) % kVocab;  // always wrong
    if (first_drafts.empty()) first_drafts = drafts;
  };
  EngineCore core(model, kv, EngineConfig{sc, true});
  const auto p = make_prompt(8, kVocab, 11);  // two full blocks
  core.add(req(1, p, 20));
  while (core.has_work()) core.step();
  // A prompt that equals what the rejected drafts wrote after p: only p's blocks may be hits.
  std::vector<int32_t> p2 = p;
  p2.push_back(model.reference_next(p));
  p2.insert(p2.end(), first_drafts.begin(), first_drafts.end());
  core.add(req(2, p2, 4));
  std::vector<int32_t> got;
  TokenOutput last;
  while (core.has_work())
    for (const TokenOutput& o : core.step()) {
      if (o.id == 2 && o.token >= 0) got.push_back(o.token);
      if (o.id == 2 && o.finish) last = o;
    }
  EXPECT_LE(last.n_cached, 8);
  EXPECT_EQ(got, model.reference_greedy(p2, 4));
  EXPECT_EQ(model.errors, 0);
  EXPECT_EQ(core.stats().accepted_tokens, 0);
  EXPECT_GT(core.stats().drafted_tokens, 0);
  EXPECT_EQ(core.blocks().n_used_all(), 0);
}

TEST(SpecStep, TheStepThatAdmitsAPrefillDraftsNothing) {
  // An always-right drafter and a cost curve flat to 8 tokens, then steep: a sequence decoding
  // alone drafts to the cap, but the step that admits a waiting 32-token prompt computes
  // a prefill chunk, so its drafts would be priced at the compute-bound rate: none. The
  // prompt is still waiting when the drafts are chosen (plan_step counts it anyway).
  FakeModel model(kVocab, rig_groups());
  KvCache kv(model.spec().kv_groups, 4, {64, 64}, KvType::F32);
  SchedulerConfig sc{2, 64, 512};
  sc.draft_max = 4;
  sc.draft_hook = oracle_drafter(model, [](RequestId, size_t, int32_t) { return false; });
  sc.policy.adaptive = true;
  sc.policy.curve = spec::StepCostCurve{{{1, 1.0}, {8, 1.05}, {16, 9.0}}};
  EngineCore core(model, kv, EngineConfig{sc, true});
  core.add(req(1, make_prompt(6, kVocab, 3), 40));
  for (int i = 0; i < 4; ++i) core.step();  // prefill, then decodes with drafts
  ASSERT_EQ(model.tokens_per_call.back(), 5) << "alone: the token and 4 drafts";
  core.add(req(2, make_prompt(32, kVocab, 4), 4));
  const int64_t drafted = core.stats().drafted_tokens;
  core.step();
  EXPECT_EQ(model.tokens_per_call.back(), 1 + 32) << "the admitting step: request 1's token and the prompt";
  EXPECT_EQ(core.stats().drafted_tokens, drafted);
  while (core.has_work()) core.step();
  EXPECT_EQ(model.errors, 0);
  EXPECT_EQ(core.blocks().n_used_all(), 0);
}

// Four sequences decode with nothing waiting; request 1's drafter is always right. Under a
// curve where drafts at 4 tokens pay but a fourth row costs little (memory-bound), request 1
// (at ~1) drafts when the other three's drafters are right too; when they offer nothing, the
// batch's pace (the lowest yield rate, ~0) leaves its drafts worth one cheap row each and
// request 1 does not draft: it would only run ahead of a batch that ends with the other three.
int64_t drafts_among(int n, bool others_offer, const spec::StepCostCurve& curve) {
  FakeModel model(kVocab, rig_groups());
  KvCache kv(model.spec().kv_groups, 4, {256, 256}, KvType::F32);
  SchedulerConfig sc{4, 64, 512};
  sc.draft_max = 2;
  const DraftHook right = oracle_drafter(model, [](RequestId, size_t, int32_t) { return false; });
  sc.draft_hook = [&](RequestId id, std::span<const int32_t> t, int32_t k, std::vector<int32_t>& d) {
    if (id == 1 || others_offer) return right(id, t, k, d);
    d.clear();
  };
  sc.policy.adaptive = true;
  sc.policy.margin = 0;
  sc.policy.curve = curve;
  EngineCore core(model, kv, EngineConfig{sc, true});
  for (RequestId id = 1; id <= n; ++id) core.add(req(id, make_prompt(6, kVocab, static_cast<int>(id)), 40));
  for (int i = 0; i < 12; ++i) core.step();  // prefill; the estimates settle
  const int64_t before = core.stats().drafted_tokens;
  for (int i = 0; i < 12; ++i) core.step();
  const int64_t drafted = core.stats().drafted_tokens - before;
  while (core.has_work()) core.step();
  EXPECT_EQ(model.errors, 0);
  EXPECT_EQ(core.blocks().n_used_all(), 0);
  return drafted;
}

TEST(SpecStep, ASequenceDoesNotDraftAheadOfABatchThatCannotFollow) {
  const spec::StepCostCurve cheap_fourth_row{{{1, 1.0}, {4, 1.05}, {8, 1.6}}};
  EXPECT_EQ(drafts_among(4, false, cheap_fourth_row), 0);
  EXPECT_GT(drafts_among(4, true, cheap_fourth_row), 0);
  // Two sequences on the 270M's curve, where a second row is free: the case that lost 7% (the
  // mean yield, ~0.5, let request 1 draft ahead of the other).
  const spec::StepCostCurve gemma3_270m{{{1, 1.0}, {2, 1.0}, {4, 1.144}, {8, 1.349}, {16, 2.34}}};
  EXPECT_EQ(drafts_among(2, false, gemma3_270m), 0);
  EXPECT_GT(drafts_among(2, true, gemma3_270m), 0);
}

}  // namespace
}  // namespace sluice::engine
