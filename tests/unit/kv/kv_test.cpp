#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/sequence_kv.h"

namespace sluice {
namespace {

TEST(BlockPool, AllocatesCountsAndRecycles) {
  BlockPool p(3);
  const BlockId a = p.allocate(), b = p.allocate(), c = p.allocate();
  EXPECT_EQ(p.allocate(), kNoBlock);
  EXPECT_EQ(p.n_free(), 0);
  p.add_ref(b);
  p.release(b);
  EXPECT_EQ(p.n_free(), 0);
  p.release(b);
  EXPECT_EQ(p.n_free(), 1);
  EXPECT_EQ(p.allocate(), b);
  p.release(a);
  p.release(b);
  p.release(c);
  EXPECT_EQ(p.n_used(), 0);
  EXPECT_THROW(p.release(a), Error);
  for (int i = 0; i < 1000; ++i) p.release(p.allocate());  // the FIFO compacts
  EXPECT_EQ(p.n_free(), 3);
}

TEST(SequenceKv, ReleasesSlidingBlocksOnlyOutsideTheWindow) {
  KvCache kv({{1, 1, 4, 8}, {1, 1, 4, 0}}, 4, {10, 10}, KvType::F32);  // sliding (window 8), global
  SequenceKv s(kv);
  ASSERT_TRUE(s.reserve(20));  // 5 blocks in each group
  EXPECT_EQ(kv.pool(0).n_used(), 5);
  s.release_outside_window(15);  // visible keys: 8..15 -> blocks 0 and 1 go
  EXPECT_EQ(kv.pool(0).n_used(), 3);
  EXPECT_EQ(s.table(0)[1], kNoBlock);
  EXPECT_NE(s.table(0)[2], kNoBlock);
  EXPECT_EQ(kv.pool(1).n_used(), 5);  // global keeps everything
  EXPECT_FALSE(s.reserve(60));        // 15 blocks > 10: refused, nothing allocated
  EXPECT_EQ(kv.pool(1).n_used(), 5);
  s.clear();
  EXPECT_EQ(kv.pool(0).n_used() + kv.pool(1).n_used(), 0);
}

TEST(KvCache, StoresAndLoadsInEachPrecision) {
  const float k[4] = {1.0f, -2.5f, 3.140625f, 1e-3f}, v[4] = {0.5f, 0.25f, -8.0f, 100.0f};
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16}) {
    KvCache kv({{2, 1, 4, 0}}, 4, {3}, t);
    kv.store(0, 1, 2, 3, k, v);
    float ko[4], vo[4];
    kv.load_k(0, 1, 2, 3, ko);
    kv.load_v(0, 1, 2, 3, vo);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(ko[i], k[i], std::fabs(k[i]) * 1e-2) << kv_type_name(t);
      EXPECT_NEAR(vo[i], v[i], std::fabs(v[i]) * 1e-2) << kv_type_name(t);
    }
    kv.load_k(0, 0, 2, 3, ko);  // another layer's slot is untouched
    EXPECT_EQ(ko[0], 0.0f);
  }
  EXPECT_THROW(parse_kv_type("q8"), Error);
}

}  // namespace
}  // namespace sluice
