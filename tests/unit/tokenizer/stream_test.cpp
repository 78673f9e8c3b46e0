// Detokenization (spec §9): pieces per token type, decode() with remove/unparse special
// and llama.cpp's clean-up passes, the streaming decoder, and the stop-token rules (§11).
#include <gtest/gtest.h>

#include "unit/tokenizer/toy_vocab.h"

namespace sluice::test {
namespace {

const std::string kSp = "\xE2\x96\x81";  // U+2581
const std::string kFffd = "\xEF\xBF\xBD";

TEST(Pieces, EachTokenTypeRendersAsSpecified) {
  ToyVocab v;
  v.add_gemma_prefix();
  const int32_t normal = v.add(kSp + "hi" + kSp);
  const int32_t ctl = v.add("<ctl>", 0, kControl);
  const int32_t ud = v.add("<ud> x", 0, kUserDefined);
  const int32_t unused = v.add("<u5>", 0, kUnused);
  const int32_t undef = v.add("<u0>", 0, 0);
  const int32_t unused_ctl = v.add("<unused7>", 0, kControl);
  auto t = v.build();
  EXPECT_EQ(t->token_to_piece(normal, false), " hi ");
  EXPECT_EQ(t->token_to_piece(ctl, false), "");
  EXPECT_EQ(t->token_to_piece(ctl, true), "<ctl>");
  EXPECT_EQ(t->token_to_piece(3, false), "");  // <unk>
  EXPECT_EQ(t->token_to_piece(3, true), "<unk>");
  EXPECT_EQ(t->token_to_piece(ud, false), "<ud> x");  // verbatim, always
  EXPECT_EQ(t->token_to_piece(unused, true), "");
  EXPECT_EQ(t->token_to_piece(undef, true), "");
  EXPECT_EQ(t->token_to_piece(4 + 0x41, false), "A");  // <0x41>
  EXPECT_EQ(t->token_to_piece(4 + 0xC3, false), "\xC3");
  // Control tokens named "unused" are also UNUSED, but still render with special = true.
  EXPECT_EQ(t->token_attr(unused_ctl), uint32_t(kAttrControl | kAttrUnused));
  EXPECT_EQ(t->token_to_piece(unused_ctl, true), "<unused7>");
  EXPECT_EQ(t->token_to_piece(unused_ctl, false), "");
  EXPECT_THROW(t->token_to_piece(t->n_vocab(), true), Error);
  EXPECT_THROW(t->token_to_piece(-1, true), Error);
}

TEST(Decode, RemoveAndUnparseSpecial) {
  auto t = spm_toy().build();
  std::vector<int32_t> ids = t->encode("hello world", true, false);
  ids.push_back(1);  // <eos>
  EXPECT_EQ(t->decode(ids, false, false), "hello world");
  EXPECT_EQ(t->decode(ids, false, true), "<bos>hello world<eos>");
  // add_eos is false, so remove_special keeps the trailing EOS.
  EXPECT_EQ(t->decode(ids, true, true), "hello world<eos>");
  // Only a *leading* BOS is removed.
  const std::vector<int32_t> mid = {t->token_id("hello"), 2, t->token_id("hello")};
  EXPECT_EQ(t->decode(mid, true, true), "hello<bos>hello");
  EXPECT_THROW(t->decode(std::vector<int32_t>{999999}, false, false), Error);
}

TEST(Decode, CleanSpacesIsOnForGemma4AndKeepsLlamaCppQuirks) {
  ToyVocab v = bpe_toy();
  for (const char* s : {"?", "!", ".", ",", "'", "s", "m", "re", "ve", "t", "a", "x", "y", "I"}) v.add(s);
  auto t = v.build();
  EXPECT_TRUE(t->clean_spaces());
  auto ids_of = [&](std::initializer_list<std::string> parts) {
    std::vector<int32_t> ids;
    for (const auto& p : parts) ids.push_back(p == " " ? t->token_id(kSp) : t->token_id(p));
    return ids;
  };
  const auto punct = ids_of({"a", " ", "?", "a", " ", "!", "a", " ", ".", "a", " ", ","});
  EXPECT_EQ(t->decode(punct, false, false), "a?a!a.a,");
  EXPECT_EQ(t->decode(punct, false, false, false), "a ?a !a .a ,");
  EXPECT_EQ(t->decode(ids_of({"a", " ", "'", " ", "a"}), false, false), "a'a");
  EXPECT_EQ(t->decode(ids_of({"I", " ", "'", "s", " ", "'", "m", " ", "'", "re", " ", "'", "ve", " ", "'", "t", " ",
                              "'", "ll"}),
                      false, false),
            "I's'm're've 't 'll");
  // Pass 2 overwrites the space it skips with NUL, so the second " ' " is not seen.
  EXPECT_EQ(t->decode(ids_of({"x", " ", "'", " ", "'", " ", "y"}), false, false), "x'' y");
  // Gemma 3 (SPM) never cleans.
  auto spm = spm_toy().build();
  EXPECT_FALSE(spm->clean_spaces());
}

std::vector<int32_t> byte_ids(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(4 + c);  // <0xXX> is id 4 + XX in the toys
  return ids;
}

TEST(Stream, EmojiByteTokensArrivingOneByOne) {
  auto t = spm_toy().build();
  StreamDecoder sd(*t);
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600
  const auto ids = byte_ids(emoji);
  EXPECT_EQ(sd.push(ids[0]), "");
  EXPECT_EQ(sd.push(ids[1]), "");
  EXPECT_EQ(sd.push(ids[2]), "");
  EXPECT_EQ(sd.n_pending(), 3u);
  EXPECT_EQ(sd.push(ids[3]), emoji);
  EXPECT_EQ(sd.n_pending(), 0u);
  EXPECT_EQ(sd.push(t->token_id("hello")), "hello");
  EXPECT_EQ(sd.flush(), "");
}

TEST(Stream, ZwjSequenceAndMixedTokensMatchDecode) {
  auto t = spm_toy().build();
  const std::string text = "he\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB world \xC3\xA9";
  const auto ids = t->encode(text, false, false);
  StreamDecoder sd(*t);
  std::string out;
  for (int32_t id : ids) {
    const std::string s = sd.push(id);
    // Every chunk ends on a character boundary.
    EXPECT_TRUE(s.empty() || (static_cast<unsigned char>(s.back()) & 0xC0) != 0xC0 ||
                (static_cast<unsigned char>(s.back()) < 0x80));
    out += s;
  }
  out += sd.flush();
  EXPECT_EQ(out, text);
  EXPECT_EQ(out, t->decode(ids, false, false));
}

TEST(Stream, InvalidBytesBecomeReplacementCharacters) {
  auto t = spm_toy().build();
  {
    StreamDecoder sd(*t);
    EXPECT_EQ(sd.push(4 + 0x80), kFffd);  // a lone continuation byte is never valid
    EXPECT_EQ(sd.push(4 + 0xF0), "");
    EXPECT_EQ(sd.push(t->token_id("h")), kFffd + "h");  // F0 cut short by 'h'
  }
  {
    StreamDecoder sd(*t);
    EXPECT_EQ(sd.push(4 + 0xF0), "");
    EXPECT_EQ(sd.push(4 + 0x9F), "");
    EXPECT_EQ(sd.flush(), kFffd);  // unfinished at the end: one U+FFFD
    EXPECT_EQ(sd.n_pending(), 0u);
  }
  {
    StreamDecoder sd(*t);
    EXPECT_EQ(sd.push(4 + 0xED), "");
    EXPECT_EQ(sd.push(4 + 0xA0), kFffd + kFffd);  // ED A0 would be a surrogate
  }
}

TEST(Stream, SpecialTokensHiddenUnlessAsked) {
  auto t = spm_toy().build();
  StreamDecoder plain(*t), special(*t, true);
  EXPECT_EQ(plain.push(2), "");
  EXPECT_EQ(special.push(2), "<bos>");
}

// ---- stop tokens and text-keyed attributes (spec §2.1, §11)

TEST(StopTokens, Gemma3Style) {
  ToyVocab v;
  v.add_gemma_prefix();
  const int32_t sot = v.add("<start_of_turn>", -1000, kControl);
  const int32_t eot = v.add("<end_of_turn>", -1000, kControl);
  const int32_t s_end = v.add("</s>", -1000, kUserDefined);
  const int32_t unused = v.add("<unused0>", -1000, kControl);
  v.add("<");
  auto t = v.build();
  EXPECT_EQ(t->eot(), eot);
  EXPECT_TRUE(t->is_eog(1));
  EXPECT_TRUE(t->is_eog(eot));
  EXPECT_FALSE(t->is_eog(sot));
  EXPECT_FALSE(t->is_eog(2));
  // "</s>" is in llama.cpp's stop list and Gemma 3 has no "<|tool_response>": it stops
  // generation and becomes USER_DEFINED|CONTROL (so parse_special is needed to match it).
  EXPECT_TRUE(t->is_eog(s_end));
  EXPECT_EQ(t->token_attr(s_end), uint32_t(kAttrUserDefined | kAttrControl));
  EXPECT_EQ(t->eog_ids(), (std::vector<int32_t>{1, eot, s_end}));
  EXPECT_EQ(t->encode("</s>", false, true), (std::vector<int32_t>{s_end}));
  EXPECT_NE(t->encode("</s>", false, false), (std::vector<int32_t>{s_end}));
  EXPECT_EQ(t->token_attr(unused), uint32_t(kAttrControl | kAttrUnused));
  EXPECT_FALSE(t->is_eog(-1));
  EXPECT_FALSE(t->is_eog(t->n_vocab()));
}

TEST(StopTokens, Gemma4Style) {
  ToyVocab v = bpe_toy();
  const int32_t turn_open = v.add("<|turn>", -1000, kControl);
  const int32_t turn_close = v.add("<turn|>", -1000, kControl);
  const int32_t tool_resp = v.add("<|tool_response>", -1000, kUserDefined);
  const int32_t s_end = v.add("</s>", -1000, kNormal);
  v.ids["eos"] = static_cast<uint32_t>(turn_close);  // some converters write 106 (spec §12.6)
  auto t = v.build();
  EXPECT_EQ(t->eog_ids(), (std::vector<int32_t>{1, turn_close, tool_resp}));
  EXPECT_FALSE(t->is_eog(turn_open));
  EXPECT_FALSE(t->is_eog(s_end));
  EXPECT_EQ(t->token_attr(s_end), uint32_t(kAttrNormal));
  EXPECT_EQ(t->token_attr(tool_resp), uint32_t(kAttrUserDefined | kAttrControl));
  EXPECT_EQ(t->eot(), kNoToken);
}

TEST(StopTokens, ExplicitEotKeyWins) {
  ToyVocab v = spm_toy();
  const int32_t a = v.add("<end_of_turn>", -1000, kControl);
  const int32_t b = v.add("<my_eot>", -1000, kControl);
  v.ids["eot"] = static_cast<uint32_t>(b);
  auto t = v.build();
  EXPECT_EQ(t->eot(), b);
  EXPECT_TRUE(t->is_eog(a));
  EXPECT_TRUE(t->is_eog(b));
}

}  // namespace
}  // namespace sluice::test
