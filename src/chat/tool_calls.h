// Tool calls in model output → OpenAI `tool_calls` (docs/tools.md, gemma4.md §4.5).
//
// Two formats:
//   * Gemma 4 native: `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:42,...}<tool_call|>`,
//     parallel calls as consecutive blocks;
//   * the JSON convention sluice puts in the prompt for models without tool tokens (Gemma 3):
//     `{"tool_call": {"name": NAME, "arguments": {...}}}`, one object per call.
//
// ToolCallParser consumes the visible content as it streams (after stop strings and the
// thought channel) and splits it into plain content and whole calls. Text that could still
// become a call opener (`<|tool_c`, `{"tool`) is held back; a call is emitted only once it is
// complete and parses, so the argument text of a streamed call equals the non-streamed one.
// A call that does not parse (or never closes) comes back as content, unchanged: lenient,
// never an error.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tools.h"

namespace sluice::chat {

// Gemma 4 native argument text (`{key:<|"|>v<|"|>,n:1,...}` or any native value) → JSON, in
// the model's key order; nullopt when it is not one well-formed value.
std::optional<nlohmann::ordered_json> native_value_to_json(std::string_view text);

// The JSON text for the complete part of a native value that may be cut short: keys, strings
// (their content as it arrives, a partial `<|"|>` held back) and scalars (once delimited, so a
// partial `tru` or `1.` is held back). Growing the text only appends to the result; for a
// whole well-formed value (no repeated keys) it is the compact dump of native_value_to_json.
// Text after a malformed part adds nothing.
std::string native_json_prefix(std::string_view text);

// `call:NAME{...}` (the text between the native markers) → the call; nullopt when malformed.
std::optional<ToolCall> parse_native_call(std::string_view body);
// `{"tool_call": {"name": ..., "arguments": {...}}}` → the call; nullopt when malformed.
std::optional<ToolCall> parse_json_call(std::string_view object_text);

struct ToolDelta {
  std::string content;          // plain text released now
  std::vector<ToolCall> calls;  // calls completed now, in order
};

class ToolCallParser {
 public:
  // `incremental` (native format): a call's first piece goes out
  // once `call:NAME{` is seen and its arguments follow as they arrive; otherwise a call goes
  // out whole once it has parsed, and one that does not parse becomes content.
  explicit ToolCallParser(ToolFormat f, bool incremental = false)
      : format_(f), incremental_(incremental && f == ToolFormat::kGemma4Native) {}
  ToolDelta feed(std::string_view text);
  ToolDelta finish();  // end of generation: an unfinished call is parsed leniently or is content
  int n_calls() const { return n_calls_; }

 private:
  void scan(ToolDelta& d, bool final);
  bool take_call(ToolDelta& d, bool final);
  bool stream_call(ToolDelta& d, bool final);
  void emit_content(ToolDelta& d, std::string text);

  ToolFormat format_;
  bool incremental_;
  std::string stream_id_;  // the call being streamed, if any
  size_t args_at_ = 0;     // where its arguments start in buf_
  std::string sent_;       // its argument text sent so far
  std::string buf_;        // text not yet decided
  bool in_call_ = false;
  std::string ws_;  // whitespace after a call, shown only if more content follows
  int n_calls_ = 0;
};

std::string new_tool_call_id();

}  // namespace sluice::chat
