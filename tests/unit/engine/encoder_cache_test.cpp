// The encoder cache (engine/encoder_cache.h): content keys, least-recently-used eviction by bytes,
// one encode for requests that bring the same new input at once.
#include "engine/encoder_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
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

// Two requests with the same new image: the second waits for the first's rows instead of
// encoding again; when the first fails (its claim abandoned), the waiter becomes the holder.
TEST(EncoderCache, TheSameInputAtOnceIsEncodedOnce) {
  using namespace std::chrono_literals;
  EncoderCache c(1 << 20);
  std::vector<float> in(16, 1.0f);
  const EncoderKey k = encoder_key(in, 1);
  ASSERT_EQ(c.acquire(k), nullptr);  // the first request holds the encode
  auto second = std::async(std::launch::async, [&] { return c.acquire(k); });
  EXPECT_EQ(second.wait_for(50ms), std::future_status::timeout) << "the second did not wait";
  const EncodedRows r = rows(10, 7);
  c.insert(k, r);
  EXPECT_EQ(second.get(), r);  // the first's rows, not a second encode
  EXPECT_EQ(c.stats().misses, 1u);
  EXPECT_EQ(c.stats().hits, 1u);

  const EncoderKey k2 = encoder_key(in, 2);
  auto first = std::make_unique<EncodeClaim>(c, k2);
  ASSERT_EQ(c.acquire(k2), nullptr);
  auto waiter = std::async(std::launch::async, [&] { return c.acquire(k2); });
  EXPECT_EQ(waiter.wait_for(50ms), std::future_status::timeout);
  first.reset();                     // the first's encode threw: nothing inserted
  EXPECT_EQ(waiter.get(), nullptr);  // the waiter holds it now...
  EncodeClaim mine(c, k2);
  auto third = std::async(std::launch::async, [&] { return c.acquire(k2); });
  EXPECT_EQ(third.wait_for(50ms), std::future_status::timeout);  // ...and a third waits on it
  mine.insert(rows(10, 2));
  EXPECT_EQ(third.get()->front(), 2.0f);

  EncoderCache none(0);  // keeps nothing: nobody waits for rows it will not keep
  EXPECT_EQ(none.acquire(k), nullptr);
  EXPECT_EQ(none.acquire(k), nullptr);
}

}  // namespace
}  // namespace sluice::engine
