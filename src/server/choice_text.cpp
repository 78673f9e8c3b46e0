#include "server/choice_text.h"

namespace sluice::server {

ChoiceText::ChoiceText(const Tokenizer& tok, std::vector<std::string> stops, bool split_reasoning, int32_t min_tokens)
    : dec_(tok), stops_(std::move(stops)), min_tokens_(min_tokens) {
  if (split_reasoning) reasoning_.emplace();
}

void ChoiceText::route(const std::string& text, TextDelta& d) {
  if (text.empty()) return;
  if (!reasoning_) {
    d.content += text;
    return;
  }
  chat::ParsedText p = reasoning_->feed(text);
  d.content += p.content;
  d.reasoning += p.reasoning;
}

TextDelta ChoiceText::push(int32_t token) {
  TextDelta d;
  if (stopped_) return d;
  ++n_tokens_;
  const std::string piece = dec_.push(token);
  if (n_tokens_ <= min_tokens_) {
    route(piece, d);
    return d;
  }
  StopStringMatcher::Result r = stops_.push(piece);
  route(r.emit, d);
  if (r.hit) {
    stopped_ = d.stopped = true;
    if (reasoning_) {
      chat::ParsedText p = reasoning_->finish();
      d.content += p.content;
      d.reasoning += p.reasoning;
    }
  }
  return d;
}

TextDelta ChoiceText::finish() {
  TextDelta d;
  if (stopped_) return d;
  StopStringMatcher::Result r = stops_.push(dec_.flush());
  route(r.emit, d);
  if (r.hit) stopped_ = d.stopped = true;
  else route(stops_.flush(), d);
  if (reasoning_) {
    chat::ParsedText p = reasoning_->finish();
    d.content += p.content;
    d.reasoning += p.reasoning;
  }
  return d;
}

}  // namespace sluice::server
