// BlockPool eviction order and BlockManager prefix caching, window release and accounting.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "base/error.h"
#include "kv/block_manager.h"
#include "kv/block_pool.h"

namespace sluice {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t start = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

// Takes what the cache holds of the prompt (the hit is not used), then reserves and publishes all
// of it from position 0 in chunks with window release, as the scheduler prefills; `after_chunk`
// runs after each chunk.
void prefill_in_chunks(BlockManager& bm, SeqBlocks& s, const std::vector<int32_t>& prompt, int32_t chunk,
                       const std::function<void()>& after_chunk = {}) {
  bm.match_prefix(s, prompt);
  const int32_t n = static_cast<int32_t>(prompt.size());
  for (int32_t p = 0; p < n; p += chunk) {
    bm.release_outside_window(s, p);
    ASSERT_TRUE(bm.reserve(s, p, std::min(n, p + chunk)));
    bm.publish_full_blocks(s, prompt, std::min(n, p + chunk));
    if (after_chunk) after_chunk();
  }
}

TEST(BlockPool, ReleasedBlocksAreReusedLastAndCanBeTakenBack) {
  BlockPool p(4);
  const BlockId a = p.allocate(), b = p.allocate(), c = p.allocate(), d = p.allocate();
  p.release(c);
  p.release(a);
  p.release(d);
  EXPECT_EQ(p.n_free(), 3);
  EXPECT_EQ(p.next_free(), c);  // least recently released first
  p.reuse(a);                   // out of the middle of the free list
  EXPECT_EQ(p.ref_count(a), 1);
  EXPECT_EQ(p.allocate(), c);
  EXPECT_EQ(p.allocate(), d);
  EXPECT_EQ(p.allocate(), kNoBlock);
  EXPECT_THROW(p.reuse(b), Error);  // in use
  for (BlockId x : {a, b, c, d}) p.release(x);
  EXPECT_EQ(p.n_used(), 0);
}

// Group 0: global; group 1: sliding window 8. Blocks of 4 positions.
KvCache make_cache(int32_t blocks) { return KvCache({{1, 1, 2, 0}, {1, 1, 2, 8}}, 4, {blocks, blocks}, KvType::F32); }

TEST(BlockManager, ReusesTheLongestCachedPrefixOfWholeBlocks) {
  KvCache kv = make_cache(16);
  BlockManager bm(kv);
  const auto prompt = iota_tokens(14);
  SeqBlocks a;
  EXPECT_EQ(bm.match_prefix(a, prompt), 0);
  ASSERT_TRUE(bm.reserve(a, 0, 14));
  bm.publish_full_blocks(a, prompt, 14);  // blocks 0..2 are full, block 3 is not
  EXPECT_EQ(bm.n_cached(0), 3);
  // Same 12-token prefix, different tail: 3 blocks reused, shared with a (count 2).
  auto other = iota_tokens(20);
  other[13] = 99;
  SeqBlocks b;
  EXPECT_EQ(bm.match_prefix(b, other), 12);
  EXPECT_EQ(b.tables[0][0], a.tables[0][0]);
  EXPECT_EQ(kv.pool(0).ref_count(a.tables[0][2]), 2);
  // The sliding group shares only what a query at 12 sees: positions 5..11 = blocks 1, 2.
  EXPECT_EQ(b.tables[1][0], kNoBlock);
  EXPECT_EQ(b.tables[1][1], a.tables[1][1]);
  // A prompt equal to the cached prefix leaves its last token to compute.
  SeqBlocks c;
  EXPECT_EQ(bm.match_prefix(c, iota_tokens(12)), 8);
  // A different first block shares nothing, even with the same later tokens.
  auto shifted = iota_tokens(14);
  shifted[0] = 77;
  SeqBlocks d;
  EXPECT_EQ(bm.match_prefix(d, shifted), 0);
  for (SeqBlocks* s : {&a, &b, &c, &d}) bm.free(*s);
  EXPECT_EQ(bm.n_used_all(), 0);
  EXPECT_EQ(bm.n_cached(0), 3);  // still findable while free
  EXPECT_EQ(bm.prefix_stats().hit_tokens, 20);
}

TEST(BlockManager, EvictedBlocksAreForgotten) {
  KvCache kv = make_cache(4);
  BlockManager bm(kv);
  const auto prompt = iota_tokens(9);
  SeqBlocks a;
  bm.match_prefix(a, prompt);
  ASSERT_TRUE(bm.reserve(a, 0, 9));  // 3 blocks in each group
  bm.publish_full_blocks(a, prompt, 9);
  bm.free(a);
  // Another sequence takes the whole pool: the cached blocks are evicted (LRU order).
  SeqBlocks big;
  ASSERT_TRUE(bm.reserve(big, 0, 16));
  EXPECT_EQ(bm.n_cached(0), 0);
  bm.free(big);
  SeqBlocks again;
  EXPECT_EQ(bm.match_prefix(again, prompt), 0);
  bm.free(again);
  EXPECT_EQ(bm.n_used_all(), 0);
}

TEST(BlockManager, SlidingBlocksOutsideTheWindowReturnAndAHitNeedsOnlyTheWindow) {
  KvCache kv = make_cache(32);
  BlockManager bm(kv);
  const auto prompt = iota_tokens(40);
  SeqBlocks a;
  ASSERT_NO_FATAL_FAILURE(
      prefill_in_chunks(bm, a, prompt, 8, [&] { EXPECT_LE(kv.pool(1).n_used(), bm.peak_blocks(1, 40, 8)); }));
  EXPECT_EQ(kv.pool(0).n_used(), 10);
  EXPECT_LE(kv.pool(1).n_used(), 5);  // keys 25..39 of the last chunk's queries: blocks 6..9 (+1)
  // The released sliding blocks (0..5) are free but cached, so a repeat of the prompt hits:
  // a query at 36 needs window blocks 7, 8 — still held by a.
  SeqBlocks b;
  EXPECT_EQ(bm.match_prefix(b, prompt), 36);
  bm.free(a);
  bm.free(b);
  EXPECT_EQ(bm.n_used_all(), 0);
}

TEST(BlockManager, NoHitWhenTheWindowBlocksAreGone) {
  KvCache kv({{1, 1, 2, 0}, {1, 1, 2, 8}}, 4, {16, 4}, KvType::F32);  // few sliding blocks
  BlockManager bm(kv);
  const auto prompt = iota_tokens(17);
  SeqBlocks a;
  ASSERT_NO_FATAL_FAILURE(prefill_in_chunks(bm, a, prompt, 4));
  bm.free(a);
  // Reusing all sliding blocks evicts the cached window of the prefix.
  SeqBlocks filler;
  ASSERT_TRUE(bm.reserve(filler, 0, 4));
  SeqBlocks f2;
  ASSERT_TRUE(bm.reserve(f2, 0, 12));
  bm.free(filler);
  bm.free(f2);
  // The global group still has the whole prefix, but the window blocks before 16 are gone:
  // the longest prefix whose window survives is shorter (or none).
  SeqBlocks b;
  const int32_t hit = bm.match_prefix(b, prompt);
  EXPECT_EQ(hit, 0);  // every window block of every candidate prefix was evicted
  bm.free(b);
  EXPECT_EQ(bm.n_used_all(), 0);
}

TEST(BlockManager, ReserveIsAllOrNothing) {
  KvCache kv = make_cache(3);
  BlockManager bm(kv);
  SeqBlocks a;
  EXPECT_FALSE(bm.reserve(a, 0, 16));  // 4 global blocks > 3
  EXPECT_EQ(bm.n_used_all(), 0);
  EXPECT_TRUE(bm.reserve(a, 0, 12));
  EXPECT_FALSE(bm.fits_alone(13, 4));
  EXPECT_TRUE(bm.fits_alone(12, 4));
  bm.free(a);
  EXPECT_EQ(bm.n_used_all(), 0);
}

// A window margin (Gemma 4's assistant reads window + 1 positions ending before its query)
// keeps that many positions more below each query's window, and counts them in the peak.
TEST(BlockManager, WindowMarginKeepsPositionsBelowTheWindow) {
  for (int32_t margin : {0, 2}) {
    KvCache kv = make_cache(16);
    BlockManager bm(kv);
    bm.set_window_margin(margin);
    SeqBlocks s;
    ASSERT_TRUE(bm.reserve(s, 0, 17));
    // A query at 16 sees 9..16 (window 8); with margin 2 also 7 and 8: block 1 (4..7) stays.
    bm.release_outside_window(s, 16);
    EXPECT_EQ(s.tables[1][0], kNoBlock);
    EXPECT_EQ(s.tables[1][1] != kNoBlock, margin == 2) << "margin " << margin;
    EXPECT_NE(s.tables[1][2], kNoBlock);
    // Decode (chunk 1): 7 + margin + 1 keys over at most one block more than they fill.
    EXPECT_EQ(bm.peak_blocks(1, 64, 1), margin == 2 ? 4 : 3);
    bm.free(s);
  }
}

}  // namespace
}  // namespace sluice
