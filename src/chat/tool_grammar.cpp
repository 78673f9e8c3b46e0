#include "chat/tool_grammar.h"

#include <string>

#include "base/error.h"
#include "grammar/compiled.h"
#include "grammar/json_schema.h"

namespace sluice::chat {

using grammar::Expr;
using ojson = nlohmann::ordered_json;

namespace {

// A tool's arguments are an object: a schema without a type gets one.
ojson argument_schema(const ToolSpec& s, bool loose) {
  if (loose) return {{"type", "object"}};
  ojson schema = s.parameters;
  if (!schema.contains("type") && !schema.contains("$ref") && !schema.contains("anyOf") && !schema.contains("oneOf") &&
      !schema.contains("allOf") && !schema.contains("enum") && !schema.contains("const"))
    schema["type"] = "object";
  return schema;
}

bool allowed(const ToolsParams& t, const ToolSpec& s) { return t.choice != ToolChoice::kNamed || s.name == t.named; }

// A markup token by id when the vocabulary has it, else its text.
Expr markup(int32_t id, const char* text) { return id >= 0 ? grammar::token(id) : grammar::lit(text); }

// Several calls in a row: an eager grammar under parallel_tool_calls (a lazy one re-arms per call).
bool several_calls(const ToolsParams& t, bool lazy) { return !lazy && t.parallel; }

std::string cache_key(const ToolsParams& t, ToolFormat f, bool lazy, const MarkupTokens& ids) {
  ojson k = {{"f", static_cast<int>(f)},
             {"lazy", lazy},
             {"several", several_calls(t, lazy)},
             {"ids", {ids.open, ids.close, ids.quote}},
             {"tools", ojson::array()}};
  for (const ToolSpec& s : t.tools)
    if (allowed(t, s)) k["tools"].push_back({s.name, s.strict, s.parameters});
  return "tools:" + k.dump();
}

}  // namespace

grammar::Grammar tool_call_grammar(const ToolsParams& t, ToolFormat f, bool lazy, const MarkupTokens& ids) {
  grammar::JsonSchemaOptions o;
  o.syntax = f == ToolFormat::kGemma4Native ? grammar::JsonSchemaOptions::Syntax::kGemmaNative
                                            : grammar::JsonSchemaOptions::Syntax::kJson;
  o.native_quote_token = ids.quote;
  grammar::GrammarBuilder b(o.limits);
  std::vector<Expr> calls;
  for (const ToolSpec& s : t.tools) {
    if (!allowed(t, s)) continue;
    uint32_t args = 0;
    try {
      args = grammar::add_json_schema(b, argument_schema(s, lazy && !s.strict), o);
    } catch (const Error& e) {
      bad_tool_param("tools", "function '" + s.name + "': its parameters cannot be enforced: " + e.what());
    }
    if (f == ToolFormat::kGemma4Native)
      calls.push_back(
          grammar::seq({lazy ? grammar::empty() : markup(ids.open, "<|tool_call>"), grammar::lit("call:" + s.name),
                        grammar::ref(args), markup(ids.close, "<tool_call|>")}));
    else
      calls.push_back(
          grammar::seq({grammar::lit("{\"tool_call\":{\"name\":" + nlohmann::json(s.name).dump() + ",\"arguments\":"),
                        grammar::ref(args), grammar::lit("}}")}));
  }
  const uint32_t call = b.add("tool_call", grammar::alt(std::move(calls)));
  if (!several_calls(t, lazy)) return b.finish(call);
  return b.finish(b.add("tool_calls", grammar::plus(grammar::ref(call))));
}

ToolConstraint tool_constraint(const ToolsParams& t, const ChatFormat& f,
                               const std::function<grammar::GrammarCache&()>& grammars, bool thinking) {
  ToolConstraint c;
  if (t.tools.empty()) return c;
  const std::optional<int32_t> opener = f.tool.open >= 0 ? std::optional<int32_t>(f.tool.open) : std::nullopt;
  if (t.choice == ToolChoice::kNone) {
    if (opener) c.banned_ids.push_back(*opener);
    return c;
  }
  bool lazy = false;
  if (t.choice == ToolChoice::kAuto) {
    bool any_strict = false;
    for (const ToolSpec& s : t.tools) any_strict |= s.strict;
    if (f.tool_format != ToolFormat::kGemma4Native || !opener || !any_strict) return c;  // lenient parse only
    lazy = true;
    c.trigger = opener;
    c.stop_when_complete = false;
  } else if (thinking && f.channel_close >= 0) {
    c.trigger = f.channel_close;
  }
  try {
    c.grammar = grammars().get(cache_key(t, f.tool_format, lazy, f.tool),
                               [&] { return tool_call_grammar(t, f.tool_format, lazy, f.tool); });
  } catch (const ToolError&) {
    throw;
  } catch (const Error& e) {
    bad_tool_param("tools", std::string("the tool-call grammar cannot be built: ") + e.what());
  }
  return c;
}

}  // namespace sluice::chat
