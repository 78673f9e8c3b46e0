// Splits Gemma 4 output into reasoning and visible content (tokenizer.md §10.2).
//
// With thinking on, the model writes `<|channel>thought\n` ... `<channel|>` and then the
// answer. The channel markers are USER_DEFINED tokens, so they reach us as text; a marker may
// also arrive split across streamed chunks, so text that could be the start of a marker is
// held back until the next chunk (or finish()) decides.
#pragma once

#include <string>
#include <string_view>

namespace sluice::chat {

struct ParsedText {
  std::string reasoning;  // text inside <|channel>...<channel|>, without "thought\n"
  std::string content;    // everything else
};

class Gemma4OutputParser {
 public:
  // Returns what can be emitted now; the concatenation of all returns equals parse(all text).
  ParsedText feed(std::string_view chunk);
  ParsedText finish();  // end of generation: flush held-back text (an open block is reasoning)
  static ParsedText parse(std::string_view text);  // whole output at once

 private:
  enum class State { Content, ChannelStart, Reasoning };
  State state_ = State::Content;
  std::string pending_;
  ParsedText drain(bool final);
};

}  // namespace sluice::chat
