// The tool_choice grammars (tool_grammar.h) run by the grammar matcher over a byte vocabulary
// plus the three Gemma 4 markup tokens: valid calls are accepted to completion and parse back
// to the same arguments; a wrong function, a schema violation or a JSON-style quote is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "chat/tool_grammar.h"
#include "grammar/compiled.h"
#include "grammar/matcher.h"

namespace sluice::chat {
namespace {

constexpr int32_t kOpen = 256, kClose = 257, kQuote = 258, kEos = 259;

std::shared_ptr<const grammar::TokenVocab> vocab() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  pieces.insert(pieces.end(), {"<|tool_call>", "<tool_call|>", "<|\"|>", ""});
  return std::make_shared<const grammar::TokenVocab>(std::move(pieces), std::vector<int32_t>{kEos});
}

// Text → ids: the markup as its token (when `tokens`), everything else byte by byte.
std::vector<int32_t> ids_of(const std::string& text, bool tokens) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    bool hit = false;
    for (auto [id, s] : {std::pair{kOpen, "<|tool_call>"}, {kClose, "<tool_call|>"}, {kQuote, "<|\"|>"}})
      if (tokens && text.compare(i, std::string(s).size(), s) == 0) {
        out.push_back(id);
        i += std::string(s).size();
        hit = true;
        break;
      }
    if (!hit) out.push_back(static_cast<uint8_t>(text[i++]));
  }
  return out;
}

ToolsParams weather_and_search() {
  ToolsParams t;
  ToolSpec w;
  w.name = "get_weather";
  w.parameters = nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"city":{"type":"string","maxLength":8},"days":{"type":"integer",)"
      R"("minimum":1,"maximum":14}},"required":["city","days"],"additionalProperties":false})");
  ToolSpec s;
  s.name = "search";
  s.parameters = nlohmann::ordered_json::parse(R"({"type":"object","properties":{"q":{"type":"string"}},)"
                                               R"("required":["q"],"additionalProperties":false})");
  t.tools = {w, s};
  t.choice = ToolChoice::kRequired;
  return t;
}

// Whether the grammar accepts all of `text` and is then complete.
bool accepts(const ToolsParams& t, ToolFormat f, const MarkupTokens& ids, const std::string& text, bool lazy = false) {
  auto g = std::make_shared<const grammar::CompiledGrammar>(tool_call_grammar(t, f, lazy, ids), vocab());
  grammar::Matcher m(g);
  for (int32_t id : ids_of(text, ids.open >= 0))
    if (!m.advance(id)) return false;
  return m.is_complete();
}

TEST(ToolGrammar, NativeCallsWithMarkupTokens) {
  const MarkupTokens ids{kOpen, kClose, kQuote};
  const ToolsParams t = weather_and_search();
  const std::string ok = "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:3}<tool_call|>";
  EXPECT_TRUE(accepts(t, ToolFormat::kGemma4Native, ids, ok));
  const auto call = parse_native_call(ok.substr(12, ok.size() - 24));
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments, R"({"city":"Oslo","days":3})");
  EXPECT_TRUE(accepts(t, ToolFormat::kGemma4Native, ids, "<|tool_call>call:search{q:<|\"|><|\"|>}<tool_call|>"));
  for (const char* bad : {"<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:30}<tool_call|>",  // > maximum
                          "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>",          // required
                          "<|tool_call>call:get_weather{city:\"Oslo\",days:3}<tool_call|>",           // JSON quote
                          "<|tool_call>call:other{q:<|\"|>x<|\"|>}<tool_call|>",                      // not a tool
                          "<|tool_call>call:search{q:<|\"|>x<|\"|>,n:1}<tool_call|>",                 // extra key
                          "Sure. <|tool_call>call:search{q:<|\"|>x<|\"|>}<tool_call|>"})              // text first
    EXPECT_FALSE(accepts(t, ToolFormat::kGemma4Native, ids, bad)) << bad;
  ToolsParams named = t;
  named.choice = ToolChoice::kNamed;
  named.named = "search";
  EXPECT_FALSE(accepts(named, ToolFormat::kGemma4Native, ids, ok));
}

TEST(ToolGrammar, NativeCallsSpelledInBytes) {
  const ToolsParams t = weather_and_search();
  EXPECT_TRUE(accepts(t, ToolFormat::kGemma4Native, MarkupTokens{},
                      "<|tool_call>call:get_weather{city:<|\"|>a b<|\"|>,days:14}<tool_call|>"));
}

TEST(ToolGrammar, LazyBodyFollowsStrictSchemasOnly) {
  const MarkupTokens ids{kOpen, kClose, kQuote};
  ToolsParams t = weather_and_search();
  t.choice = ToolChoice::kAuto;
  t.tools[0].strict = true;  // get_weather enforced; search: any object
  EXPECT_TRUE(
      accepts(t, ToolFormat::kGemma4Native, ids, "call:get_weather{city:<|\"|>x<|\"|>,days:2}<tool_call|>", true));
  EXPECT_FALSE(accepts(t, ToolFormat::kGemma4Native, ids, "call:get_weather{city:<|\"|>x<|\"|>}<tool_call|>", true));
  EXPECT_TRUE(accepts(t, ToolFormat::kGemma4Native, ids, "call:search{anything:[1,true]}<tool_call|>", true));
  EXPECT_FALSE(accepts(t, ToolFormat::kGemma4Native, ids, "<|tool_call>call:search{}<tool_call|>", true));
}

// parallel_tool_calls (ToolsParams::parallel, on by default): an eager grammar takes a list of
// one or more calls, each valid; off: exactly one. A lazy grammar is one call a time either way.
TEST(ToolGrammar, ParallelCallsAreAListOfOneOrMore) {
  const MarkupTokens ids{kOpen, kClose, kQuote};
  ToolsParams t = weather_and_search();
  ASSERT_TRUE(t.parallel);
  const std::string a = "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:3}<tool_call|>",
                    b = "<|tool_call>call:search{q:<|\"|>x<|\"|>}<tool_call|>";
  for (ToolFormat f : {ToolFormat::kGemma4Native}) {
    EXPECT_TRUE(accepts(t, f, ids, a));
    EXPECT_TRUE(accepts(t, f, ids, a + b));
    EXPECT_TRUE(accepts(t, f, ids, a + b + a));
    EXPECT_FALSE(accepts(t, f, ids, ""));
    EXPECT_FALSE(accepts(t, f, ids, a + "<|tool_call>call:search{q:1}<tool_call|>"));  // the second one invalid
  }
  const std::string ja = R"({"tool_call":{"name":"search","arguments":{"q":"x"}}})";
  EXPECT_TRUE(accepts(t, ToolFormat::kJson, {}, ja + ja));
  t.parallel = false;
  EXPECT_TRUE(accepts(t, ToolFormat::kGemma4Native, ids, a));
  EXPECT_FALSE(accepts(t, ToolFormat::kGemma4Native, ids, a + b));
  EXPECT_FALSE(accepts(t, ToolFormat::kJson, {}, ja + ja));
  ToolsParams lazy = weather_and_search();
  lazy.choice = ToolChoice::kAuto;
  EXPECT_FALSE(
      accepts(lazy, ToolFormat::kGemma4Native, ids, "call:search{q:1}<tool_call|>call:search{q:2}<tool_call|>", true));
}

TEST(ToolGrammar, JsonConvention) {
  const ToolsParams t = weather_and_search();
  EXPECT_TRUE(accepts(t, ToolFormat::kJson, {}, R"({"tool_call":{"name":"search","arguments":{"q":"x"}}})"));
  EXPECT_FALSE(accepts(t, ToolFormat::kJson, {}, R"({"tool_call":{"name":"search","arguments":{"q":1}}})"));
  EXPECT_FALSE(accepts(t, ToolFormat::kJson, {}, R"({"tool_call":{"name":"nope","arguments":{}}})"));
}

}  // namespace
}  // namespace sluice::chat
