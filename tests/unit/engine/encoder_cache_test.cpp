// The encoder cache (engine/encoder_cache.h): content keys, least-recently-used eviction by bytes.
#include "engine/encoder_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

namespace sluice::engine {
namespace {

EncodedRows rows(size_t n, float v) { return std::make_shared<const std::vector<float>>(n, v); }

TEST(EncoderCache, KeysFollowTheValuesAndTheShape) {
  std::vector<float> a(1000, 0.5f);
  const EncoderKey k = encoder_key(a, 7);
  EXPECT_EQ(k, encoder_key(a, 7));
  EXPECT_FALSE(k == encoder_key(a, 8));  // the same values on another grid
  a[999] = std::nextafter(0.5f, 1.0f);   // one value, one ulp
  EXPECT_FALSE(k == encoder_key(a, 7));
}

TEST(EncoderCache, EvictsTheLeastRecentlyUsedBeyondItsBytes) {
  EncoderCache c(3 * 100 * sizeof(float));  // three entries of 100 floats
  std::vector<float> in(16);
  std::vector<EncoderKey> k;
  for (int i = 0; i < 4; ++i) k.push_back(encoder_key(in, i));
  c.insert(k[0], rows(100, 0));
  c.insert(k[1], rows(100, 1));
  c.insert(k[2], rows(100, 2));
  ASSERT_NE(c.find(k[0]), nullptr);  // 0 is now the most recent: 1 goes first
  c.insert(k[3], rows(100, 3));
  EXPECT_EQ(c.find(k[1]), nullptr);
  ASSERT_NE(c.find(k[0]), nullptr);
  EXPECT_EQ(c.find(k[0])->front(), 0.0f);
  EXPECT_EQ(c.find(k[3])->front(), 3.0f);
  const EncoderCacheStats s = c.stats();
  EXPECT_EQ(s.entries, 3);
  EXPECT_EQ(s.bytes, 3 * 100 * static_cast<int64_t>(sizeof(float)));
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.hits, 4u);
  EXPECT_EQ(s.misses, 1u);
  c.insert(k[1], rows(301, 1));  // larger than the whole cache: not kept, nothing evicted
  EXPECT_EQ(c.find(k[1]), nullptr);
  EXPECT_EQ(c.stats().entries, 3);
  EncoderCache none(0);
  none.insert(k[0], rows(1, 0));
  EXPECT_EQ(none.find(k[0]), nullptr);
}

}  // namespace
}  // namespace sluice::engine
