// The text side of one generated choice, on the HTTP thread: token ids → UTF-8-safe text
// (StreamDecoder) → stop strings → when the model reasons, reasoning split from content
// (the thought channel goes to reasoning_content, never to content; chat/reasoning.h) → with
// tools, tool calls split from the content (chat/tool_calls.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "server/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace sluice::server {

using chat::ToolCall;

struct TextDelta {
  std::string content, reasoning;
  std::vector<ToolCall> tool_calls;  // calls completed in this delta
  bool stopped = false;              // a stop string ended the choice
};

class ChoiceText {
 public:
  // Stop strings are checked only after `min_tokens` tokens (as vLLM does). `tools`: parse
  // calls in that format out of the content (special tokens are then decoded as text).
  ChoiceText(const Tokenizer& tok, std::vector<std::string> stops, bool split_reasoning, int32_t min_tokens,
             std::optional<chat::ToolFormat> tools = std::nullopt, bool incremental_calls = false);

  TextDelta push(int32_t token);  // one generated token (not the stop token)
  TextDelta finish();             // end of generation: release held-back text
  bool stopped() const { return stopped_; }

 private:
  void route(const std::string& text, TextDelta& d);
  void add_content(const std::string& text, TextDelta& d);
  void finish_parsers(TextDelta& d);

  StreamDecoder dec_;
  StopStringMatcher stops_;
  std::optional<chat::Gemma4OutputParser> reasoning_;
  std::optional<chat::ToolCallParser> tools_;
  int32_t min_tokens_, n_tokens_ = 0;
  bool stopped_ = false;
};

}  // namespace sluice::server
