// The text side of one generated choice, on the HTTP thread: token ids → UTF-8-safe text
// (StreamDecoder) → stop strings → for Gemma 4, reasoning split from content
// (<|channel>thought ... <channel|> goes to reasoning_content, never to content).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "server/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace sluice::server {

struct TextDelta {
  std::string content, reasoning;
  bool stopped = false;  // a stop string ended the choice
};

class ChoiceText {
 public:
  // Stop strings are checked only after `min_tokens` tokens (as vLLM does).
  ChoiceText(const Tokenizer& tok, std::vector<std::string> stops, bool split_reasoning, int32_t min_tokens);

  TextDelta push(int32_t token);  // one generated token (not the stop token)
  TextDelta finish();             // end of generation: release held-back text
  bool stopped() const { return stopped_; }

 private:
  void route(const std::string& text, TextDelta& d);

  StreamDecoder dec_;
  StopStringMatcher stops_;
  std::optional<chat::Gemma4OutputParser> reasoning_;
  int32_t min_tokens_, n_tokens_ = 0;
  bool stopped_ = false;
};

}  // namespace sluice::server
