// Tool-call parsing on canned model text (no model): Gemma 4 native blocks and the JSON
// convention, whole and split into every possible pair of stream chunks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/tool_calls.h"

namespace sluice::server {
namespace {

struct Out {
  std::string content;
  std::vector<ToolCall> calls;
};

Out run(ToolFormat f, const std::vector<std::string>& chunks) {
  ToolCallParser p(f);
  Out o;
  auto take = [&](ToolDelta d) {
    o.content += d.content;
    for (auto& c : d.calls) o.calls.push_back(c);
  };
  for (const auto& c : chunks) take(p.feed(c));
  take(p.finish());
  return o;
}

// The same result however the text is cut into two chunks, or fed byte by byte.
Out run_all_splits(ToolFormat f, const std::string& text) {
  const Out whole = run(f, {text});
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const Out o = run(f, {text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(o.content, whole.content) << "cut at " << cut;
    EXPECT_EQ(o.calls.size(), whole.calls.size()) << "cut at " << cut;
    for (size_t i = 0; i < o.calls.size() && i < whole.calls.size(); ++i)
      EXPECT_EQ(o.calls[i].arguments, whole.calls[i].arguments);
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(run(f, bytes).content, whole.content);
  return whole;
}

TEST(NativeArgs, ValuesBecomeJson) {
  auto v = native_value_to_json(R"({city:<|"|>Paris, "FR"<|"|>,n:42,x:-1.5e3,ok:true,none:null,)"
                                R"(obj:{a:[1,<|"|>b<|"|>,{c:false}]},arr:[]})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->dump(), R"({"city":"Paris, \"FR\"","n":42,"x":-1500.0,"ok":true,"none":null,)"
                       R"("obj":{"a":[1,"b",{"c":false}]},"arr":[]})");
  EXPECT_EQ(native_value_to_json("{}")->dump(), "{}");
  EXPECT_EQ(native_value_to_json(R"({ a : <|"|>x<|"|> , "b":"y"})")->dump(), R"({"a":"x","b":"y"})");
}

TEST(NativeArgs, MalformedIsNullopt) {
  for (const char* bad : {"", "{", "{a:}", "{a:1,}", "{a 1}", "{a:<|\"|>open}", "{a:tru}", "{a:1} x", "[1,2",
                          "{a:{b:{c:1}}", "{:1}", "{a:1.2.3}"})
    EXPECT_FALSE(native_value_to_json(bad)) << bad;
  std::string deep(200, '[');
  deep += std::string(200, ']');
  EXPECT_FALSE(native_value_to_json(deep));  // over the depth limit, not a stack overflow
}

TEST(ToolCallParser, NativeCallAfterContent) {
  const Out o = run_all_splits(ToolFormat::kGemma4Native,
                               "Let me look.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>");
  EXPECT_EQ(o.content, "Let me look.");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(o.calls[0].arguments, R"({"city":"Paris","days":3})");
  EXPECT_EQ(o.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(o.calls[0].id.size(), 5u + 24u);
}

TEST(ToolCallParser, ParallelCallsAreSeparateEntries) {
  const Out o = run_all_splits(
      ToolFormat::kGemma4Native,
      "<|tool_call>call:a{x:1}<tool_call|>\n<|tool_call>call:b{y:<|\"|>two<|\"|>}<tool_call|>\n");
  EXPECT_EQ(o.content, "");  // whitespace between and after calls is dropped
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].name, "a");
  EXPECT_EQ(o.calls[1].name, "b");
  EXPECT_EQ(o.calls[1].arguments, R"({"y":"two"})");
  EXPECT_NE(o.calls[0].id, o.calls[1].id);
}

TEST(ToolCallParser, MalformedCallIsContent) {
  for (const std::string text : {"<|tool_call>call:f{x:}<tool_call|>", "<|tool_call>f{x:1}<tool_call|>",
                                 "<|tool_call>call:bad name{x:1}<tool_call|>", "<|tool_call>call:f{x:1", "<|tool_call>",
                                 "<|tool_c", "text <|tool"}) {
    const Out o = run_all_splits(ToolFormat::kGemma4Native, text);
    EXPECT_TRUE(o.calls.empty()) << text;
    EXPECT_EQ(o.content, text);
  }
}

TEST(ToolCallParser, InvalidUtf8InAnArgumentIsReplacedNotThrown) {
  const Out o = run(ToolFormat::kGemma4Native, {"<|tool_call>call:f{s:<|\"|>a\xff\xc3<|\"|>}<tool_call|>"});
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments, "{\"s\":\"a\xef\xbf\xbd\xef\xbf\xbd\"}");
}

TEST(ToolCallParser, UnclosedButCompleteCallAtTheEnd) {
  // Generation stopped at <|tool_response>, which is a stop token and never reaches the text.
  const Out o = run(ToolFormat::kGemma4Native, {"<|tool_call>call:f{x:1}"});
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments, R"({"x":1})");
}

TEST(ToolCallParser, PartialOpenerIsHeldBack) {
  ToolCallParser p(ToolFormat::kGemma4Native);
  EXPECT_EQ(p.feed("Hi <|tool").content, "Hi ");
  EXPECT_EQ(p.feed("box").content, "<|toolbox");  // not an opener after all
  ToolDelta d = p.feed("<|tool_call>call:f{a:tr");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.calls.empty());
  d = p.feed("ue}<tool_call|>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"a":true})");
}

TEST(ToolCallParser, JsonConvention) {
  const Out o = run_all_splits(ToolFormat::kJson,
                               "Sure. {\"tool_call\":{\"name\":\"f\",\"arguments\":{\"q\":\"a}b\\\"\",\"n\":[1,{}]}}}"
                               "{\"tool_call\": {\"name\": \"g\", \"arguments\": {}}} ");
  EXPECT_EQ(o.content, "Sure. ");
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].arguments, R"({"q":"a}b\"","n":[1,{}]})");
  EXPECT_EQ(o.calls[1].name, "g");
  for (const std::string text : {"{\"tool_call\":{\"name\":\"f\"", "{\"tool_call\":1}", "{\"other\":1}",
                                 "{\"tool_call\":{\"name\":\"f\",\"arguments\":[1]}}"}) {
    const Out bad = run_all_splits(ToolFormat::kJson, text);
    EXPECT_TRUE(bad.calls.empty()) << text;
    EXPECT_EQ(bad.content, text);
  }
}

}  // namespace
}  // namespace sluice::server
