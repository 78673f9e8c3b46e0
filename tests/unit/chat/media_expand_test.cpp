// chat::expand_placeholders: each placeholder becomes begin + n soft positions + end, rows
// numbered in item order; a placeholder count that differs from the items is an error.
#include "chat/media_expand.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace sluice::chat {
namespace {

constexpr MediaMarkers kM{7, 8, 9};

TEST(MediaExpand, TwoItemsInOrder) {
  const std::vector<int32_t> ids = {2, 7, 5, 7, 6};
  const std::vector<int32_t> counts = {3, 1};
  const ExpandedPrompt e = expand_placeholders(ids, kM, counts);
  EXPECT_EQ(e.ids, (std::vector<int32_t>{2, 8, 7, 7, 7, 9, 5, 8, 7, 9, 6}));
  EXPECT_EQ(e.soft_row, (std::vector<int64_t>{-1, -1, 0, 1, 2, -1, -1, -1, 3, -1, -1}));
  EXPECT_EQ(expanded_length(ids.size(), counts), static_cast<int64_t>(e.ids.size()));
  EXPECT_EQ(count_placeholders(ids, kM), 2u);
}

TEST(MediaExpand, NoItemsLeavesThePromptAlone) {
  const std::vector<int32_t> ids = {2, 5, 6};
  const ExpandedPrompt e = expand_placeholders(ids, kM, {});
  EXPECT_EQ(e.ids, ids);
  EXPECT_EQ(e.soft_row, (std::vector<int64_t>{-1, -1, -1}));
}

TEST(MediaExpand, CountMismatchIsAnError) {
  const std::vector<int32_t> ids = {2, 7, 7};
  const std::vector<int32_t> one = {4};
  try {
    expand_placeholders(ids, kM, one);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the prompt has 2 image placeholders for 1 image");
  }
  EXPECT_THROW(expand_placeholders(std::vector<int32_t>{2, 5}, kM, one), Error);
}

// Images and audio clips in one prompt: each expanded where its marker stands, rows numbered
// kind by kind (the images' rows, then the clips').
TEST(MediaExpand, KindsMixInMarkerOrder) {
  constexpr MediaMarkers kA{17, 18, 19};
  const std::vector<int32_t> ids = {2, 17, 7, 5, 17};  // clip, image, text, clip
  const std::vector<int32_t> images = {2};
  const std::vector<int32_t> clips = {1, 3};
  const std::vector<MediaKind> kinds = {{kM, images, "image"}, {kA, clips, "audio clip"}};
  const ExpandedPrompt e = expand_placeholders(ids, kinds);
  EXPECT_EQ(e.ids, (std::vector<int32_t>{2, 18, 17, 19, 8, 7, 7, 9, 5, 18, 17, 17, 17, 19}));
  EXPECT_EQ(e.soft_row, (std::vector<int64_t>{-1, -1, 2, -1, -1, 0, 1, -1, -1, -1, 3, 4, 5, -1}));
}

TEST(MediaExpand, MixedKindCountMismatchNamesTheKind) {
  constexpr MediaMarkers kA{17, 18, 19};
  const std::vector<int32_t> one = {1};
  const std::vector<int32_t> two = {1, 1};
  const std::vector<MediaKind> kinds = {{kM, one, "image"}, {kA, two, "audio clip"}};
  try {
    expand_placeholders(std::vector<int32_t>{2, 7, 17}, kinds);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the prompt has 1 audio clip placeholder for 2 audio clips");
  }
}

}  // namespace
}  // namespace sluice::chat
