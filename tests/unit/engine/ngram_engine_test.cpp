// The engine with its own n-gram drafter per sequence (EngineConfig::spec = kNgram): eight
// concurrent sequences, greedy and seeded-sampled with penalties, mixed prefill, a sliding
// group, and a pool small enough to preempt. The tokens must be bitwise those of the same
// engine without speculation, and every block must be back in the pool at the end.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine_core.h"
#include "fake_model.h"

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

Outcome run_ngram(const std::vector<EngineRequest>& reqs, int32_t k, int32_t blocks_per_group) {
  FakeModel model(kVocab, {{1, 1, 2, 0}, {1, 1, 2, 8}});
  KvCache kv(model.spec().kv_groups, 4, {blocks_per_group, blocks_per_group}, KvType::F32);
  EngineConfig cfg;
  cfg.sched = SchedulerConfig{8, 24, 512};
  cfg.sched.draft_max = k;
  cfg.spec = k > 0 ? SpecMethod::kNgram : SpecMethod::kNone;
  Outcome r;
  {
    EngineCore core(model, kv, cfg);
    for (const EngineRequest& q : reqs) core.add(q);
    for (int i = 0; i < 20000 && core.has_work(); ++i)
      for (const TokenOutput& o : core.step())
        if (o.token >= 0) r.tokens[o.id].push_back(o.token);
    EXPECT_FALSE(core.has_work());
    EXPECT_EQ(core.blocks().n_used_all(), 0) << "blocks leaked";
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

}  // namespace
}  // namespace sluice::engine
