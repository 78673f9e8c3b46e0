#include "server/schema_precheck.h"

#include <charconv>
#include <cstdlib>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_read.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace sluice::server {

namespace {

// A JSON value's place and kind in the body, as the scan saw it.
struct Span {
  std::string_view text;  // the value's bytes; empty when absent
  char kind = 0;          // first byte: '{', '[', '"', 't', 'f', 'n', or a number's
  std::string_view raw;   // a string's contents, unescaped only when `escaped` is false
  bool escaped = false;
  bool present() const { return kind != 0 && kind != 'n'; }  // given and not null
};

// Recursive descent over JSON text without building values. Every function returns false on
// text it does not handle; `dumped` (when not null) grows by the size nlohmann's dump() gives
// the value, compact and UTF-8 as read.
class Scanner {
 public:
  explicit Scanner(std::string_view t, bool check_keys = false)
      : p_(t.data()), end_(t.data() + t.size()), check_keys_(check_keys) {}

  bool value(int depth, size_t* dumped, Span* span = nullptr);
  bool object_members(int depth, size_t* dumped, const std::function<bool(std::string_view, int)>& member);
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool at_end() {
    ws();
    return p_ == end_;
  }
  bool duplicate_key() const { return duplicate_; }
  size_t values() const { return values_; }

 private:
  bool string(size_t* dumped, Span* span);
  bool escape(size_t* dumped);
  bool number(size_t* dumped);
  bool literal(std::string_view word, size_t* dumped);
  bool array(int depth, size_t* dumped);
  int next_or_close(char close);
  bool empty_container(char close, size_t* dumped);

  const char* p_;
  const char* end_;
  bool check_keys_;
  bool duplicate_ = false;
  size_t values_ = 0;
  std::deque<std::string> decoded_;  // escaped keys, decoded (stable addresses)
};

// Whether two of `keys` are equal: one open-addressing table of indexes, no allocation per key.
bool has_repeat(const std::vector<std::string_view>& keys) {
  if (keys.size() < 2) return false;
  size_t cap = 4;
  while (cap < 2 * keys.size()) cap *= 2;
  std::vector<uint32_t> slots(cap, UINT32_MAX);
  const std::hash<std::string_view> hash;
  for (uint32_t i = 0; i < keys.size(); ++i) {
    for (size_t h = hash(keys[i]) & (cap - 1);; h = (h + 1) & (cap - 1)) {
      if (slots[h] == UINT32_MAX) {
        slots[h] = i;
        break;
      }
      if (keys[slots[h]] == keys[i]) return true;
    }
  }
  return false;
}

// dump() writes '"' '\\' and the five short controls as two bytes, other controls as \u00XX.
size_t dumped_char(uint32_t c) {
  if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') return 2;
  if (c < 0x20) return 6;
  return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

bool hex4(const char* p, uint32_t& v) {
  v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = p[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return false;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  return true;
}

void put_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// A key's text with its escapes decoded (the scan has checked them), for comparing keys.
std::string decoded(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\') {
      out += raw[i];
      continue;
    }
    const char e = raw[++i];
    if (e != 'u') {
      out += e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
      continue;
    }
    uint32_t c = 0;
    hex4(raw.data() + i + 1, c);
    i += 4;
    if (c >= 0xD800 && c <= 0xDBFF) {
      uint32_t lo = 0;
      hex4(raw.data() + i + 3, lo);
      i += 6;
      c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
    }
    put_utf8(out, c);
  }
  return out;
}

bool Scanner::escape(size_t* dumped) {
  if (end_ - p_ < 2) return false;
  const char e = p_[1];
  p_ += 2;
  uint32_t c = 0;
  switch (e) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
      c = e == 'b'   ? '\b'
          : e == 'f' ? '\f'
          : e == 'n' ? '\n'
          : e == 'r' ? '\r'
          : e == 't' ? '\t'
                     : static_cast<uint32_t>(e);
      break;
    case 'u': {
      if (end_ - p_ < 4 || !hex4(p_, c)) return false;
      p_ += 4;
      if (c >= 0xDC00 && c <= 0xDFFF) return false;  // a lone low surrogate: invalid
      if (c >= 0xD800 && c <= 0xDBFF) {              // needs its low half
        uint32_t lo = 0;
        if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u' || !hex4(p_ + 2, lo) || lo < 0xDC00 || lo > 0xDFFF)
          return false;
        p_ += 6;
        c = 0x10000;
      }
      break;
    }
    default: return false;
  }
  if (dumped) *dumped += dumped_char(c);
  return true;
}

bool Scanner::string(size_t* dumped, Span* span) {
  const char* start = ++p_;  // past the opening quote
  bool escaped = false;
  size_t n = 2;
  while (p_ < end_ && *p_ != '"') {
    const auto c = static_cast<unsigned char>(*p_);
    if (c < 0x20) return false;
    if (c == '\\') {
      escaped = true;
      if (!escape(&n)) return false;
      continue;
    }
    ++n;  // a UTF-8 byte is written as read
    ++p_;
  }
  if (p_ == end_) return false;
  if (span) {
    span->raw = std::string_view(start, static_cast<size_t>(p_ - start));
    span->escaped = escaped;
  }
  ++p_;
  if (dumped) *dumped += n;
  return true;
}

// Integers that fit 64 bits dump as read less a '-0' sign; others are doubles, dumped as
// nlohmann writes them (rare in schemas: formatted one by one).
bool Scanner::number(size_t* dumped) {
  const char* start = p_;
  bool is_float = false;
  if (p_ < end_ && *p_ == '-') ++p_;
  while (p_ < end_ &&
         ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E' || *p_ == '+' || *p_ == '-')) {
    is_float |= *p_ == '.' || *p_ == 'e' || *p_ == 'E';
    ++p_;
  }
  if (p_ == start || !dumped) return p_ != start;
  const std::string_view tok(start, static_cast<size_t>(p_ - start));
  if (!is_float) {
    if (tok[0] == '-') {
      int64_t v = 0;
      const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (r.ec == std::errc() && r.ptr == tok.data() + tok.size()) {
        *dumped += std::to_string(v).size();
        return true;
      }
    } else {
      uint64_t v = 0;
      const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (r.ec == std::errc() && r.ptr == tok.data() + tok.size()) {
        *dumped += std::to_string(v).size();
        return true;
      }
    }
  }
  const std::string s(tok);
  char* stop = nullptr;
  const double d = std::strtod(s.c_str(), &stop);
  if (stop != s.c_str() + s.size()) return false;
  *dumped += nlohmann::ordered_json(d).dump().size();
  return true;
}

bool Scanner::literal(std::string_view word, size_t* dumped) {
  if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
  p_ += word.size();
  if (dumped) *dumped += word.size();
  return true;
}

// After an element: a ',' (1: another follows), the closing byte (0), anything else (-1); consumed.
int Scanner::next_or_close(char close) {
  ws();
  if (p_ < end_ && (*p_ == ',' || *p_ == close)) return *p_++ == ',' ? 1 : 0;
  return -1;
}

// Steps past the opening byte; true (the container counted and consumed) when it is empty.
bool Scanner::empty_container(char close, size_t* dumped) {
  ++p_;
  ws();
  if (p_ == end_ || *p_ != close) return false;
  ++p_;
  if (dumped) *dumped += 2;
  return true;
}

bool Scanner::array(int depth, size_t* dumped) {
  if (empty_container(']', dumped)) return true;
  size_t n = 2;
  for (bool first = true;; first = false) {
    if (!first) ++n;  // ','
    if (!value(depth + 1, dumped ? &n : nullptr)) return false;
    const int more = next_or_close(']');
    if (more < 0) return false;
    if (more == 0) break;
  }
  if (dumped) *dumped += n;
  return true;
}

// Calls `member(key, depth)` with the scanner at each member's value; the callback scans it.
bool Scanner::object_members(int depth, size_t* dumped, const std::function<bool(std::string_view, int)>& member) {
  if (empty_container('}', dumped)) return true;
  size_t n = 2;
  std::vector<std::string_view> keys;  // check_keys_: this object's keys, escapes decoded
  for (bool first = true;; first = false) {
    if (!first) ++n;
    ws();
    if (p_ == end_ || *p_ != '"') return false;
    Span key;
    if (!string(dumped ? &n : nullptr, &key)) return false;
    // A repeated key (first position, last value) makes dump() shorter than the count: a
    // second scan looks for one, escapes decoded.
    if (check_keys_) keys.push_back(key.escaped ? decoded_.emplace_back(decoded(key.raw)) : key.raw);
    ws();
    if (p_ == end_ || *p_ != ':') return false;
    ++p_;
    ++n;
    ws();
    if (!member(key.escaped ? std::string_view() : key.raw, depth + 1)) return false;
    const int more = next_or_close('}');
    if (more < 0) return false;
    if (more == 0) break;
  }
  if (dumped) *dumped += n;
  if (check_keys_ && has_repeat(keys)) duplicate_ = true;
  return true;
}

bool Scanner::value(int depth, size_t* dumped, Span* span) {
  if (depth > kMaxJsonDepth) return false;
  ++values_;
  ws();
  if (p_ == end_) return false;
  const char* start = p_;
  const char c = *p_;
  bool ok;
  if (c == '{') {
    size_t* sink = dumped;
    ok = object_members(depth, dumped, [&](std::string_view, int d) { return value(d, sink); });
  } else if (c == '[') {
    ok = array(depth, dumped);
  } else if (c == '"') {
    ok = string(dumped, span);
  } else if (c == 't') {
    ok = literal("true", dumped);
  } else if (c == 'f') {
    ok = literal("false", dumped);
  } else if (c == 'n') {
    ok = literal("null", dumped);
  } else {
    ok = number(dumped);
  }
  if (ok && span) {
    span->text = std::string_view(start, static_cast<size_t>(p_ - start));
    span->kind = c;
  }
  return ok;
}

// The members of the body that decide what parse_structured_output does first.
struct BodyParts {
  Span model, response_format, rf_type, json_schema_obj, name, strict, schema, json_schema, grammar;
  bool repeated = false;  // a member looked at appears twice: left to the full path
};

// Records `v` into `into`, marking a second occurrence.
Span* once(Span* into, bool& repeated) {
  if (into && into->kind) repeated = true;
  return into;
}

bool scan_body(std::string_view body, BodyParts& b) {
  Scanner s(body);
  s.ws();
  if (s.at_end() || body.find('{') != static_cast<size_t>(body.find_first_not_of(" \t\r\n"))) return false;
  auto rf_json_schema = [&](std::string_view k, int d) {
    Span* into = k == "name" ? &b.name : k == "strict" ? &b.strict : k == "schema" ? &b.schema : nullptr;
    return s.value(d, nullptr, once(into, b.repeated));
  };
  auto rf = [&](std::string_view k, int d) {
    if (k == "json_schema") {
      s.ws();
      Scanner probe = s;  // the kind first: only an object's members are looked into
      if (!probe.value(d, nullptr, once(&b.json_schema_obj, b.repeated))) return false;
      const Span& obj = b.json_schema_obj;
      if (obj.kind == '{') return s.object_members(d, nullptr, rf_json_schema);
      return s.value(d, nullptr);
    }
    return s.value(d, nullptr, once(k == "type" ? &b.rf_type : nullptr, b.repeated));
  };
  auto top = [&](std::string_view k, int d) {
    if (k == "response_format") {
      Scanner probe = s;
      if (!probe.value(d, nullptr, once(&b.response_format, b.repeated))) return false;
      if (b.response_format.kind == '{') return s.object_members(d, nullptr, rf);
      return s.value(d, nullptr);
    }
    Span* into = k == "model" ? &b.model : k == "json_schema" ? &b.json_schema : k == "grammar" ? &b.grammar : nullptr;
    return s.value(d, nullptr, once(into, b.repeated));
  };
  return s.object_members(1, nullptr, top) && s.at_end() && !b.repeated && s.values() <= kMaxJsonValues;
}

}  // namespace

std::optional<size_t> json_dumped_size(std::string_view text, size_t check_keys_past) {
  size_t n = 0;
  Scanner s(text);
  if (!s.value(1, &n) || !s.at_end()) return std::nullopt;
  if (n <= check_keys_past) return n;
  Scanner keys(text, true);
  if (!keys.value(1, nullptr) || keys.duplicate_key()) return std::nullopt;
  return n;
}

void refuse_oversized_schema(std::string_view body, const ModelContext& m) {
  const size_t limit = grammar::Limits{}.max_schema_bytes;
  if (body.size() <= limit || body.size() > request_json_limits().max_bytes) return;
  BodyParts b;
  if (!scan_body(body, b)) return;
  // What parse_body and parse_structured_output check before the schema's size.
  if (b.model.kind != '"' || b.model.escaped || b.model.raw != m.alias()) return;
  const Span* schema = nullptr;
  std::string param;
  int n_given = 0;
  if (b.response_format.present()) {
    if (b.response_format.kind != '{' || b.rf_type.kind != '"' || b.rf_type.escaped) return;
    if (b.rf_type.raw == "json_schema") {
      if (b.json_schema_obj.kind != '{' || (b.name.kind && b.name.kind != '"')) return;
      if (b.strict.kind && b.strict.kind != 't' && b.strict.kind != 'f' && b.strict.kind != 'n') return;
      if (b.schema.kind != '{') return;  // absent (any object) or a boolean: small
      schema = &b.schema;
      param = "response_format.json_schema.schema";
      ++n_given;
    } else if (b.rf_type.raw == "json_object") {
      ++n_given;
    } else if (b.rf_type.raw != "text") {
      return;
    }
  }
  if (b.json_schema.present()) {
    if (b.json_schema.kind != '{') return;
    schema = &b.json_schema;
    param = "json_schema";
    ++n_given;
  }
  if (b.grammar.present()) ++n_given;
  if (!schema || n_given != 1) return;
  const size_t n = json_dumped_size(schema->text, limit).value_or(0);
  if (n > limit)
    throw ApiError(400, param + ": " + grammar::schema_size_error(n, limit), "invalid_request_error", param);
}

}  // namespace sluice::server
