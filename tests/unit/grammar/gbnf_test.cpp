// GBNF front end against Lark's Earley parser (tests/data/grammar/gbnf_cases.json, written
// by python/make_gbnf_cases.py), plus parse errors.
#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/compiled.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammar_checks.h"
#include "test_vocab.h"

namespace sluice::grammar {
namespace {

using test::matches;

TEST(Gbnf, AgreesWithLarkOnTheCorpus) {
  const auto data = test::load_cases("gbnf_cases.json");
  auto vocab = test::byte_vocab();
  ASSERT_GE(data["cases"].size(), 8u);
  for (const auto& c : data["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto g = std::make_shared<const CompiledGrammar>(gbnf_grammar(c["gbnf"].get<std::string>()), vocab);
    for (const auto& s : c["accept"]) EXPECT_TRUE(matches(g, s.get<std::string>())) << s;
    for (const auto& s : c["reject"]) EXPECT_FALSE(matches(g, s.get<std::string>())) << s;
    // The mask agrees with accepts() along one greedy walk (multi-byte tokens included).
    Matcher m(g);
    std::vector<uint64_t> mask(vocab->mask_words());
    for (int step = 0; step < 12 && !m.is_terminated(); ++step) {
      m.fill_mask(mask);
      int32_t pick = -1;
      for (int32_t t = vocab->n_vocab() - 1; t >= 0; --t) {
        const bool bit = (mask[t >> 6] >> (t & 63)) & 1;
        ASSERT_EQ(bit, m.accepts(t)) << "token " << t << " step " << step;
        if (bit && pick < 0) pick = t;
      }
      ASSERT_GE(pick, 0);
      m.advance(pick);
    }
  }
}

TEST(Gbnf, TokenTerminals) {
  auto vocab = test::byte_vocab();
  auto g = std::make_shared<const CompiledGrammar>(gbnf_grammar("root ::= <[290]> [a-z]+ <[290]>\n"), vocab);
  Matcher m(g);
  EXPECT_FALSE(m.accepts(1 + 'a'));
  ASSERT_TRUE(m.advance(290));
  ASSERT_TRUE(m.advance(1 + 'q'));
  ASSERT_TRUE(m.advance(290));
  EXPECT_TRUE(m.is_complete());
}

void expect_error(const std::string& text, const std::string& needle) {
  test::expect_error_naming([](const std::string& t) { return gbnf_grammar(t); }, text, needle);
}

TEST(Gbnf, ErrorsNameTheProblemAndPlace) {
  expect_error("root ::= \"a\" missing\n", "'missing' is used but never defined");
  expect_error("start ::= \"a\"\n", "no 'root' rule");
  expect_error("root ::= \"a\n", "unterminated string");
  expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
  expect_error("root ::= (\"a\"\n", "line 2");
  expect_error("root ::= [\xC3\xA9]\n", "non-ASCII");
  expect_error("root ::= root \"a\" | \"b\"\n", "left-recursive");
  // A lone surrogate would reach the client as CESU bytes (U+FFFD x3): refused at compile time.
  expect_error("root ::= \"\\uD800\"\n", "surrogate");
  expect_error("root ::= [\\uDC00-\\uDFFF]\n", "surrogate");
  expect_error("root ::= \"\\U00110000\"\n", "past U+10FFFF");
  EXPECT_NO_THROW(gbnf_grammar("root ::= \"\\U0010FFFF\\uE000\"\n"));
}

}  // namespace
}  // namespace sluice::grammar
