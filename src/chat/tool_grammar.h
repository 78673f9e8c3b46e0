// tool_choice enforced while decoding (docs/tools.md): the grammar a chat request with tools
// hands the engine, and the tokens it bans.
//
//   required / named  from the first generated token, one call (with parallel_tool_calls, the
//                     default: one or more in a row, the model ending the list):
//                     Gemma 4  `<|tool_call>call:NAME{args}<tool_call|>`, args in the native
//                              syntax (grammar/json_schema.h, kGemmaNative) of NAME's schema;
//                     Gemma 3  `{"tool_call":{"name":"NAME","arguments":ARGS}}`, ARGS as JSON;
//                     `required` allows any of the tools, a name only that one.
//   auto              Gemma 4 with `<|tool_call>` in the vocabulary and a `strict` tool: a lazy
//                     grammar armed by that token, the call body per schema (strict tools) or
//                     any object (the others); it disarms after each call. Otherwise nothing.
//   none              `<|tool_call>` banned (when the vocabulary has it).
// With thinking on, an eager grammar waits for the token that closes the thought channel.
#pragma once

#include <functional>

#include "chat/format.h"
#include "chat/tools.h"
#include "grammar/grammar.h"

namespace sluice::grammar {
class GrammarCache;
}

namespace sluice::chat {

// The grammar for `t` (which names the tools to allow): eager (from the opener; one call, or
// one or more with t.parallel) or lazy (the body after `<|tool_call>`, one call a time). Throws
// ToolError ("tools") naming a tool whose schema the grammar cannot express.
grammar::Grammar tool_call_grammar(const ToolsParams& t, ToolFormat f, bool lazy, const MarkupTokens& ids);

// What the request needs, its grammar compiled through the cache `grammars()` returns (one per
// vocabulary, built on first use: called only when a grammar is needed); ToolError ("tools")
// naming the tool whose parameters cannot be compiled.
ToolConstraint tool_constraint(const ToolsParams& t, const ChatFormat& f,
                               const std::function<grammar::GrammarCache&()>& grammars, bool thinking);

}  // namespace sluice::chat
