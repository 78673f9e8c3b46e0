// The engine's modes for the single-user commands: scoring requests (every position's logits)
// and parked K/V that a later request resumes to the token (sluice chat's turns), plus
// BlockManager::truncate under them. Every test ends with the block pools empty.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine_core.h"
#include "engine_rig.h"
#include "kv/block_manager.h"

namespace sluice::engine {
namespace {

// Global group + sliding group (window 8), blocks of 4 positions.
struct Rig {
  explicit Rig(int32_t budget, int32_t blocks = 64)
      : model(kVocab, rig_groups()),
        kv(model.spec().kv_groups, 4, {blocks, blocks}, KvType::F32),
        core(model, kv, EngineConfig{{2, budget, 512}, true}) {}
  ~Rig() {
    EXPECT_EQ(core.blocks().n_used_all(), 0) << "blocks leaked";
    EXPECT_EQ(model.errors, 0) << "a query read a wrong or missing key";
  }

  EngineRequest req(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens) {
    return greedy_request(id, std::move(prompt), max_tokens);
  }
  std::vector<TokenOutput> run_all() {
    std::vector<TokenOutput> all;
    for (int i = 0; i < 1000 && core.has_work(); ++i)
      for (TokenOutput& o : core.step()) all.push_back(std::move(o));
    for (TokenOutput& o : core.take_outputs()) all.push_back(std::move(o));
    return all;
  }

  FakeModel model;
  KvCache kv;
  EngineCore core;
};

std::vector<int32_t> tokens_of(const std::vector<TokenOutput>& outs, RequestId id) {
  std::vector<int32_t> t;
  for (const TokenOutput& o : outs)
    if (o.id == id && o.token >= 0 && !o.is_stop_token) t.push_back(o.token);
  return t;
}

const TokenOutput& last_of(const std::vector<TokenOutput>& outs, RequestId id) {
  for (auto it = outs.rbegin(); it != outs.rend(); ++it)
    if (it->id == id && it->finish) return *it;
  throw std::runtime_error("no final output");
}

TEST(ScoringMode, EveryPositionsLogitsComeOnceInOrderAcrossChunks) {
  Rig r(/*budget=*/4);
  const auto prompt = make_prompt(11, kVocab, 5);
  for (RequestId id : {1, 2}) {  // the second run finds the first's blocks cached, and must not use them
    EngineRequest q = r.req(id, prompt, 1);
    q.all_logits = true;
    r.core.add(std::move(q));
    const auto outs = r.run_all();
    int32_t next = 0;
    for (const TokenOutput& o : outs) {
      if (o.logits.empty()) continue;
      ASSERT_EQ(o.logits_pos0, next);
      const int32_t rows = static_cast<int32_t>(o.logits.size() / kVocab);
      for (int32_t i = 0; i < rows; ++i) {
        const std::vector<int32_t> seen(prompt.begin(), prompt.begin() + next + i + 1);
        const std::vector<float> want = r.model.reference_logits(seen);
        ASSERT_EQ(std::vector<float>(o.logits.begin() + i * kVocab, o.logits.begin() + (i + 1) * kVocab), want)
            << "position " << next + i;
      }
      next += rows;
    }
    EXPECT_EQ(next, 11);
    EXPECT_EQ(last_of(outs, id).n_cached, 0);
    EXPECT_EQ(tokens_of(outs, id), r.model.reference_greedy(prompt, 1));
  }
}

TEST(ParkedKv, ANextTurnResumesAtTheLongestCommonPrefixToTheToken) {
  Rig r(/*budget=*/64);
  const auto p1 = make_prompt(10, kVocab, 7);
  EngineRequest a = r.req(1, p1, 5);
  a.keep_kv = true;
  r.core.add(std::move(a));
  const auto gen = tokens_of(r.run_all(), 1);
  ASSERT_EQ(gen.size(), 5u);
  EXPECT_GT(r.core.blocks().n_used_all(), 0);  // parked, not freed
  // Turn 2: the first turn's prompt, 4 of its tokens (the 5th never had K/V), then new ones.
  std::vector<int32_t> p2 = p1;
  p2.insert(p2.end(), gen.begin(), gen.begin() + 4);
  for (int32_t t : make_prompt(5, kVocab, 8)) p2.push_back(t);
  EngineRequest b = r.req(2, p2, 6);
  b.resume_from = 1;
  const int64_t before = r.model.tokens_computed();
  r.core.add(std::move(b));
  const auto outs = r.run_all();
  EXPECT_EQ(last_of(outs, 2).n_cached, 14);              // 10 + 4, not rounded down to whole blocks
  EXPECT_EQ(r.model.tokens_computed() - before, 5 + 5);  // the new prompt tokens, then 5 decodes
  EXPECT_EQ(tokens_of(outs, 2), r.model.reference_greedy(p2, 6));
}

TEST(ParkedKv, ADivergentOrReleasedTurnStartsOverAndLeaksNothing) {
  Rig r(/*budget=*/64);
  const auto p1 = make_prompt(30, kVocab, 9);  // longer than the sliding window
  EngineRequest a = r.req(1, p1, 3);
  a.keep_kv = true;
  r.core.add(std::move(a));
  r.run_all();
  auto p2 = make_prompt(12, kVocab, 10);  // shares nothing with p1
  EngineRequest b = r.req(2, p2, 3);
  b.resume_from = 1;
  b.keep_kv = true;
  r.core.add(std::move(b));
  auto outs = r.run_all();
  EXPECT_EQ(last_of(outs, 2).n_cached, 0);
  EXPECT_EQ(tokens_of(outs, 2), r.model.reference_greedy(p2, 3));
  r.core.release_kv(2);
  r.core.release_kv(2);  // twice, and unknown ids: no effect
  r.core.release_kv(99);
}

TEST(BlockManagerTruncate, TheBlockCutIntoLeavesThePrefixCacheUnlessShared) {
  KvCache kv({{1, 1, 2, 0}}, 4, {16}, KvType::F32);
  BlockManager bm(kv);
  std::vector<int32_t> t(12);
  for (int i = 0; i < 12; ++i) t[i] = 100 + i;
  SeqBlocks a;
  bm.match_prefix(a, t);
  ASSERT_TRUE(bm.reserve(a, 0, 12));
  bm.publish_full_blocks(a, t, 12);
  ASSERT_EQ(bm.n_cached(0), 3);
  EXPECT_EQ(bm.truncate(a, 6), 6);  // block 1 keeps 2 positions and will be rewritten
  EXPECT_EQ(a.tables[0].size(), 2u);
  EXPECT_EQ(bm.n_cached(0), 2);  // block 1 unpublished; block 2 released (still cached)
  SeqBlocks b;
  EXPECT_EQ(bm.match_prefix(b, t), 4);  // only block 0 is still that prefix
  // b shares block 0: cutting a inside it must fall back to the block boundary.
  EXPECT_EQ(bm.truncate(a, 3), 0);
  EXPECT_TRUE(a.empty());
  bm.free(a);
  bm.free(b);
  EXPECT_EQ(bm.n_used_all(), 0);
}

}  // namespace
}  // namespace sluice::engine
