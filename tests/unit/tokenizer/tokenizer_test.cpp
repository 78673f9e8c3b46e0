// Encoding: the spec's toy examples (tokenizer.md §6.4, §7.4), merge tie-breaking and stale
// candidates (§13), the Gemma 4 newline pre-split, byte fallback and special-token
// splitting (§5), checked against a literal transcription of llama.cpp's procedure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "tokenizer/vocab.h"
#include "unit/tokenizer/toy_vocab.h"

namespace sluice::test {
namespace {

using Strings = std::vector<std::string>;
const std::string kSp = "\xE2\x96\x81";  // U+2581

TEST(Spm, ToyExampleFromSpec) {
  auto t = spm_toy().build();
  EXPECT_EQ(t->model(), TokenizerModel::kSpm);
  const auto ids = t->encode("hello world \xC3\xA9", false, false);
  EXPECT_EQ(texts(*t, ids), (Strings{"hello", kSp + "world", kSp, "<0xC3>", "<0xA9>"}));
  // add_special prepends BOS (id 2), never EOS.
  const auto with_bos = t->encode("hello world \xC3\xA9", true, false);
  ASSERT_EQ(with_bos.size(), ids.size() + 1);
  EXPECT_EQ(with_bos[0], 2);
  EXPECT_EQ(t->decode(ids, false, false), "hello world \xC3\xA9");
}

TEST(Spm, EqualScoresMergeLeftFirst) {
  ToyVocab v;
  v.add_gemma_prefix();
  v.add("a", -1);
  v.add("b", -1);
  v.add("ab", -5);
  v.add("ba", -5);
  auto t = v.build();
  EXPECT_EQ(texts(*t, t->encode("aba", false, false)), (Strings{"ab", "a"}));
  EXPECT_EQ(texts(*t, t->encode("bab", false, false)), (Strings{"ba", "b"}));
}

TEST(Spm, StaleCandidatesAreSkipped) {
  // "aaa": (0,1) and (1,2) both propose "aa"; after (0,1) merges, (1,2) is stale and the
  // new pair ("aa","a") forms "aaa".
  ToyVocab v;
  v.add_gemma_prefix();
  v.add("a", -1);
  v.add("aa", -2);
  v.add("aaa", -3);
  auto t = v.build();
  EXPECT_EQ(texts(*t, t->encode("aaa", false, false)), (Strings{"aaa"}));
  // "aaaa": (0,1) merges, (1,2) is stale, (2,3) merges next (score -2 beats "aaa" -3);
  // then ("aa","aa") is not a token and the queued (0,2) "aaa" candidate is stale.
  EXPECT_EQ(texts(*t, t->encode("aaaa", false, false)), (Strings{"aa", "aa"}));
}

TEST(Spm, AddSpacePrefixAppliesToFirstFragmentAndAfterSpecialTokens) {
  ToyVocab v = spm_toy();
  v.flags["add_space_prefix"] = true;
  auto t = v.build();
  EXPECT_EQ(texts(*t, t->encode("hello", false, false)), (Strings{kSp + "hello"}));
  EXPECT_EQ(texts(*t, t->encode("hello<bos>hello", false, true)), (Strings{kSp + "hello", "<bos>", kSp + "hello"}));
  // Detokenize strips one leading space from the first piece (spec §9.2).
  EXPECT_EQ(t->decode(t->encode("hello", false, false), false, false), "hello");
}

TEST(Spm, InvalidUtf8BytesPassThroughAsByteTokens) {
  auto t = spm_toy().build();
  // A stray continuation byte is its own 1-byte symbol (spec §12.8).
  EXPECT_EQ(texts(*t, t->encode("h\x80o", false, false)), (Strings{"h", "<0x80>", "o"}));
  // A truncated lead byte at the end is clipped.
  EXPECT_EQ(texts(*t, t->encode("h\xE2", false, false)), (Strings{"h", "<0xE2>"}));
}

TEST(Spm, MissingByteTokenIsAnError) {
  ToyVocab v;
  v.add("<pad>", 0, kControl);
  v.add("<eos>", 0, kControl);
  v.add("<bos>", 0, kControl);
  v.add("a", 0);
  v.ids["bos"] = 2;
  v.ids["eos"] = 1;
  auto t = v.build();
  EXPECT_THROW(t->encode("ab", false, false), Error);
}

TEST(Bpe, ToyExampleFromSpec) {
  auto t = bpe_toy().build();
  EXPECT_EQ(t->model(), TokenizerModel::kGemma4Bpe);
  const auto ids = t->encode("hello world\n\n\xC3\xA9", false, false);
  EXPECT_EQ(texts(*t, ids), (Strings{"hello", kSp + "world", "\n\n", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(t->decode(ids, false, false, false), "hello world\n\n\xC3\xA9");
}

TEST(Bpe, EqualRanksMergeLeftFirstAndStaleCandidatesAreSkipped) {
  ToyVocab v;
  v.model = "gemma4";
  v.add_gemma_prefix();
  v.add("a");
  v.add("aa");
  v.add("aaa");
  v.merges = {"a a", "aa a"};
  auto t = v.build();
  EXPECT_EQ(texts(*t, t->encode("aaa", false, false)), (Strings{"aaa"}));
  EXPECT_EQ(texts(*t, t->encode("aaaa", false, false)), (Strings{"aa", "aa"}));
  v.merges = {"a a"};
  t = v.build();
  EXPECT_EQ(texts(*t, t->encode("aaa", false, false)), (Strings{"aa", "a"}));
}

TEST(Bpe, MergesAreByRankNotScore) {
  ToyVocab v;
  v.model = "gemma4";
  v.add_gemma_prefix();
  v.add("a", 5);
  v.add("b", 5);
  v.add("c", 5);
  v.add("ab", -100);  // scores are placeholders for Gemma 4 and must be ignored
  v.add("bc", 100);
  v.merges = {"a b", "b c"};
  auto t = v.build();
  EXPECT_EQ(texts(*t, t->encode("abc", false, false)), (Strings{"ab", "c"}));
  // The merged text need not be a token: it then falls back to bytes.
  v.merges = {"c a"};
  t = v.build();
  EXPECT_EQ(texts(*t, t->encode("ca", false, false)), (Strings{"<0x63>", "<0x61>"}));
}

TEST(Bpe, NewlineRunsAreSeparateWords) {
  ToyVocab v;
  v.model = "gemma4";
  v.add_gemma_prefix();
  for (const char* s : {"a", "\n", "\n\n\n", "a\n", "\r"}) v.add(s);
  v.merges = {"a \n"};  // would join across the newline split if there were no split
  auto t = v.build();
  // "\n\n\n" is a token: the shortcut emits it whole even without merges.
  EXPECT_EQ(texts(*t, t->encode("a\n\n\na", false, false)), (Strings{"a", "\n\n\n", "a"}));
  // "\n\n" is not a token and no merge joins newlines: one token per '\n'.
  EXPECT_EQ(texts(*t, t->encode("a\n\na", false, false)), (Strings{"a", "\n", "\n", "a"}));
  // Only '\n' splits; "\r" stays inside its word.
  EXPECT_EQ(texts(*t, t->encode("\ra", false, false)), (Strings{"\r", "a"}));
}

TEST(Bpe, BytesWithoutAByteTokenAreDropped) {
  ToyVocab v;
  v.model = "gemma4";
  v.add("<pad>", 0, kControl);
  v.add("<eos>", 0, kControl);
  v.add("<bos>", 0, kControl);
  v.add("a");
  v.add("<0xC3>", 0, kByte);  // but no <0xA9>
  v.merges = {"a a"};
  v.ids["bos"] = 2;
  auto t = v.build();
  EXPECT_EQ(texts(*t, t->encode("a\xC3\xA9"
                                "a",
                                false, false)),
            (Strings{"a", "<0xC3>", "a"}));
}

TEST(Bpe, InvalidUtf8BecomesReplacementCharacter) {
  auto t = bpe_toy().build();
  // Spec §12.8: the pre-split rebuilds words from code points; 0x80 becomes U+FFFD.
  EXPECT_EQ(texts(*t, t->encode("h\x80", false, false)), (Strings{"h", "<0xEF>", "<0xBF>", "<0xBD>"}));
}

TEST(Bpe, LlamaModelWithGemma4ArchitectureAndMergesUsesBpe) {
  ToyVocab v = bpe_toy();
  v.model = "llama";
  v.arch = "gemma4";
  auto t = v.build();
  EXPECT_EQ(t->model(), TokenizerModel::kGemma4Bpe);
  EXPECT_EQ(texts(*t, t->encode("hello", false, false)), (Strings{"hello"}));
}

TEST(Bpe, AddBosIsForcedForGemma4) {
  ToyVocab v = bpe_toy();
  v.flags["add_bos_token"] = false;
  auto t = v.build();
  EXPECT_TRUE(t->add_bos());
  EXPECT_EQ(t->encode("hello", true, false).front(), 2);
}

TEST(Encode, EmptyText) {
  for (auto v : {spm_toy(), bpe_toy()}) {
    auto t = v.build();
    EXPECT_TRUE(t->encode("", false, true).empty());
    EXPECT_EQ(t->encode("", true, true), (std::vector<int32_t>{2}));
  }
}

TEST(Encode, AddEosKeyAppendsEos) {
  ToyVocab v = spm_toy();
  v.flags["add_eos_token"] = true;
  auto t = v.build();
  const auto ids = t->encode("hello", true, false);
  EXPECT_EQ(ids.front(), 2);
  EXPECT_EQ(ids.back(), 1);
  // remove_special drops both again (spec §9.2 steps 1-2).
  EXPECT_EQ(t->decode(ids, true, true), "hello");
  EXPECT_EQ(t->decode(ids, false, true), "<bos>hello<eos>");
}

// ---- special-token splitting (spec §5)

ToyVocab special_toy() {
  ToyVocab v = spm_toy();
  v.add("x");
  v.add("y");
  v.add("<start_of_turn>", -1000, kControl);
  v.add("<end_of_turn>", -1000, kControl);
  v.add("<tag>", -1000, kUserDefined);
  v.add("  ", -1000, kUserDefined);  // Gemma 3 stores user-defined spaces as real spaces
  return v;
}

TEST(SpecialSplit, ControlTokensMatchOnlyWithParseSpecial) {
  auto t = special_toy().build();
  EXPECT_EQ(texts(*t, t->encode("x<start_of_turn>y", false, true)), (Strings{"x", "<start_of_turn>", "y"}));
  const auto plain = texts(*t, t->encode("x<start_of_turn>y", false, false));
  EXPECT_EQ(plain.front(), "x");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "<start_of_turn>"), 0);
  EXPECT_EQ(plain.size(), 1 + 15 + 1u);  // no merges for those letters: bytes and chars
}

TEST(SpecialSplit, UserDefinedTokensAlwaysMatch) {
  auto t = special_toy().build();
  for (bool parse : {false, true}) {
    EXPECT_EQ(texts(*t, t->encode("x<tag>y", false, parse)), (Strings{"x", "<tag>", "y"}));
    // Matching happens on the raw text, before spaces are escaped.
    EXPECT_EQ(texts(*t, t->encode("x  y", false, parse)), (Strings{"x", "  ", "y"}));
    EXPECT_EQ(texts(*t, t->encode("x   y", false, parse)), (Strings{"x", "  ", kSp, "y"}));
  }
}

TEST(SpecialSplit, LongerTokenWinsOverlaps) {
  ToyVocab v = spm_toy();
  v.add("<");
  v.add(">");
  v.add("<a>", -1000, kControl);
  v.add("a><b", -1000, kControl);  // longer, overlaps both ends of "<a><b>"
  v.add("<b>", -1000, kControl);
  auto t = v.build();
  EXPECT_EQ(texts(*t, t->encode("<a><b>", false, true)), (Strings{"<", "a><b", ">"}));
  EXPECT_EQ(texts(*t, t->encode("<a><a><b>", false, true)), (Strings{"<a>", "<", "a><b", ">"}));
}

// llama.cpp's procedure written out literally (spec §5): token by token, longest first,
// cutting every left-to-right occurrence out of every raw fragment.
std::vector<std::pair<int32_t, std::string>> naive_split(const Tokenizer& t, const std::string& text,
                                                         bool parse_special) {
  std::vector<std::pair<int32_t, std::string>> frags;  // (id or -1, raw text)
  if (!text.empty()) frags.push_back({-1, text});
  for (int32_t id : t.special_tokens()) {
    if (!parse_special && (t.token_attr(id) & (kAttrControl | kAttrUnknown))) continue;
    const std::string s(t.token_text(id));
    std::vector<std::pair<int32_t, std::string>> next;
    for (auto& f : frags) {
      if (f.first != -1) {
        next.push_back(f);
        continue;
      }
      std::string rest = f.second;
      for (size_t p; (p = rest.find(s)) != std::string::npos;) {
        if (p) next.push_back({-1, rest.substr(0, p)});
        next.push_back({id, s});
        rest = rest.substr(p + s.size());
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    frags = next;
  }
  return frags;
}

TEST(SpecialSplit, MatchesLiteralLlamaCppProcedureOnRandomText) {
  // Single-character tokens and no usable merges (BPE), so encode() shows the fragments
  // directly. (SPM would merge "ab" into the control token of that text, spec §12.1.)
  ToyVocab v;
  v.model = "gemma4";
  v.merges = {"q q"};
  v.add_gemma_prefix();
  for (const char* c : {"a", "b", "c"}) v.add(c);
  const std::pair<const char*, int32_t> specials[] = {{"ab", kControl},     {"bc", kUserDefined}, {"abc", kControl},
                                                      {"ca", kUserDefined}, {"cab", kUnknown},    {"bca", kControl},
                                                      {"aa", kUserDefined}, {"b", kControl}};
  for (const auto& [s, ty] : specials) v.add(s, -1000, ty);
  v.add("ab", -1000, kUserDefined);  // duplicate text with another type
  auto t = v.build();
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int len = static_cast<int>(rng() % 14);
    for (int i = 0; i < len; ++i) text.push_back("abc"[rng() % 3]);
    for (bool parse : {false, true}) {
      std::vector<int32_t> expect;
      for (const auto& [id, s] : naive_split(*t, text, parse)) {
        if (id != -1) expect.push_back(id);
        else
          for (char ch : s) expect.push_back(t->token_id(std::string(1, ch)));
      }
      ASSERT_EQ(t->encode(text, false, parse), expect) << "text '" << text << "' parse " << parse;
    }
  }
}

TEST(SpecialSplit, RepeatedAndEdgeTokens) {
  auto t = special_toy().build();
  EXPECT_EQ(texts(*t, t->encode("<end_of_turn><end_of_turn>x<end_of_turn>", false, true)),
            (Strings{"<end_of_turn>", "<end_of_turn>", "x", "<end_of_turn>"}));
  // "<bos>" mid-text with add_special: the BOS of add_special plus the parsed one.
  EXPECT_EQ(texts(*t, t->encode("x<bos>", true, true)), (Strings{"<bos>", "x", "<bos>"}));
}

// Whitespace runs as Gemma 3 stores them: user-defined tokens of 2..31 spaces, tabs and
// newlines, so a run holds an occurrence of ~30 special tokens at every position.
ToyVocab whitespace_toy() {
  ToyVocab v = spm_toy();
  for (const char c : {' ', '\t', '\n'})
    for (int k = 2; k <= 31; ++k) v.add(std::string(k, c), -1000, kUserDefined);
  v.add(" \n", -1000, kUserDefined);
  v.add("<tag>", -1000, kControl);
  return v;
}

TEST(SpecialSplit, RunsMatchLiteralLlamaCppProcedure) {
  auto t = whitespace_toy().build();
  std::mt19937 rng(11);
  const std::string pieces[] = {" ", "\t", "\n", "h", "<tag>", " \n"};
  for (int iter = 0; iter < 400; ++iter) {
    std::string text;
    const int n_runs = static_cast<int>(rng() % 8);
    for (int r = 0; r < n_runs; ++r) {
      const std::string& p = pieces[rng() % 6];
      for (int k = static_cast<int>(rng() % 70); k >= 0; --k) text += p;
    }
    for (bool parse : {false, true}) {
      std::vector<int32_t> want;
      for (const auto& [id, s] : naive_split(*t, text, parse)) {
        if (id != -1) want.push_back(id);
        else
          for (int32_t x : t->encode(s, false, false)) want.push_back(x);  // no specials left in s
      }
      ASSERT_EQ(t->encode(text, false, parse), want) << "iteration " << iter << " parse " << parse;
    }
  }
}

uint64_t split_work(const tok::Vocab& v, const std::string& text) {
  std::vector<tok::Fragment> frags;
  tok::SplitWork w;
  tok::split_special(v, text, true, frags, &w);
  return w.trie_steps + w.runs + w.checks;
}

TEST(SpecialSplit, WorkIsLinearInTheTextWhateverItsRuns) {
  const std::vector<uint8_t> bytes = whitespace_toy().bytes();
  auto file = gguf::GgufFile::parse(bytes, "toy.gguf");
  const auto v = tok::load_vocab(*file);
  for (const std::string unit : {" ", "\n", "\t", " \n", "  h\n\n\n", "<tag> "}) {
    std::string small, big;
    while (small.size() < (64u << 10)) small += unit;
    while (big.size() < (256u << 10)) big += unit;
    const uint64_t ws = split_work(*v, small), wb = split_work(*v, big);
    // A text 4x longer costs 4x the work, and a few steps per byte, not one per token
    // that matches there (~30 in a run).
    EXPECT_LE(wb, 4.2 * static_cast<double>(ws)) << "unit '" << unit << "'";
    EXPECT_LE(wb, 4 * big.size()) << "unit '" << unit << "'";
  }
}

// SPM as spec §6 defines it, step by step: merge the adjacent pair whose concatenation is
// the highest-scoring token (leftmost on ties) until none is left; then byte fallback.
std::vector<int32_t> reference_spm(const Tokenizer& t, const std::string& text) {
  std::vector<std::string> sym;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<uint8_t>(text[i]);
    const size_t len = std::min<size_t>(lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4, text.size() - i);
    sym.push_back(text.substr(i, len));
    i += len;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      const int32_t id = t.token_id(sym[i] + sym[i + 1]);
      if (id >= 0 && (best < 0 || t.token_score(id) > best_score))
        best = static_cast<int>(i), best_score = t.token_score(id);
    }
    if (best < 0) break;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + best + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& s : sym) {
    if (const int32_t id = t.token_id(s); id >= 0) {
      ids.push_back(id);
      continue;
    }
    for (char c : s) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<uint8_t>(c));
      ids.push_back(t.token_id(hex));
    }
  }
  return ids;
}

TEST(Spm, CuttingAtPairsNoTokenHoldsKeepsTheResult) {
  // Pairs like "ca", "a▁" are in no token: the fragment is merged in stretches between them.
  ToyVocab v = spm_toy();
  const std::pair<const char*, float> more[] = {{"a", -2},
                                                {"b", -3},
                                                {"c", -4},
                                                {"ab", -5},
                                                {"bc", -3},
                                                {"abc", -9},
                                                {"\xE2\x96\x81"
                                                 "a",
                                                 -4},
                                                {"b\xE2\x96\x81", -6},
                                                {"aab", -1},
                                                {"bb", -7},
                                                {"cc", -2},
                                                {"\xC3\xA9", -5}};
  for (const auto& [s, score] : more) v.add(s, score);
  auto t = v.build();
  std::mt19937 rng(5);
  const char* alphabet[] = {"a", "b", "c", "\xE2\x96\x81", "\xC3\xA9", "z"};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    for (int i = static_cast<int>(rng() % 24); i > 0; --i) text += alphabet[rng() % 6];
    ASSERT_EQ(t->encode(text, false, false), reference_spm(*t, text)) << "text '" << text << "'";
  }
}

TEST(Encode, LongInputsAreNotQuadratic) {
  auto spm = spm_toy().build();
  auto bpe = bpe_toy().build();
  std::string big;
  while (big.size() < (1u << 20)) big += "hello world <start_of_turn> \xF0\x9F\x98\x80 ll ";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_GT(spm->encode(big, true, true).size(), 100000u);
  EXPECT_GT(bpe->encode(big, true, true).size(), 100000u);
  EXPECT_GT(bpe->encode(std::string(1 << 20, 'l'), false, false).size(), 1000u);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 20.0);  // ~0.5 s in Release; quadratic behaviour would take minutes
}

TEST(Encode, RandomBytesAreHandledAndDecodeBack) {
  // Arbitrary bytes (invalid UTF-8 included) never crash. SPM keeps every byte, so its
  // round trip is exact when there is no space: an escaped space can be split by a bad lead
  // byte before it (0xFF claims 4 bytes, spec §6.1) and then decodes as raw E2 96 81.
  auto spm = special_toy().build();
  auto bpe = bpe_toy().build();
  std::mt19937 rng(11);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) s.push_back(static_cast<char>("hel o\n\xC3\xA9\xF0\x9F\x80\xFF"[rng() % 13]));
    for (bool parse : {false, true}) {
      const auto ids = spm->encode(s, false, parse);
      if (s.find(' ') == std::string::npos) {
        EXPECT_EQ(spm->decode(ids, false, true), s);
      }
      const auto ids4 = bpe->encode(s, true, parse);
      EXPECT_FALSE(ids4.empty());
      for (int32_t id : ids4) ASSERT_TRUE(id >= 0 && id < bpe->n_vocab());
      StreamDecoder sd(*bpe);
      for (int32_t id : ids4) sd.push(id);
      sd.flush();
    }
  }
}

TEST(Encode, ConcurrentCallsAgree) {
  // encode() is const and keeps no shared state: several threads give the same ids.
  auto t = special_toy().build();
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) texts.push_back("x<start_of_turn>hello world " + std::to_string(i) + "  \xC3\xA9<tag>");
  std::vector<std::vector<int32_t>> want;
  for (const auto& s : texts) want.push_back(t->encode(s, true, true));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        for (size_t i = 0; i < texts.size(); ++i)
          if (t->encode(texts[i], true, true) != want[i]) ++bad;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace sluice::test
