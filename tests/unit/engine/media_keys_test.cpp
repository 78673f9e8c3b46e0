// engine::media_keyed_prompt: soft positions get negative keys that depend on the image's rows
// and the offset in it; text positions keep their ids.
#include "engine/media_keys.h"

#include <gtest/gtest.h>

namespace sluice::engine {
namespace {

// prompt [5, P, P, 6, P, 7] with two images of 2 and 1 rows, each row `width` floats of `v`+i.
SoftTokens two_images(float v) {
  SoftTokens s;
  s.width = 4;
  s.rows.resize(3 * 4);
  for (size_t i = 0; i < s.rows.size(); ++i) s.rows[i] = v + static_cast<float>(i);
  const float* r = s.rows.data();
  s.at = {nullptr, r, r + 4, nullptr, r + 8, nullptr};
  return s;
}

TEST(MediaKeys, SoftPositionsGetNegativeContentKeys) {
  const std::vector<int32_t> prompt = {5, 9, 9, 6, 9, 7};
  const SoftTokens a = two_images(0.5f);
  const std::vector<int32_t> k = media_keyed_prompt(prompt, a);
  EXPECT_EQ(k[0], 5);
  EXPECT_EQ(k[3], 6);
  EXPECT_EQ(k[5], 7);
  for (int p : {1, 2, 4}) EXPECT_LT(k[p], 0) << p;
  EXPECT_NE(k[1], k[2]);                        // offset in the image
  EXPECT_EQ(media_keyed_prompt(prompt, a), k);  // the same rows, the same keys
  SoftTokens b = two_images(0.5f);
  b.rows[9] += 1e-6f;  // the second image differs in one value
  const std::vector<int32_t> kb = media_keyed_prompt(prompt, b);
  EXPECT_EQ(kb[1], k[1]);
  EXPECT_EQ(kb[2], k[2]);
  EXPECT_NE(kb[4], k[4]);
}

}  // namespace
}  // namespace sluice::engine
