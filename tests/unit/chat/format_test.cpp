// The chat format resolved once at load (chat/format.h): every markup id equals the id the
// vocabulary's own table gives its text (the lookup the server made per request before), the
// Gemma 4 ones equal gemma4.md §4.3's ids, and markup the vocabulary lacks is -1.
#include <gtest/gtest.h>

#include <string>

#include "chat/format.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "unit/tokenizer/toy_vocab.h"

namespace sluice::chat {
namespace {

// The vocabulary's own id for `text`, -1 where it has none.
int32_t table_id(const Tokenizer& tok, const char* text) {
  const int32_t id = tok.token_id(text);
  return id == kNoToken ? -1 : id;
}

TEST(ChatFormat, Gemma4MarkupIdsAreResolvedOnce) {
  // A BPE vocabulary trained with HF tokenizers, Gemma 4's markup at its real ids (media at the end).
  auto file = gguf::GgufFile::open(std::string(SLUICE_SOURCE_DIR) + "/tests/data/tokenizer/gemma4_toy.gguf");
  auto tok = Tokenizer::from_gguf(*file);
  const ChatFormat f = chat_format(ChatArch::Gemma4, *tok);
  EXPECT_EQ(f.tool_format, ToolFormat::kGemma4Native);
  EXPECT_TRUE(f.reasons());
  EXPECT_EQ(f.turn_open, 105);
  EXPECT_EQ(f.turn_close, 106);
  EXPECT_EQ(f.channel_open, 100);
  EXPECT_EQ(f.channel_close, 101);
  EXPECT_EQ(f.tool.open, 48);
  EXPECT_EQ(f.tool.close, 49);
  EXPECT_EQ(f.tool.quote, 52);
  const std::pair<int32_t, const char*> media[] = {
      {f.image.begin, "<|image>"}, {f.image.placeholder, "<|image|>"}, {f.image.end, "<image|>"},
      {f.audio.begin, "<|audio>"}, {f.audio.placeholder, "<|audio|>"}, {f.audio.end, "<audio|>"}};
  for (const auto& [id, text] : media) {
    EXPECT_GE(id, 0) << text;
    EXPECT_EQ(id, table_id(*tok, text)) << text;
  }
  EXPECT_NE(f.image.placeholder, f.audio.placeholder);
}

TEST(ChatFormat, Gemma3HasTurnsOnly) {
  test::ToyVocab v = test::spm_toy();
  const int32_t sot = v.add("<start_of_turn>", -1000, test::kControl);
  const int32_t eot = v.add("<end_of_turn>", -1000, test::kControl);
  const auto tok = v.build();
  const ChatFormat f = chat_format(ChatArch::Gemma3, *tok);
  EXPECT_EQ(f.tool_format, ToolFormat::kJson);
  EXPECT_FALSE(f.reasons());
  EXPECT_EQ(f.turn_open, sot);
  EXPECT_EQ(f.turn_close, eot);
  for (int32_t id : {f.channel_open, f.channel_close, f.tool.open, f.tool.close, f.tool.quote, f.image.begin,
                     f.image.placeholder, f.image.end, f.audio.begin, f.audio.placeholder, f.audio.end})
    EXPECT_EQ(id, -1);
}

TEST(ChatFormat, SingleTokenIsTheOneTokenOfItsText) {
  const auto tok = test::spm_toy().build();
  EXPECT_EQ(single_token(*tok, "h"), tok->token_id("h"));
  EXPECT_EQ(single_token(*tok, "<start_of_turn>"), std::nullopt);  // several tokens
}

}  // namespace
}  // namespace sluice::chat
