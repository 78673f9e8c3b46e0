// Metadata validation (clear errors) and tolerated oddities: duplicate token strings,
// empty token strings, int32 scores, missing optional arrays.
#include <gtest/gtest.h>

#include "unit/tokenizer/toy_vocab.h"

namespace sluice::test {
namespace {

// Runs `fn`, expecting a sluice::Error whose message contains `needle`.
template <class Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(VocabErrors, EmptyTokenList) {
  ToyVocab v;
  v.ids["bos"] = 0;
  expect_error([&] { v.build(); }, "tokenizer.ggml.tokens is empty");
}

TEST(VocabErrors, MissingTokenListOrModel) {
  ToyVocab v = spm_toy();
  gguf::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  auto bytes = w.to_bytes();
  expect_error([&] { Tokenizer::from_gguf(*gguf::GgufFile::parse(bytes, "x.gguf")); }, "tokenizer.ggml.tokens");
  gguf::GgufWriter w2;
  w2.add_string_array("tokenizer.ggml.tokens", {"a"});
  bytes = w2.to_bytes();
  expect_error([&] { Tokenizer::from_gguf(*gguf::GgufFile::parse(bytes, "x.gguf")); }, "tokenizer.ggml.model");
}

TEST(VocabErrors, ScoresOrTypesShorterThanTokens) {
  ToyVocab v = spm_toy();
  v.n_scores_drop = 1;
  expect_error([&] { v.build(); }, "tokenizer.ggml.scores has 277 entries, fewer than the 278 tokens");
  v = spm_toy();
  v.n_types_drop = 5;
  expect_error([&] { v.build(); }, "tokenizer.ggml.token_type has 273 entries");
}

TEST(VocabErrors, SpecialIdOutOfRange) {
  for (const char* key : {"bos", "eos", "unknown", "padding", "eot", "seperator", "mask"}) {
    ToyVocab v = spm_toy();
    v.ids[key] = 278;
    expect_error([&] { v.build(); }, std::string("tokenizer.ggml.") + key + "_token_id = 278 is not a token id");
  }
}

TEST(VocabErrors, UnknownTokenizerModel) {
  ToyVocab v = spm_toy();
  v.model = "gpt2";
  expect_error([&] { v.build(); }, "tokenizer.ggml.model = \"gpt2\" is not supported");
}

TEST(VocabErrors, Gemma4WithoutMerges) {
  ToyVocab v = bpe_toy();
  v.write_merges = false;
  expect_error([&] { v.build(); }, "no tokenizer.ggml.merges");
}

TEST(VocabErrors, AddBosWithoutBos) {
  ToyVocab v;
  v.add("a");
  v.add("b");
  v.flags["add_bos_token"] = true;
  v.model = "gemma4";
  v.merges = {"a b"};
  expect_error([&] { v.build(); }, "no BOS token");
}

TEST(VocabErrors, WrongScoreType) {
  ToyVocab v = spm_toy();
  v.write_scores = false;
  gguf::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add_string_array("tokenizer.ggml.scores", v.tokens);
  const auto bytes = w.to_bytes();
  // The GGUF reader already checks the types of well-known keys.
  expect_error([&] { Tokenizer::from_gguf(*gguf::GgufFile::parse(bytes, "x.gguf")); },
               "'tokenizer.ggml.scores' must be array[f32]");
}

TEST(Vocab, DuplicateTokenStringsKeepTheFirstId) {
  ToyVocab v = spm_toy();
  v.add("du", -1);
  v.add("u", -2);
  v.add("p", -3);
  const int32_t first = v.add("dup");
  const int32_t second = v.add("dup");
  const int32_t third = v.add("dup");
  testing::internal::CaptureStderr();
  auto t = v.build();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(t->n_duplicate_texts(), 2u);
  EXPECT_EQ(t->token_id("dup"), first);
  EXPECT_EQ(t->encode("dup", false, false), (std::vector<int32_t>{first}));
  EXPECT_EQ(t->token_to_piece(second, false), "dup");  // every id still decodes
  EXPECT_EQ(t->token_to_piece(third, false), "dup");
  // One warning line, naming the first pair.
  EXPECT_NE(err.find("2 duplicate token string(s)"), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(first) + " and " + std::to_string(second)), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(Vocab, EmptyTokenStringIsRenamed) {
  ToyVocab v = spm_toy();
  const int32_t id = v.add("");
  testing::internal::CaptureStderr();
  auto t = v.build();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(t->token_text(id), "[EMPTY_" + std::to_string(id) + "]");
}

TEST(Vocab, OptionalArrays) {
  ToyVocab v = spm_toy();
  v.write_types = false;  // all NORMAL, except what the stop-token rules force
  auto t = v.build();
  EXPECT_EQ(t->special_tokens(), (std::vector<int32_t>{1}));  // "<eos>" became CONTROL
  EXPECT_EQ(t->token_attr(2), uint32_t(kAttrNormal));
  EXPECT_EQ(t->token_to_piece(4, false), "<0x00>");  // not a BYTE token without types

  gguf::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b", "ab"});
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  const auto bytes = w.to_bytes();
  auto t2 = Tokenizer::from_gguf(*gguf::GgufFile::parse(bytes, "x.gguf"));
  EXPECT_EQ(t2->token_score(5), 0.0f);  // no scores: all 0, merges still happen
  // LLaMA defaults when the keys are absent: BOS 1, EOS 2, UNK 0.
  EXPECT_EQ(t2->bos(), 1);
  EXPECT_EQ(t2->eos(), 2);
  EXPECT_EQ(t2->unk(), 0);
  EXPECT_EQ(t2->encode("ab", true, false), (std::vector<int32_t>{1, 5}));
  // "</s>" is in the stop list: it becomes EOG and CONTROL.
  EXPECT_TRUE(t2->is_eog(2));
}

TEST(Vocab, SpecialIdsAndFlagsFromFile) {
  auto t = spm_toy().build();
  EXPECT_EQ(t->n_vocab(), 278);
  EXPECT_EQ(t->bos(), 2);
  EXPECT_EQ(t->eos(), 1);
  EXPECT_EQ(t->unk(), 3);
  EXPECT_EQ(t->pad(), 0);
  EXPECT_EQ(t->sep(), kNoToken);
  EXPECT_TRUE(t->add_bos());
  EXPECT_FALSE(t->add_eos());
  EXPECT_FALSE(t->add_space_prefix());
  EXPECT_EQ(t->linefeed(), 4 + 0x0A);  // SPM: the <0x0A> byte token
  auto b = bpe_toy().build();
  EXPECT_EQ(b->linefeed(), b->token_id("\n"));
}

}  // namespace
}  // namespace sluice::test
