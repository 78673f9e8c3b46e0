#include "chat/tool_calls.h"

#include <cctype>

#include "base/json_read.h"
#include "base/random_id.h"

namespace sluice::chat {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kQuote = "<|\"|>";  // id 52 in Gemma 4's vocabulary
constexpr std::string_view kNativeOpen = "<|tool_call>";
constexpr std::string_view kNativeClose = "<tool_call|>";
constexpr std::string_view kJsonOpen = "{\"tool_call\"";
constexpr int kMaxDepth = 64;

// Compact JSON; invalid UTF-8 in model text becomes U+FFFD instead of an exception.
std::string compact(const ojson& v) { return v.dump(-1, ' ', false, ojson::error_handler_t::replace); }

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The <|"|>-quoted string that starts at s[i]: its text into out, i past the closing marker
// (false: unterminated).
bool read_native_string(std::string_view s, size_t& i, std::string& out) {
  const size_t end = s.find(kQuote, i + kQuote.size());
  if (end == std::string_view::npos) return false;
  out.assign(s.substr(i + kQuote.size(), end - i - kQuote.size()));
  i = end + kQuote.size();
  return true;
}

// The JSON string literal that starts at s[i] (a '"'): its decoded value into out, i past the
// closing quote (false: unterminated or not a valid JSON string).
bool read_json_string(std::string_view s, size_t& i, std::string& out) {
  size_t j = i + 1;
  while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
  if (j >= s.size()) return false;
  const ojson v = ojson::parse(s.substr(i, j + 1 - i), nullptr, false);
  if (!v.is_string()) return false;
  out = v.get<std::string>();
  i = j + 1;
  return true;
}

// Recursive descent over the native syntax: values as in JSON, except strings between
// <|"|> markers and object keys bare (or quoted either way).
class NativeReader {
 public:
  explicit NativeReader(std::string_view s) : s_(s) {}

  bool whole(ojson& out) {
    if (!value(out, 0)) return false;
    skip_ws();
    return i_ == s_.size();
  }

 private:
  void skip_ws() {
    while (i_ < s_.size() && is_space(s_[i_])) ++i_;
  }
  bool at(std::string_view t) const { return s_.substr(i_, t.size()) == t; }

  bool native_string(std::string& out) { return read_native_string(s_, i_, out); }
  bool json_string(std::string& out) { return read_json_string(s_, i_, out); }

  bool key(std::string& out) {
    skip_ws();
    if (at(kQuote)) return native_string(out);
    if (at("\"")) return json_string(out);
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ':' && std::string_view("{}[],<>\"").find(s_[i_]) == std::string_view::npos)
      ++i_;
    out.assign(s_.substr(start, i_ - start));
    while (!out.empty() && is_space(out.back())) out.pop_back();
    return !out.empty();
  }

  // Elements of an object or array up to `close`; `one` reads one member into `out`.
  template <class F>
  bool members(char close, F&& one) {
    ++i_;
    skip_ws();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return true;
    }
    for (;;) {
      if (!one()) return false;
      skip_ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == close) {
        ++i_;
        return true;
      }
      if (s_[i_] != ',') return false;
      ++i_;
    }
  }

  bool scalar(ojson& out) {
    const size_t start = i_;
    while (i_ < s_.size() && std::string_view(",}]").find(s_[i_]) == std::string_view::npos && !is_space(s_[i_])) ++i_;
    if (i_ == start) return false;
    out = ojson::parse(s_.substr(start, i_ - start), nullptr, false);
    return out.is_number() || out.is_boolean() || out.is_null();
  }

  bool value(ojson& out, int depth) {
    if (depth > kMaxDepth) return false;
    skip_ws();
    if (i_ >= s_.size()) return false;
    std::string text;
    if (at(kQuote) || s_[i_] == '"') {
      if (!(at(kQuote) ? native_string(text) : json_string(text))) return false;
      out = std::move(text);
      return true;
    }
    if (s_[i_] == '{') {
      out = ojson::object();
      return members('}', [&] {
        std::string k;
        if (!key(k)) return false;
        skip_ws();
        if (i_ >= s_.size() || s_[i_] != ':') return false;
        ++i_;
        ojson v;
        if (!value(v, depth + 1)) return false;
        out[k] = std::move(v);
        return true;
      });
    }
    if (s_[i_] == '[') {
      out = ojson::array();
      return members(']', [&] {
        ojson v;
        if (!value(v, depth + 1)) return false;
        out.push_back(std::move(v));
        return true;
      });
    }
    return scalar(out);
  }

  std::string_view s_;
  size_t i_ = 0;
};

// Length of the longest proper suffix of `text` that is a prefix of `marker`.
size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// End (one past the closing brace) of the JSON object that starts text, or npos.
size_t json_object_end(std::string_view text) {
  int depth = 0;
  bool in_str = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_str) {
      if (c == '\\') ++i;
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

bool valid_name(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

// Bytes at the end of `s` that start a UTF-8 sequence not yet complete.
size_t partial_utf8(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// String content as JSON string text without the quotes, nlohmann's escaping (per character,
// so pieces concatenate).
std::string escaped(std::string_view content) {
  const std::string q = compact(ojson(std::string(content)));
  return q.substr(1, q.size() - 2);
}

// One step of native_json_prefix's scan; see there.
class PrefixConverter {
 public:
  explicit PrefixConverter(std::string_view s) : s_(s) {}

  std::string run() {
    while (step()) {
    }
    return std::move(out_);
  }

 private:
  enum class Want { kValue, kKey, kAfter };

  bool key() {
    if (s_[i_] == '}' && just_opened_) return close('}');
    std::string k;
    if (s_[i_] == '"' || s_.substr(i_, kQuote.size()) == kQuote) {  // a quoted key, either way
      if (!(s_[i_] == '"' ? read_json_string(s_, i_, k) : read_native_string(s_, i_, k))) return false;
      while (i_ < s_.size() && is_space(s_[i_])) ++i_;
      if (i_ >= s_.size() || s_[i_] != ':') return false;
    } else {
      const size_t colon = s_.find(':', i_);
      if (colon == std::string_view::npos) return false;
      std::string_view bare = s_.substr(i_, colon - i_);
      while (!bare.empty() && is_space(bare.back())) bare.remove_suffix(1);
      if (bare.empty() || bare.find_first_of("{}[],<>\"") != std::string_view::npos) return false;
      k.assign(bare);
      i_ = colon;
    }
    ++i_;  // ':'
    out_ += compact(ojson(k)) + ":";
    want_ = Want::kValue;
    return true;
  }

  bool close(char c) {
    out_ += c;
    stack_.pop_back();
    ++i_;
    want_ = Want::kAfter;
    just_opened_ = false;
    return true;
  }

  bool open(char c) {
    out_ += c;
    stack_.push_back(c == '{' ? '}' : ']');
    ++i_;
    want_ = c == '{' ? Want::kKey : Want::kValue;
    just_opened_ = true;
    return true;
  }

  bool native_string() {
    const size_t from = i_ + kQuote.size();
    const size_t end = s_.find(kQuote, from);
    out_ += '"';
    if (end == std::string_view::npos) {  // the content so far, less a partial quote or character
      std::string_view part = s_.substr(from);
      part.remove_suffix(partial_suffix(part, kQuote));
      part.remove_suffix(partial_utf8(part));
      out_ += escaped(part);
      return false;
    }
    out_ += escaped(s_.substr(from, end - from)) + '"';
    i_ = end + kQuote.size();
    want_ = Want::kAfter;
    return true;
  }

  bool scalar() {
    size_t j = i_;
    if (s_[i_] == '"') {  // a JSON string: whole or nothing
      for (++j; j < s_.size() && s_[j] != '"'; j += s_[j] == '\\' ? 2 : 1) {
      }
      if (j >= s_.size()) return false;
      ++j;
    } else {
      while (j < s_.size() && std::string_view(",}]").find(s_[j]) == std::string_view::npos && !is_space(s_[j])) ++j;
      if (j >= s_.size() || j == i_) return false;  // not delimited yet
    }
    const ojson v = ojson::parse(s_.substr(i_, j - i_), nullptr, false);
    if (!(v.is_string() || v.is_number() || v.is_boolean() || v.is_null())) return false;
    out_ += compact(v);
    i_ = j;
    want_ = Want::kAfter;
    return true;
  }

  bool value() {
    const char c = s_[i_];
    if (c == '{' || c == '[') return open(c);
    if (c == ']' && just_opened_ && !stack_.empty() && stack_.back() == ']') return close(']');
    if (s_.substr(i_, kQuote.size()) == kQuote) return native_string();
    if (kQuote.substr(0, s_.size() - i_) == s_.substr(i_)) return false;  // a quote cut short
    return scalar();
  }

  bool step() {
    while (i_ < s_.size() && is_space(s_[i_])) ++i_;
    if (i_ >= s_.size() || stack_.size() > static_cast<size_t>(kMaxDepth)) return false;
    switch (want_) {
      case Want::kKey: return key();
      case Want::kValue: return value();
      case Want::kAfter:
        if (stack_.empty()) return false;  // the value is complete
        if (s_[i_] == stack_.back()) return close(s_[i_]);
        if (s_[i_] != ',') return false;
        out_ += ',';
        ++i_;
        want_ = stack_.back() == '}' ? Want::kKey : Want::kValue;
        just_opened_ = false;
        return true;
    }
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string out_;
  std::vector<char> stack_;  // closers of the open containers
  Want want_ = Want::kValue;
  bool just_opened_ = false;
};

}  // namespace

std::string native_json_prefix(std::string_view text) { return PrefixConverter(text).run(); }

std::string new_tool_call_id() { return random_id("call_"); }

std::optional<ojson> native_value_to_json(std::string_view text) {
  ojson v;
  if (!NativeReader(text).whole(v)) return std::nullopt;
  return v;
}

std::optional<ToolCall> parse_native_call(std::string_view body) {
  while (!body.empty() && is_space(body.front())) body.remove_prefix(1);
  if (body.substr(0, 5) != "call:") return std::nullopt;
  body.remove_prefix(5);
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  std::string_view name = body.substr(0, brace);
  while (!name.empty() && is_space(name.back())) name.remove_suffix(1);
  if (!valid_name(name)) return std::nullopt;
  const auto args = native_value_to_json(body.substr(brace));
  if (!args || !args->is_object()) return std::nullopt;
  return ToolCall{new_tool_call_id(), std::string(name), compact(*args)};
}

// The model's text is read with the limits of a request's JSON: too deep or too big is no call.
std::optional<ojson> read_model_json(std::string_view text) {
  try {
    return read_json<ojson>(text, request_json_limits(), "a tool call");
  } catch (const JsonReadError&) {
    return std::nullopt;
  }
}

std::optional<ToolCall> parse_json_call(std::string_view object_text) {
  const ojson v = read_model_json(object_text).value_or(ojson());
  if (!v.is_object() || v.size() != 1 || !v.contains("tool_call")) return std::nullopt;
  const ojson& c = v.at("tool_call");
  if (!c.is_object() || !c.contains("name") || !c.at("name").is_string()) return std::nullopt;
  const std::string name = c.at("name").get<std::string>();
  if (!valid_name(name)) return std::nullopt;
  ojson args = c.contains("arguments") ? c.at("arguments") : ojson::object();
  if (args.is_string()) args = read_model_json(args.get<std::string>()).value_or(ojson());
  if (!args.is_object()) return std::nullopt;
  return ToolCall{new_tool_call_id(), name, compact(args)};
}

void ToolCallParser::emit_content(ToolDelta& d, std::string text) {
  if (text.empty()) return;
  if (n_calls_ > 0) {  // whitespace between or after calls is not content
    bool blank = true;
    for (char c : text) blank &= is_space(c);
    if (blank) {
      ws_ += text;
      return;
    }
    text = ws_ + text;
    ws_.clear();
  }
  d.content += text;
}

// buf_ starts with an opener. Returns false when the call is not complete yet.
bool ToolCallParser::take_call(ToolDelta& d, bool final) {
  const bool native = format_ == ToolFormat::kGemma4Native;
  size_t end = std::string::npos;  // one past the call's text
  size_t body_end = 0;
  if (native) {
    const size_t close = buf_.find(kNativeClose, kNativeOpen.size());
    if (close != std::string::npos) {
      end = close + kNativeClose.size();
      body_end = close;
    }
  } else {
    end = json_object_end(buf_);
    body_end = end;
  }
  if (end == std::string::npos) {
    if (!final) return false;
    end = body_end = buf_.size();  // generation ended inside the call (e.g. at <|tool_response>)
  }
  const std::string_view text(buf_.data(), end);
  const std::optional<ToolCall> call = native ? parse_native_call(
                                                    text.substr(kNativeOpen.size(), body_end - kNativeOpen.size()))
                                              : parse_json_call(text.substr(0, body_end));
  if (call) {
    d.calls.push_back(*call);
    ++n_calls_;
    ws_.clear();
  } else {
    emit_content(d, std::string(text));
  }
  buf_.erase(0, end);
  in_call_ = false;
  return true;
}

// Incremental mode: buf_ starts with <|tool_call>. The first piece once `call:NAME{` is in,
// then the arguments' JSON as it grows. Returns false while the call is still open.
bool ToolCallParser::stream_call(ToolDelta& d, bool final) {
  if (stream_id_.empty()) {
    const size_t brace = buf_.find('{', kNativeOpen.size());
    const size_t closer = buf_.find(kNativeClose, kNativeOpen.size());
    if (brace == std::string::npos || closer < brace) return take_call(d, final);
    std::string_view head = std::string_view(buf_).substr(kNativeOpen.size(), brace - kNativeOpen.size());
    while (!head.empty() && is_space(head.front())) head.remove_prefix(1);
    std::string_view name = head.substr(0, 5) == "call:" ? head.substr(5) : std::string_view();
    while (!name.empty() && is_space(name.back())) name.remove_suffix(1);
    if (!valid_name(name)) return take_call(d, final);  // not a call: whole, then content
    stream_id_ = new_tool_call_id();
    args_at_ = brace;
    sent_.clear();
    d.calls.push_back(ToolCall{stream_id_, std::string(name), "", true, false});
  }
  const size_t closer = buf_.find(kNativeClose, args_at_);
  const size_t end = closer == std::string::npos ? buf_.size() : closer;
  const std::string p = native_json_prefix(std::string_view(buf_).substr(args_at_, end - args_at_));
  const std::string frag = p.size() > sent_.size() ? p.substr(sent_.size()) : std::string();
  if (!frag.empty()) sent_ = p;
  const bool done = closer != std::string::npos || final;
  if (!frag.empty() || done) {
    if (!d.calls.empty() && d.calls.back().id == stream_id_) {
      d.calls.back().arguments += frag;
      d.calls.back().last = done;
    } else {
      d.calls.push_back(ToolCall{stream_id_, "", frag, false, done});
    }
  }
  if (!done) return false;
  buf_.erase(0, closer == std::string::npos ? buf_.size() : closer + kNativeClose.size());
  stream_id_.clear();
  in_call_ = false;
  ++n_calls_;
  ws_.clear();
  return true;
}

void ToolCallParser::scan(ToolDelta& d, bool final) {
  const std::string_view opener = format_ == ToolFormat::kGemma4Native ? kNativeOpen : kJsonOpen;
  for (;;) {
    if (in_call_) {
      if (!(incremental_ ? stream_call(d, final) : take_call(d, final))) return;
      continue;
    }
    const size_t pos = buf_.find(opener);
    if (pos != std::string::npos) {
      emit_content(d, buf_.substr(0, pos));
      buf_.erase(0, pos);
      in_call_ = true;
      continue;
    }
    const size_t keep = final ? 0 : partial_suffix(buf_, opener);
    emit_content(d, buf_.substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return;
  }
}

ToolDelta ToolCallParser::feed(std::string_view text) {
  ToolDelta d;
  buf_ += text;
  scan(d, false);
  return d;
}

ToolDelta ToolCallParser::finish() {
  ToolDelta d;
  scan(d, true);
  ws_.clear();
  return d;
}

}  // namespace sluice::chat
