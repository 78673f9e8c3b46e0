#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/kv_budget.h"

namespace sluice::engine {
namespace {

TEST(KvBudget, CtxTimesParallelGivesGlobalGroupsEveryPosition) {
  const std::vector<KvGroupSpec> groups = {{4, 1, 64, 512}, {1, 1, 128, 0}};  // sliding, global
  KvBudget b;
  b.ctx_size = 4096;
  b.parallel = 4;
  b.block_tokens = 16;
  b.chunk = 256;
  const auto n = kv_blocks_per_group(groups, b);
  EXPECT_EQ(n[1], 4 * 256);
  // Sliding: window + chunk per sequence ((511 + 256) / 16 rounded up, + 1), for 5 sequences.
  EXPECT_EQ(n[0], 5 * (48 + 1));
}

TEST(KvBudget, MemoryBudgetScalesEveryGroupAndRefusesTooLittle) {
  const std::vector<KvGroupSpec> groups = {{4, 1, 64, 512}, {1, 1, 128, 0}};
  KvBudget b;
  b.ctx_size = 1024;
  b.parallel = 2;
  const auto full = kv_blocks_per_group(groups, b);
  uint64_t bytes = 0;
  for (size_t g = 0; g < groups.size(); ++g) bytes += full[g] * kv_block_bytes(groups[g], b.block_tokens, b.type);
  b.memory_bytes = bytes * 2;
  const auto twice = kv_blocks_per_group(groups, b);
  EXPECT_NEAR(twice[1], 2 * full[1], 1);
  EXPECT_NEAR(twice[0], 2 * full[0], 1);
  b.memory_bytes = 1000;
  EXPECT_THROW(kv_blocks_per_group(groups, b), Error);
}

TEST(KvBudget, ADraftSharesTheBudgetByBytesPerToken) {
  const std::vector<KvGroupSpec> target = {{4, 1, 64, 512}, {1, 1, 128, 0}};  // 4·2·64 + 2·128 = 768 f32/token
  const std::vector<KvGroupSpec> draft = {{1, 1, 64, 0}};                     // 2·64 = 128 f32/token
  EXPECT_EQ(kv_bytes_per_token(target, KvType::F32), 768u * 4);
  EXPECT_EQ(kv_bytes_per_token(draft, KvType::F16), 128u * 2);
  EXPECT_EQ(draft_kv_share(7000, target, draft, KvType::F32), 1000u);  // 7000 · 128 / 896
  EXPECT_EQ(draft_kv_share(7000, target, target, KvType::F32), 3500u);
}

}  // namespace
}  // namespace sluice::engine
