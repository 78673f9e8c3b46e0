#include "server/choice_text.h"

namespace sluice::server {

ChoiceText::ChoiceText(const Tokenizer& tok, std::vector<std::string> stops, bool split_reasoning, int32_t min_tokens,
                       std::optional<chat::ToolFormat> tools, bool incremental_calls)
    : dec_(tok, tools.has_value()), stops_(std::move(stops)), min_tokens_(min_tokens) {
  if (split_reasoning) reasoning_.emplace();
  if (tools) tools_.emplace(*tools, incremental_calls);
}

void ChoiceText::add_content(const std::string& text, TextDelta& d) {
  if (!tools_) {
    d.content += text;
    return;
  }
  chat::ToolDelta t = tools_->feed(text);
  d.content += t.content;
  for (ToolCall& c : t.calls) d.tool_calls.push_back(std::move(c));
}

void ChoiceText::route(const std::string& text, TextDelta& d) {
  if (text.empty()) return;
  if (!reasoning_) {
    add_content(text, d);
    return;
  }
  chat::ParsedText p = reasoning_->feed(text);
  add_content(p.content, d);
  d.reasoning += p.reasoning;
}

// End of the text: what the reasoning split and the tool-call parser still hold.
void ChoiceText::finish_parsers(TextDelta& d) {
  if (reasoning_) {
    chat::ParsedText p = reasoning_->finish();
    add_content(p.content, d);
    d.reasoning += p.reasoning;
  }
  if (tools_) {
    chat::ToolDelta t = tools_->finish();
    d.content += t.content;
    for (ToolCall& c : t.calls) d.tool_calls.push_back(std::move(c));
  }
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
    finish_parsers(d);
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
  finish_parsers(d);
  return d;
}

}  // namespace sluice::server
