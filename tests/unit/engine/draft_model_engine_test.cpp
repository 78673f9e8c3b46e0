// The draft-model proposer (DraftModelProposer, EngineCore's BatchProposer) with fake
// models: the draft is the target's oracle, made wrong at every position divisible by 5
// (argmax + 1), over its own paged KV. Its proposals must be exactly the ideal drafter's — the
// same function computed from the token list by SchedulerConfig::draft_hook — so drafted and
// accepted counts match that run to the token (a stale K/V row after a rollback, a wrong block
// or a missed catch-up token changes a draft). The output must be the plain output, and both
// pools must end empty, with and without preemption.
#include <gtest/gtest.h>

#include <map>

#include "base/error.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine_core.h"
#include "engine_rig.h"

namespace sluice::engine {
namespace {

constexpr int32_t kWrongEvery = 5;  // the draft's token for position p is wrong when p % 5 == 0

// The FakeModel, its argmax shifted by one for the token at each position divisible by 5.
class ShiftedModel : public models::Model {
 public:
  explicit ShiftedModel(FakeModel& m) : m_(m) {}
  const models::ModelSpec& spec() const override { return m_.spec(); }
  void forward(const models::ForwardBatch& batch, KvCache& kv, float* logits) override {
    m_.forward(batch, kv, logits);
    const int32_t V = spec().n_vocab;
    std::vector<float> tmp(static_cast<size_t>(V));
    for (const models::SeqSlice& s : batch.seqs) {
      if (s.logits == models::LogitsWanted::kNone) continue;
      ASSERT_EQ(s.logits, models::LogitsWanted::kLast);
      const int32_t p = s.pos0 + static_cast<int32_t>(s.tokens.size());  // the predicted position
      if (p % kWrongEvery == 0) {
        for (int32_t v = 0; v < V; ++v) tmp[static_cast<size_t>((v + 1) % V)] = logits[v];
        std::copy(tmp.begin(), tmp.end(), logits);
      }
      logits += V;
    }
  }

 private:
  FakeModel& m_;
};

// The same drafts from the token list, for the scheduler's own hook.
DraftHook ideal_drafter(const FakeModel& m) {
  return [&m](RequestId, std::span<const int32_t> tokens, int32_t k_max, std::vector<int32_t>& drafts) {
    std::vector<int32_t> t(tokens.begin(), tokens.end());
    drafts.clear();
    for (int32_t i = 0; i < k_max; ++i) {
      int32_t d = m.reference_next(t);
      if (static_cast<int32_t>(t.size()) % kWrongEvery == 0) d = (d + 1) % kVocab;
      drafts.push_back(d);
      t.push_back(d);
    }
  };
}

struct Outcome {
  std::map<RequestId, std::vector<int32_t>> tokens;
  EngineStats stats;
  DraftModelStats draft;
};

enum class Mode { kPlain, kIdeal, kDraftModel };

Outcome run(const std::vector<EngineRequest>& reqs, Mode mode, int32_t k, int32_t target_blocks, int32_t budget = 32,
            float p_min = 0) {
  FakeModel model(kVocab, rig_groups());
  FakeModel draft_base(kVocab, rig_groups());
  ShiftedModel draft(draft_base);
  KvCache kv(model.spec().kv_groups, 4, {target_blocks, target_blocks}, KvType::F32);
  KvCache draft_kv(draft.spec().kv_groups, 4, {256, 256}, KvType::F32);
  DraftModelProposer drafter(draft, draft_kv, kVocab, DraftModelConfig{budget, p_min});
  EngineConfig cfg;
  cfg.sched = SchedulerConfig{8, budget, 512};
  cfg.sched.draft_max = mode == Mode::kPlain ? 0 : k;
  if (mode == Mode::kIdeal) cfg.sched.draft_hook = ideal_drafter(draft_base);
  if (mode == Mode::kDraftModel) {
    cfg.spec = SpecMethod::kModel;
    cfg.model_proposer = &drafter;
  }
  Outcome r;
  {
    EngineCore core(model, kv, cfg);
    run_to_end(core, reqs, r.tokens);
    EXPECT_EQ(drafter.blocks().n_used_all(), 0) << "draft blocks leaked";
    r.stats = core.stats();
  }
  r.draft = drafter.stats();
  EXPECT_EQ(model.errors, 0) << "a target query read a wrong or missing key";
  EXPECT_EQ(draft_base.errors, 0) << "a draft query read a wrong or missing key";
  return r;
}

// Eight sequences: greedy and seeded sampling with penalties, shared prefixes (prefix-cache
// hits), prompts from 5 to 59 tokens (longer than the sliding window 8), different lengths.
std::vector<EngineRequest> mixed_requests() {
  std::vector<EngineRequest> reqs;
  const auto shared = make_prompt(12, kVocab, 40);
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = i % 2 ? shared : std::vector<int32_t>{};
    for (int32_t t : make_prompt(5 + 6 * i, kVocab, 50 + static_cast<uint64_t>(i))) p.push_back(t);
    EngineRequest r = greedy_request(static_cast<RequestId>(i + 1), p, 30 + 3 * i);
    if (i % 3 == 2) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 5 + static_cast<uint64_t>(i);
      r.sampling.repeat_penalty = 1.2f;
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

TEST(DraftModelEngine, ProposalsAreTheIdealDraftersAndTheOutputIsPlain) {
  const auto reqs = mixed_requests();
  const Outcome plain = run(reqs, Mode::kPlain, 0, 256);
  for (int32_t k : {1, 3, 8}) {
    const Outcome ideal = run(reqs, Mode::kIdeal, k, 256);
    const Outcome dm = run(reqs, Mode::kDraftModel, k, 256);
    EXPECT_EQ(dm.tokens, plain.tokens) << "k=" << k;
    EXPECT_EQ(dm.stats.drafted_tokens, ideal.stats.drafted_tokens) << "k=" << k;
    EXPECT_EQ(dm.stats.accepted_tokens, ideal.stats.accepted_tokens) << "k=" << k;
    EXPECT_GT(dm.stats.accepted_tokens, 0) << "k=" << k;
    EXPECT_EQ(dm.draft.no_room, 0);
    if (k > 1) EXPECT_LT(dm.stats.accepted_tokens, dm.stats.drafted_tokens) << "k=" << k;  // rollbacks happened
  }
}

TEST(DraftModelEngine, AlonePromptLongerThanTheWindow) {
  const std::vector<EngineRequest> one = {greedy_request(1, make_prompt(41, kVocab, 9), 50)};
  const Outcome plain = run(one, Mode::kPlain, 0, 256);
  for (int32_t k : {1, 3, 8}) {
    const Outcome ideal = run(one, Mode::kIdeal, k, 256);
    const Outcome dm = run(one, Mode::kDraftModel, k, 256, /*budget=*/16);  // a prompt in three chunks
    EXPECT_EQ(dm.tokens, plain.tokens) << "k=" << k;
    EXPECT_EQ(dm.stats.accepted_tokens, ideal.stats.accepted_tokens) << "k=" << k;
  }
}

TEST(DraftModelEngine, PreemptionFreesAndRebuildsTheDraftsKv) {
  const auto reqs = mixed_requests();
  const Outcome plain = run(reqs, Mode::kPlain, 0, 256);
  const Outcome dm = run(reqs, Mode::kDraftModel, 4, 40);  // 40 blocks of 4 cannot hold eight sequences
  EXPECT_GT(dm.stats.preemptions, 0);
  EXPECT_GT(dm.stats.accepted_tokens, 0);
  EXPECT_EQ(dm.tokens, plain.tokens);
}

TEST(DraftModelEngine, PMinStopsDraftingBelowTheDraftsConfidence) {
  // The fake logits fall off by 0.5 per id from the peak: p(top) = 1 / Σ e^{-0.5 d} ≈ 0.24 over
  // 97 ids. A threshold above it drafts nothing; one below it changes nothing.
  const auto reqs = mixed_requests();
  const Outcome plain = run(reqs, Mode::kPlain, 0, 256);
  const Outcome high = run(reqs, Mode::kDraftModel, 4, 256, 32, 0.5f);
  EXPECT_EQ(high.stats.drafted_tokens, 0);
  EXPECT_EQ(high.tokens, plain.tokens);
  const Outcome low = run(reqs, Mode::kDraftModel, 4, 256, 32, 0.2f);
  const Outcome none = run(reqs, Mode::kDraftModel, 4, 256, 32, 0.0f);
  EXPECT_EQ(low.stats.drafted_tokens, none.stats.drafted_tokens);
  EXPECT_EQ(low.tokens, plain.tokens);
}

TEST(DraftModelEngine, AVocabularyOfAnotherSizeIsRefused) {
  FakeModel target(kVocab, rig_groups()), small(kVocab - 1, rig_groups());
  KvCache kv(small.spec().kv_groups, 4, {8, 8}, KvType::F32);
  EXPECT_THROW(DraftModelProposer(small, kv, kVocab, {}), Error);
}

}  // namespace
}  // namespace sluice::engine
