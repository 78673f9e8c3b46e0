// Tools and tool messages → what the chat template renders (docs/tools.md).
//
// Gemma 4 (native format): the template receives `tools` ([{type, function: {name,
// description, parameters}}], each schema with local `$ref`s inlined and `anyOf`/`oneOf`/
// `allOf` folded into the plain keywords its declaration syntax knows), and the messages as
// it expects them: a template that reads `tool_responses` gets each assistant tool-call
// message merged with the tool results after it ([{name, response}]) and with the
// assistant's answer after those, so they render as one model turn (gemma4.md §4.5); any
// other template gets the `tool` messages as they are.
//
// Gemma 3 (no tool tokens): the JSON convention. A system text lists the tools and asks for
// `{"tool_call": {"name": ..., "arguments": {...}}}`; earlier assistant calls are written back
// that way, and tool results become a user turn "Tool result (NAME): ...".
#pragma once

#include <nlohmann/json.hpp>

#include "chat/tools.h"

namespace sluice::chat {

// A schema as the declaration renders it: `$ref` to `#/$defs/X` or `#/definitions/X` inlined
// (a recursive one becomes {"type": "object"}), the combinators folded (a null branch becomes
// `nullable: true`, several types a type list), `$defs` dropped. Throws ToolError ("tools") for
// a `$ref` it cannot resolve.
nlohmann::json schema_for_declaration(const nlohmann::ordered_json& schema);

// The `tools` value for the template.
nlohmann::json template_tools(const ToolsParams& t);

// The messages for the template; `merge_responses`: the template reads `tool_responses`.
// Throws ToolError ("messages") for a tool result over request_json_limits().
nlohmann::json template_messages(const nlohmann::json& messages, ToolFormat f, bool merge_responses,
                                 const ToolsParams& tools);

// What the template renders for a request with tools: the messages (template_messages), and
// for the native format with tools offered, `tools` (template_tools) added to `kwargs`.
nlohmann::json template_input(const nlohmann::json& messages, const ToolsParams& tools, ToolFormat f,
                              bool merge_responses, nlohmann::json& kwargs);

// The Gemma 3 convention's system text listing the tools.
std::string json_convention_text(const ToolsParams& t);

}  // namespace sluice::chat
