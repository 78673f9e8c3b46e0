// Tool-call parsing on canned model text (no model): Gemma 4 native blocks and the JSON
// convention, whole and split into every possible pair of stream chunks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/tool_calls.h"

namespace sluice::chat {
namespace {

struct Out {
  std::string content;
  std::vector<ToolCall> calls;
};

// Pieces of a call reassembled as a client does: a first piece opens a call, later ones
// append to the call with their id.
Out run(ToolFormat f, const std::vector<std::string>& chunks, bool incremental = false) {
  ToolCallParser p(f, incremental);
  Out o;
  auto take = [&](ToolDelta d) {
    o.content += d.content;
    for (auto& c : d.calls) {
      if (c.first) {
        EXPECT_FALSE(c.name.empty());
        o.calls.push_back(c);
      } else {
        EXPECT_TRUE(!o.calls.empty() && o.calls.back().id == c.id && !o.calls.back().last);
        o.calls.back().arguments += c.arguments;
        o.calls.back().last = c.last;
      }
    }
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

TEST(NativeArgs, PrefixGrowsToTheWholeJson) {
  for (const std::string text : {std::string(R"({city:<|"|>Pa"ris\ é<|"|>,n:42,x:-1.5e3,ok:true,none:null,)"
                                             R"(obj:{a:[1,<|"|>b<|"|>,{c:false}],e:{},f:[]},arr:[]})"),
                                 std::string("{}"), std::string(R"({ a : <|"|>x<|"|> , "b":"y\n"})")}) {
    const std::string whole = native_json_prefix(text);
    EXPECT_EQ(whole, native_value_to_json(text)->dump()) << text;
    std::string last;
    for (size_t k = 0; k <= text.size(); ++k) {
      const std::string p = native_json_prefix(text.substr(0, k));
      EXPECT_EQ(whole.compare(0, p.size(), p), 0) << "cut " << k << ": " << p;
      EXPECT_EQ(p.compare(0, last.size(), last), 0) << "cut " << k;
      last = p;
    }
  }
  EXPECT_EQ(native_json_prefix("{a:tru"), "{\"a\":");  // a partial literal is held back
  EXPECT_EQ(native_json_prefix("{a:1."), "{\"a\":");
  EXPECT_EQ(native_json_prefix("{a:<|\"|>xy<|\""), "{\"a\":\"xy");     // and a partial quote
  EXPECT_EQ(native_json_prefix("{a:1,b:}x,c:2}"), "{\"a\":1,\"b\":");  // nothing after a malformed part
}

TEST(ToolCallParser, IncrementalPiecesReassembleToTheWholeCall) {
  const std::string text =
      "Hi <|tool_call>call:f{s:<|\"|>long text, with: commas<|\"|>,n:[1,2.5,{k:null}]}<tool_call|>"
      "<|tool_call>call:g{}<tool_call|>";
  const Out whole = run(ToolFormat::kGemma4Native, {text});
  ASSERT_EQ(whole.calls.size(), 2u);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const Out o = run(ToolFormat::kGemma4Native, {text.substr(0, cut), text.substr(cut)}, true);
    EXPECT_EQ(o.content, "Hi ");
    ASSERT_EQ(o.calls.size(), 2u) << cut;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(o.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(o.calls[i].arguments, whole.calls[i].arguments) << cut;
      EXPECT_TRUE(o.calls[i].last);
    }
  }
  // Byte by byte: the first piece comes at the brace, the arguments in many fragments.
  ToolCallParser p(ToolFormat::kGemma4Native, true);
  int pieces = 0;
  for (char c : text) pieces += static_cast<int>(p.feed(std::string(1, c)).calls.size());
  EXPECT_GT(pieces, 8);
  // Cut short (max_tokens): the call ends with the arguments so far.
  const Out cut = run(ToolFormat::kGemma4Native, {"<|tool_call>call:f{a:<|\"|>xy"}, true);
  ASSERT_EQ(cut.calls.size(), 1u);
  EXPECT_EQ(cut.calls[0].arguments, "{\"a\":\"xy");
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
}  // namespace sluice::chat
