// The types of tool calling in a chat format (docs/tools.md): the functions a request offers,
// how the model writes a call, a call taken out of its output, the grammar that enforces
// tool_choice, and the error for a tool the format cannot express. The server fills
// ToolsParams from the OpenAI request; tool_prompt.h, tool_grammar.h and tool_calls.h use it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sluice::grammar {
class CompiledGrammar;
}

namespace sluice::chat {

// How the model writes a call: Gemma 4's native tokens, or the JSON convention sluice puts in
// the prompt for models without tool tokens (Gemma 3).
enum class ToolFormat { kGemma4Native, kJson };

// A function the client offers (`tools[i]`, type "function").
struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // JSON Schema as sent, keys in order
  bool strict = false;
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ToolsParams {
  std::vector<ToolSpec> tools;
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;     // kNamed: the function's name (one of `tools`)
  bool parallel = true;  // parallel_tool_calls
  // Calls are parsed out of the reply: tools offered and not tool_choice "none".
  bool active() const { return !tools.empty() && choice != ToolChoice::kNone; }
};

// A whole call, or (from ToolCallParser) a piece of one: the call's first piece has
// `first` set, its id and name; the others carry the same id and the next fragment of the
// arguments. The pieces' arguments concatenate to the compact JSON object text.
struct ToolCall {
  std::string id;  // "call_" + 24 hex digits
  std::string name;
  std::string arguments;  // compact JSON object text (a fragment of it in a later piece)
  bool first = true;      // opens the call
  bool last = true;       // the call is complete
};

// Ids of Gemma 4's tool markup, -1 where the vocabulary lacks the token (the grammar then
// spells its text in bytes).
struct MarkupTokens {
  int32_t open = -1;   // <|tool_call>
  int32_t close = -1;  // <tool_call|>
  int32_t quote = -1;  // <|"|>
};

// What a request's tools ask of decoding: a grammar that enforces tool_choice, and banned ids.
struct ToolConstraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;  // null: unconstrained
  std::optional<int32_t> trigger;                           // the grammar starts after this token
  bool stop_when_complete = true;                           // false: lazy, re-armed per call
  std::vector<int32_t> banned_ids;
};

// A request's tools or tool messages that the format cannot take: `param` names the request
// parameter at fault ("tools", "messages"); message() is the whole text, NULs included (what()
// stops at the first), and starts with the parameter's name.
class ToolError : public Error {
 public:
  ToolError(std::string param, std::string message) : Error(message), param_(std::move(param)), message_(message) {}
  const std::string& param() const { return param_; }
  const std::string& message() const { return message_; }

 private:
  std::string param_, message_;
};

// A ToolError for `param`: "param: message".
[[noreturn]] inline void bad_tool_param(const std::string& param, const std::string& message) {
  throw ToolError(param, param + ": " + message);
}

}  // namespace sluice::chat
