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

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "grammar/grammar.h"
#include "server/model_context.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace sluice::grammar {
class CompiledGrammar;
}

namespace sluice::server {

struct ToolConstraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;  // null: unconstrained
  std::optional<int32_t> trigger;                           // the grammar starts after this token
  bool stop_when_complete = true;                           // false: lazy, re-armed per call
  std::vector<int32_t> banned_ids;
};

// The id of the one token whose text is `text`, if the vocabulary has one.
std::optional<int32_t> single_token(const Tokenizer& tok, std::string_view text);

// Ids of Gemma 4's tool markup, -1 where the vocabulary lacks the token (the grammar then
// spells its text in bytes).
struct MarkupTokens {
  int32_t open = -1;   // <|tool_call>
  int32_t close = -1;  // <tool_call|>
  int32_t quote = -1;  // <|"|>
};

// The grammar for `t` (which names the tools to allow): eager (from the opener; one call, or
// one or more with t.parallel) or lazy (the body after `<|tool_call>`, one call a time). Throws ApiError (400) naming a
// tool whose schema the grammar cannot express.
grammar::Grammar tool_call_grammar(const ToolsParams& t, ToolFormat f, bool lazy, const MarkupTokens& ids);

// What the request needs; ApiError (400) naming the tool whose parameters cannot be compiled.
ToolConstraint tool_constraint(const ToolsParams& t, ToolFormat f, const ModelContext& m, bool thinking);

}  // namespace sluice::server
