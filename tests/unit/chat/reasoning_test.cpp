// Gemma 4 output parsing: reasoning inside <|channel>thought\n ... <channel|>, content
// elsewhere, with markers split across streamed chunks.
#include <gtest/gtest.h>

#include "chat/reasoning.h"

namespace sluice::chat {
namespace {

ParsedText stream(const std::vector<std::string>& chunks) {
  Gemma4OutputParser p;
  ParsedText all;
  for (const auto& c : chunks) {
    ParsedText d = p.feed(c);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  ParsedText d = p.finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

TEST(Gemma4Output, SplitsReasoningAndContent) {
  auto r = Gemma4OutputParser::parse("<|channel>thought\nLet me think.<channel|>The answer is 4.");
  EXPECT_EQ(r.reasoning, "Let me think.");
  EXPECT_EQ(r.content, "The answer is 4.");
  r = Gemma4OutputParser::parse("Plain answer, no thinking.");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Plain answer, no thinking.");
  r = Gemma4OutputParser::parse("<|channel>no channel name<channel|>x");  // "thought\n" is optional
  EXPECT_EQ(r.reasoning, "no channel name");
  EXPECT_EQ(r.content, "x");
  r = Gemma4OutputParser::parse("a<|channel>thought\n1<channel|>b<|channel>thought\n2<channel|>c");
  EXPECT_EQ(r.reasoning, "12");
  EXPECT_EQ(r.content, "abc");
  r = Gemma4OutputParser::parse("<|channel>thought\nstill thinking when stopped");
  EXPECT_EQ(r.reasoning, "still thinking when stopped");
  EXPECT_EQ(r.content, "");
  r = Gemma4OutputParser::parse("text ending in a partial <|chan");
  EXPECT_EQ(r.content, "text ending in a partial <|chan");  // not a marker after all
}

TEST(Gemma4Output, EverySplitPointGivesTheSameResult) {
  const std::string text = "Hi <|channel>thought\nstep 1 < 2, <channel and <|channel>? no<channel|> done <channel|";
  const ParsedText whole = Gemma4OutputParser::parse(text);
  EXPECT_EQ(whole.content, "Hi  done <channel|");
  EXPECT_EQ(whole.reasoning, "step 1 < 2, <channel and <|channel>? no");
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 3) {
      const ParsedText got = stream({text.substr(0, a), text.substr(a, b - a), text.substr(b)});
      ASSERT_EQ(got.content, whole.content) << a << "," << b;
      ASSERT_EQ(got.reasoning, whole.reasoning) << a << "," << b;
    }
  }
}

TEST(Gemma4Output, CharacterByCharacterHoldsBackOnlyPossibleMarkers) {
  Gemma4OutputParser p;
  std::string content, reasoning;
  const std::string text = "ab<|channel>thought\nxy<channel|>cd";
  std::vector<std::string> seen;
  for (char c : text) {
    ParsedText d = p.feed(std::string(1, c));
    content += d.content;
    reasoning += d.reasoning;
    seen.push_back(content + "|" + reasoning);
  }
  // "a" and "b" are emitted at once; "<" is held until it cannot start "<|channel>".
  EXPECT_EQ(seen[0], "a|");
  EXPECT_EQ(seen[1], "ab|");
  EXPECT_EQ(seen[2], "ab|");
  ParsedText d = p.finish();
  EXPECT_EQ(content + d.content, "abcd");
  EXPECT_EQ(reasoning + d.reasoning, "xy");
}

}  // namespace
}  // namespace sluice::chat
