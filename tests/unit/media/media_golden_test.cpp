// Decoding and preprocessing equal PIL's and transformers' (tests/data/golden/vision).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "media/decode.h"
#include "media/preprocess.h"
#include "media_util.h"

namespace sluice::media {
namespace {

using testing::kVisionDir;

nlohmann::json load_json(const std::string& name) {
  const std::vector<uint8_t> b = testing::read_file(kVisionDir + name);
  return nlohmann::json::parse(b.begin(), b.end());
}

// Every decode case (PNG in all colour types, JPEG subsamplings, WebP lossy/lossless with and
// without alpha, GIF with transparency and interlace) gives the bytes transformers' processor
// makes of the PIL image.
TEST(MediaGolden, DecodesLikePilAndTransformers) {
  const nlohmann::json m = load_json("manifest.json");
  ASSERT_GE(m["decode_cases"].size(), 20u);
  for (const auto& c : m["decode_cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name + " (PIL mode " + c["pil_mode"].get<std::string>() + ")");
    const RgbImage img = decode_image(testing::read_file(kVisionDir + "decode/" + c["file"].get<std::string>()), name);
    const std::vector<uint8_t> want = testing::read_file(kVisionDir + "decode/" + name + ".rgb");
    ASSERT_EQ(img.width, c["width"].get<int>());
    ASSERT_EQ(img.height, c["height"].get<int>());
    ASSERT_EQ(img.pixels.size(), want.size());
    int max_diff = 0;
    size_t first_bad = want.size();
    for (size_t i = 0; i < want.size(); ++i) {
      const int d = std::abs(int{img.pixels[i]} - int{want[i]});
      if (d > 0 && first_bad == want.size()) first_bad = i;
      max_diff = std::max(max_diff, d);
    }
    EXPECT_EQ(max_diff, 0) << "first difference at byte " << first_bad;
  }
}

struct Digest {
  int64_t n = 0, sum = 0, weighted = 0;
  std::vector<int64_t> head;
};

// The 8-bit codes behind the patch values (v = code/255 in float32), digested as the golden
// generator digests transformers' pixel_values.
Digest digest_codes(const PreprocessedImage& p, float* max_err) {
  Digest d;
  const float inv255 = static_cast<float>(1.0 / 255.0);
  *max_err = 0.0f;
  for (size_t i = 0; i < p.patches.size(); ++i) {
    const float v = p.patches[i];
    const int64_t c = std::lrint(static_cast<double>(v) * 255.0);
    *max_err = std::max(*max_err, std::fabs(v - static_cast<float>(c) * inv255));
    const int64_t w = (static_cast<int64_t>(i) * 2654435761LL) % 1000003 + 1;
    d.sum += c, d.weighted += c * w;
    if (d.head.size() < 48) d.head.push_back(c);
  }
  d.n = static_cast<int64_t>(p.patches.size());
  return d;
}

// Over the sweep (1x1 to 4000x3000, both orientations, every budget): the resized size, the
// soft-token count and every pixel value equal transformers' Gemma4ImageProcessor's.
TEST(MediaGolden, PreprocessingMatchesTransformers) {
  const nlohmann::json g = load_json("preprocess.json");
  ASSERT_GE(g["cases"].size(), 40u);
  for (const auto& c : g["cases"]) {
    const int w = c["width"], h = c["height"], budget = c["budget"];
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + " @" + std::to_string(budget));
    const ImageSize s = fit_to_budget(h, w, budget);
    EXPECT_EQ(s.width, c["patches_x"].get<int>() * kPatchSize);
    EXPECT_EQ(s.height, c["patches_y"].get<int>() * kPatchSize);
    const PreprocessedImage p = preprocess_image(testing::pattern(w, h), budget);
    EXPECT_EQ(p.n_soft_tokens(), c["soft_tokens"].get<int>());
    float max_err = 0;
    const Digest d = digest_codes(p, &max_err);
    EXPECT_LE(max_err, 0.0f) << "patch values are not code/255";
    const auto& want = c["codes"];
    EXPECT_EQ(d.n, want["n"].get<int64_t>());
    EXPECT_EQ(d.sum, want["sum"].get<int64_t>());
    EXPECT_EQ(d.weighted, want["weighted"].get<int64_t>());
    EXPECT_EQ(d.head, want["head"].get<std::vector<int64_t>>());
  }
}

TEST(MediaGolden, PatchLayoutIsRowsThenColumnsThenChannels) {
  const RgbImage img = testing::pattern(912, 672);  // its own target size at 280 tokens: not resampled
  const PreprocessedImage p = preprocess_image(img, 280);
  ASSERT_EQ(p.width, 912);
  ASSERT_EQ(p.patches_x, 57);
  const int64_t patch = p.patches_x + 1;  // second row of patches, second column
  const int64_t py = 5, px = 7, ch = 2;
  const float v = p.patches[patch * kPatchValues + (py * kPatchSize + px) * 3 + ch];
  const uint8_t want = img.row(kPatchSize + py)[(kPatchSize + px) * 3 + ch];
  EXPECT_EQ(v, static_cast<float>(want) * static_cast<float>(1.0 / 255.0));
}

}  // namespace
}  // namespace sluice::media
