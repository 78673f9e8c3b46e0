// The blocked vision attention (models/gemma4/vision_attention.h) against its scalar reference:
// every path this CPU runs (AVX-512 and AVX2 for head_dim a multiple of 16, the portable one),
// on patch counts that leave short query blocks and short key tiles; AVX-512 and AVX2 give the
// same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "models/gemma4/vision_attention.h"
#include "threading/thread_pool.h"

namespace sluice::models::gemma4 {
namespace {

void check(int64_t n, int64_t heads, int64_t hd, int threads) {
  std::mt19937 rng(static_cast<uint32_t>(n * 131 + hd));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t sz = static_cast<size_t>(n * heads * hd);
  std::vector<float> q(sz), k(sz), v(sz), ref(sz), got(sz, -1.0f), scratch;
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = dist(rng) * 1.5f;  // logits up to ~±40: softmax spans many magnitudes
  ThreadPool pool(threads);
  vision_attention_ref({q.data(), k.data(), v.data(), ref.data(), n, heads, hd}, pool);
  std::vector<float> avx2;
  for (VisionAttnPath path : {VisionAttnPath::kPortable, VisionAttnPath::kAvx2, VisionAttnPath::kAvx512}) {
    if (!vision_attention_runs(path, hd)) continue;
    std::fill(got.begin(), got.end(), -1.0f);
    vision_attention({q.data(), k.data(), v.data(), got.data(), n, heads, hd}, pool, scratch, path);
    double worst = 0.0;
    for (size_t i = 0; i < sz; ++i) worst = std::max(worst, static_cast<double>(std::fabs(got[i] - ref[i])));
    EXPECT_LT(worst, 2e-5) << "path " << static_cast<int>(path) << ", n " << n << ", " << heads << " heads of " << hd;
    if (path == VisionAttnPath::kAvx2) avx2 = got;
    if (path == VisionAttnPath::kAvx512 && !avx2.empty()) {
      EXPECT_EQ(std::memcmp(got.data(), avx2.data(), 4 * sz), 0) << "AVX-512 differs from AVX2, n " << n;
    }
  }
}

TEST(VisionAttention, BlockedMatchesReference) {
  check(150, 2, 64, 2);  // E2B's head_dim; 150 = 25 blocks of 6, keys 9 tiles + 6
  check(97, 3, 16, 3);   // tiny E tower's head_dim; a short last block of 1
  check(61, 2, 72, 2);   // 26B/31B's head_dim: the portable path
  check(9, 1, 20, 1);    // fewer patches than one key tile
  check(530, 1, 32, 2);  // keys in three chunks of kᵀ, panels of 8 blocks and shorter
  check(110, 2, 32, 2);  // 110 = 6·16 + 8 + 6: the AVX-512 softmax's 8-lane step and scalar tail
}

}  // namespace
}  // namespace sluice::models::gemma4
