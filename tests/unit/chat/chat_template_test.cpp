// Built-in Gemma formats against the rendered examples of tokenizer.md §10 / gemma4.md §4.4,
// plus stop tokens (tokenizer.md §11). (tests/python/test_chat_templates.py checks the same templates
// against Python jinja2 over generated conversations.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chat/builtin_templates.h"
#include "chat/chat_template.h"

namespace sluice::chat {
namespace {

using nlohmann::json;

std::string gemma(ChatArch arch, const json& messages, bool gen, const json& kwargs = json::object(),
                  const BuiltinOptions& opt = {}) {
  ChatTemplate t(builtin_template(arch, opt), "<bos>", "<eos>");
  return t.render(messages, gen, kwargs);
}

json msgs(std::initializer_list<std::pair<const char*, const char*>> m) {
  json a = json::array();
  for (const auto& [role, content] : m) a.push_back({{"role", role}, {"content", content}});
  return a;
}

TEST(Gemma3Template, SpecExample) {
  // tokenizer.md §10.1: system, user, assistant, user, with generation prompt.
  const auto m = msgs({{"system", "You are terse."}, {"user", "Hi!"}, {"assistant", "Hello."}, {"user", "Bye"}});
  EXPECT_EQ(gemma(ChatArch::Gemma3, m, true),
            "<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(Gemma3Template, ContentRules) {
  // The system text is not trimmed, turn contents are; list content: images and trimmed text.
  json m = json::array(
      {{{"role", "system"}, {"content", json::array({{{"type", "text"}, {"text", " sys "}}})}},
       {{"role", "user"}, {"content", json::array({{{"type", "image"}}, {{"type", "text"}, {"text", "  look \n"}}})}},
       {{"role", "assistant"}, {"content", "  ok  "}}});
  EXPECT_EQ(gemma(ChatArch::Gemma3, m, false),
            "<bos><start_of_turn>user\n sys \n\n<start_of_image>look<end_of_turn>\n"
            "<start_of_turn>model\nok<end_of_turn>\n");
}

TEST(Gemma3Template, RolesMustAlternate) {
  try {
    gemma(ChatArch::Gemma3, msgs({{"user", "a"}, {"user", "b"}}), true);
    FAIL() << "expected an error";
  } catch (const sluice::Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("Conversation roles must alternate user/assistant/user/assistant/..."));
  }
  EXPECT_THROW(gemma(ChatArch::Gemma3, msgs({{"assistant", "a"}}), true), sluice::Error);
  EXPECT_THROW(gemma(ChatArch::Gemma3, json::array(), true), sluice::Error);
}

TEST(Gemma4Template, SpecExamples) {
  const auto hi = msgs({{"user", "Hi!"}});
  // tokenizer.md §10.2: thinking off, llama.cpp template: empty thought block after the prompt.
  EXPECT_EQ(gemma(ChatArch::Gemma4, hi, true),
            "<bos><|turn>user\nHi!<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  // Same, E-series template.
  EXPECT_EQ(gemma(ChatArch::Gemma4, hi, true, json::object(), BuiltinOptions{.gemma4_empty_thought_block = false}),
            "<bos><|turn>user\nHi!<turn|>\n<|turn>model\n");
  // System "Be brief.", thinking on.
  EXPECT_EQ(
      gemma(ChatArch::Gemma4, msgs({{"system", "Be brief."}, {"user", "Hi!"}}), true, {{"enable_thinking", true}}),
      "<bos><|turn>system\n<|think|>Be brief.<turn|>\n<|turn>user\nHi!<turn|>\n<|turn>model\n");
}

TEST(Gemma4Template, SystemTurnOnlyWhenNeeded) {
  EXPECT_EQ(gemma(ChatArch::Gemma4, msgs({{"user", "x"}}), false), "<bos><|turn>user\nx<turn|>\n");
  EXPECT_EQ(gemma(ChatArch::Gemma4, msgs({{"user", "x"}}), false, {{"enable_thinking", true}}),
            "<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nx<turn|>\n");
  EXPECT_EQ(gemma(ChatArch::Gemma4, msgs({{"developer", " dev "}, {"user", "x"}}), false),
            "<bos><|turn>system\ndev<turn|>\n<|turn>user\nx<turn|>\n");
}

TEST(Gemma4Template, ToolsCallsAndResponses) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather now", "parameters": {"type": "object", "required": ["city"],
      "properties": {"city": {"type": "string", "description": "City"},
                     "unit": {"type": "string", "enum": ["c", "f"]}}}}}])");
  const json m = json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
          "function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_responses": [{"name": "get_weather", "response": {"temp": 21, "sky": "clear"}}]}])");
  EXPECT_EQ(
      gemma(ChatArch::Gemma4, m, true, {{"tools", tools}}),
      "<bos><|turn>system\n"
      "<|tool>declaration:get_weather{description:<|\"|>Weather now<|\"|>,parameters:{properties:{"
      "city:{description:<|\"|>City<|\"|>,type:<|\"|>STRING<|\"|>},"
      "unit:{enum:[<|\"|>c<|\"|>,<|\"|>f<|\"|>],type:<|\"|>STRING<|\"|>}},"
      "required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n"
      "<|turn>user\nWeather in Paris?<turn|>\n"
      "<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2,unit:<|\"|>c<|\"|>}<tool_call|><turn|>\n"
      "<|turn>tool\n<|tool_response>response:get_weather{sky:<|\"|>clear<|\"|>,temp:21}<tool_response|>");
  // (no empty thought block after the tool response: Google's template ends the prompt there)
}

TEST(Gemma4Template, ModelHistoryLosesThinkingAndMediaBecomesMarkers) {
  const json m = json::parse(R"([
      {"role": "user", "content": [{"type": "text", "text": " what "}, {"type": "image"},
                                   {"type": "audio"}, {"type": "video"}]},
      {"role": "assistant", "content": "<|channel>thought\nhidden<channel|>  The answer. "}])");
  EXPECT_EQ(gemma(ChatArch::Gemma4, m, false),
            "<bos><|turn>user\nwhat\n\n<|image|>\n\n<|audio|>\n\n<|video|>\n\n<turn|>\n"
            "<|turn>model\nThe answer.<turn|>\n");
}

TEST(Gemma4Template, ListSystemContentIsItsText) {
  // Deliberate difference from llama.cpp's gemma4.jinja, which prints the list's Python repr.
  const json m = json::parse(R"([{"role": "system", "content": [{"type": "text", "text": " A "},
      {"type": "text", "text": "B"}]}, {"role": "user", "content": "x"}])");
  EXPECT_EQ(gemma(ChatArch::Gemma4, m, false), "<bos><|turn>system\nAB<turn|>\n<|turn>user\nx<turn|>\n");
}

TEST(BuiltinTemplates, BosExactlyOnce) {
  // tokenizer.md §10.3: the template writes bos_token; tokenize without adding another.
  for (ChatArch a : {ChatArch::Gemma3, ChatArch::Gemma4}) {
    const std::string out = gemma(a, msgs({{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", "v"}}), true);
    EXPECT_EQ(out.rfind("<bos>", 0), 0u);
    EXPECT_EQ(out.find("<bos>", 1), std::string::npos);
  }
}

TEST(BuiltinTemplates, ArchFromGguf) {
  EXPECT_EQ(chat_arch_from_gguf("gemma3"), ChatArch::Gemma3);
  EXPECT_EQ(chat_arch_from_gguf("gemma4"), ChatArch::Gemma4);
  EXPECT_THROW(chat_arch_from_gguf("llama"), sluice::Error);
}

TEST(StopTokens, PerArchitecture) {
  // tokenizer.md §11.
  EXPECT_EQ(stop_token_texts(ChatArch::Gemma3), (std::vector<std::string>{"<eos>", "<end_of_turn>"}));
  EXPECT_EQ(stop_token_texts(ChatArch::Gemma4), (std::vector<std::string>{"<eos>", "<turn|>", "<|tool_response>"}));
  EXPECT_EQ(stop_kind(ChatArch::Gemma4, "<|tool_response>"), StopKind::ToolCall);
  EXPECT_EQ(stop_kind(ChatArch::Gemma4, "<turn|>"), StopKind::EndOfTurn);
  EXPECT_EQ(stop_kind(ChatArch::Gemma3, "<end_of_turn>"), StopKind::EndOfTurn);
  EXPECT_EQ(stop_kind(ChatArch::Gemma3, "<eos>"), StopKind::EndOfText);
  EXPECT_EQ(stop_kind(ChatArch::Gemma4, "<|turn>"), std::nullopt);  // a turn opener never stops
  EXPECT_EQ(stop_kind(ChatArch::Gemma4, "</s>"), std::nullopt);     // ordinary text in Gemma 4
  EXPECT_EQ(stop_kind(ChatArch::Gemma3, "<turn|>"), std::nullopt);
}

}  // namespace
}  // namespace sluice::chat
