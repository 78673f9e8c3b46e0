#include "chat/reasoning.h"

namespace sluice::chat {

namespace {
constexpr std::string_view kOpen = "<|channel>";
constexpr std::string_view kClose = "<channel|>";
constexpr std::string_view kThought = "thought\n";  // channel name, dropped like HF's parser does

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}
}  // namespace

ParsedText Gemma4OutputParser::drain(bool final) {
  ParsedText out;
  while (!pending_.empty()) {
    if (state_ == State::ChannelStart) {
      // Drop "thought\n" right after the opener, once we can tell whether it is there.
      const size_t n = std::min(pending_.size(), kThought.size());
      if (std::string_view(pending_).substr(0, n) != kThought.substr(0, n)) {
        state_ = State::Reasoning;
      } else if (n == kThought.size()) {
        pending_.erase(0, n);
        state_ = State::Reasoning;
      } else if (final) {
        pending_.clear();  // a bare "<|channel>thou" at the very end: nothing to show
        break;
      } else {
        break;
      }
      continue;
    }
    const std::string_view marker = state_ == State::Content ? kOpen : kClose;
    std::string& sink = state_ == State::Content ? out.content : out.reasoning;
    const size_t at = pending_.find(marker);
    if (at != std::string::npos) {
      sink.append(pending_, 0, at);
      pending_.erase(0, at + marker.size());
      state_ = state_ == State::Content ? State::ChannelStart : State::Content;
      continue;
    }
    const size_t keep = final ? 0 : partial_suffix(pending_, marker);
    sink.append(pending_, 0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    break;
  }
  return out;
}

ParsedText Gemma4OutputParser::feed(std::string_view chunk) {
  pending_.append(chunk);
  return drain(false);
}

ParsedText Gemma4OutputParser::finish() { return drain(true); }

ParsedText Gemma4OutputParser::parse(std::string_view text) {
  Gemma4OutputParser p;
  ParsedText a = p.feed(text);
  ParsedText b = p.finish();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

}  // namespace sluice::chat
