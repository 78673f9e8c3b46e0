// The vocabulary comparison a draft model must pass (tokenizer/same_vocabulary.h); the check on
// two GGUF files is exercised with the tiny fixtures in tests/unit/engine/draft_model_gguf_test.
#include "tokenizer/same_vocabulary.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace sluice::tok {
namespace {

TEST(SameVocabulary, TheFirstDifferenceNamesItsId) {
  const std::vector<std::string_view> a = {"<pad>", "a", "b", "c"}, b = {"<pad>", "a", "x", "c"};
  EXPECT_EQ(first_vocab_difference(a, a), -1);
  EXPECT_EQ(first_vocab_difference(a, b), 2);
  EXPECT_EQ(first_vocab_difference(a, std::span(a).first(3)), 3);
}

}  // namespace
}  // namespace sluice::tok
