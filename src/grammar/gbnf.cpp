#include "grammar/gbnf.h"

#include <string>
#include <unordered_map>

#include "base/error.h"

namespace sluice::grammar {

namespace {

class GbnfParser {
 public:
  GbnfParser(std::string_view t, const Limits& limits) : t_(t), b_(limits) {}

  Grammar parse() {
    skip();
    while (i_ < t_.size()) {
      const std::string name = ident();
      skip_line_space();
      if (t_.substr(i_, 3) != "::=") error("expected '::='");
      i_ += 3;
      const uint32_t r = rule(name);
      if (b_.defined(r)) error(("rule '" + name + "' defined twice").c_str());
      b_.define(r, alternation());
      skip();
    }
    auto it = rules_.find("root");
    if (it == rules_.end()) fail("gbnf: no 'root' rule");
    for (const auto& [name, id] : rules_)
      if (!b_.defined(id)) fail("gbnf: rule '%s' is used but never defined", name.c_str());
    return b_.finish(it->second);
  }

 private:
  [[noreturn]] void error(const char* what) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) {
      if (t_[k] == '\n') ++line, col = 1;
      else ++col;
    }
    fail("gbnf: %s at line %zu, column %zu", what, line, col);
  }

  uint32_t rule(const std::string& name) {
    auto [it, fresh] = rules_.try_emplace(name, 0);
    if (fresh) it->second = b_.declare(name);
    return it->second;
  }

  // Spaces, newlines and comments.
  void skip() {
    while (i_ < t_.size()) {
      if (t_[i_] == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r') {
        ++i_;
      } else {
        break;
      }
    }
  }
  void skip_line_space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t')) ++i_;
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  std::string ident() {
    const size_t s = i_;
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    if (i_ == s) error("expected a rule name");
    return std::string(t_.substr(s, i_ - s));
  }
  // The next item starts a new rule ("name ::=").
  bool at_rule_start() {
    size_t j = i_;
    while (j < t_.size() && name_char(t_[j])) ++j;
    if (j == i_) return false;
    while (j < t_.size() && (t_[j] == ' ' || t_[j] == '\t')) ++j;
    return t_.substr(j, 3) == "::=";
  }

  Expr alternation() {
    std::vector<Expr> alts{sequence()};
    while (i_ < t_.size() && t_[i_] == '|') {
      ++i_;
      alts.push_back(sequence());
    }
    return alt(std::move(alts));
  }

  Expr sequence() {
    std::vector<Expr> parts;
    for (;;) {
      skip();
      if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')' || at_rule_start()) break;
      parts.push_back(postfix(primary()));
    }
    return seq(std::move(parts));
  }

  Expr postfix(Expr e) {
    for (;;) {
      if (i_ >= t_.size()) return e;
      const char c = t_[i_];
      if (c == '*') e = star(std::move(e)), ++i_;
      else if (c == '+') e = plus(std::move(e)), ++i_;
      else if (c == '?') e = opt(std::move(e)), ++i_;
      else if (c == '{') e = braces(std::move(e));
      else return e;
    }
  }

  Expr braces(Expr e) {
    ++i_;
    auto number = [&]() {
      skip_line_space();
      const size_t s = i_;
      uint64_t v = 0;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' && v < 1000000) v = v * 10 + (t_[i_++] - '0');
      return i_ > s ? static_cast<int64_t>(v) : -1;
    };
    const int64_t lo = number();
    if (lo < 0) error("expected a count after '{'");
    int64_t hi = lo;
    skip_line_space();
    if (i_ < t_.size() && t_[i_] == ',') {
      ++i_;
      hi = number();
    }
    skip_line_space();
    if (i_ >= t_.size() || t_[i_] != '}') error("expected '}'");
    ++i_;
    return repeat(std::move(e), static_cast<uint32_t>(lo), hi < 0 ? kInf : static_cast<uint32_t>(hi));
  }

  Expr primary() {
    const char c = t_[i_];
    if (c == '"') return literal();
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return any_char(ByteSet{});
    }
    if (c == '(') {
      // The parser, the expression tree and its lowering recurse once per group level.
      if (++depth_ > kMaxGroupDepth)
        error(("groups nested deeper than " + std::to_string(kMaxGroupDepth) + " levels").c_str());
      ++i_;
      Expr e = alternation();
      --depth_;
      skip();
      if (i_ >= t_.size() || t_[i_] != ')') error("expected ')'");
      ++i_;
      return e;
    }
    if (c == '<' && t_.substr(i_, 2) == "<[") {
      i_ += 2;
      int64_t id = 0;
      const size_t s = i_;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' && id < (int64_t{1} << 31))
        id = id * 10 + (t_[i_++] - '0');
      if (i_ == s || t_.substr(i_, 2) != "]>") error("expected a token terminal <[id]>");
      i_ += 2;
      return token(static_cast<int32_t>(id));
    }
    if (name_char(c)) return ref(rule(ident()));
    error("unexpected character");
  }

  // One escaped or plain character, as its code point.
  uint32_t code_point() {
    if (i_ >= t_.size()) error("unexpected end of text");
    const unsigned char c = static_cast<unsigned char>(t_[i_]);
    if (c != '\\') {
      // Pass UTF-8 through as one code point.
      const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
      for (int k = 1; k < n; ++k) {
        if (i_ + k >= t_.size()) error("truncated UTF-8");
        cp = cp << 6 | (static_cast<unsigned char>(t_[i_ + k]) & 0x3F);
      }
      i_ += n;
      return cp;
    }
    if (i_ + 1 >= t_.size()) error("a trailing backslash");
    const char e = t_[i_ + 1];
    i_ += 2;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^': return static_cast<uint8_t>(e);
      case 'x': return hex(2);
      case 'u': return scalar(hex(4));
      case 'U': return scalar(hex(8));
      default: error("unknown escape");
    }
  }
  // A code point the output can be: surrogates are halves of UTF-16 pairs, not characters
  // (UTF-8 of one is CESU bytes a client decodes as U+FFFD), and nothing lies past U+10FFFF.
  uint32_t scalar(uint32_t cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) error("a surrogate code point (U+D800-U+DFFF) is not a character");
    if (cp > 0x10FFFF) error("a code point past U+10FFFF");
    return cp;
  }
  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k, ++i_) {
      if (i_ >= t_.size()) error("truncated hex escape");
      const char c = t_[i_];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) error("bad hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }
  static std::string utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else if (cp < 0x800) s += {static_cast<char>(0xC0 | cp >> 6), static_cast<char>(0x80 | (cp & 0x3F))};
    else if (cp < 0x10000)
      s += {static_cast<char>(0xE0 | cp >> 12), static_cast<char>(0x80 | (cp >> 6 & 0x3F)),
            static_cast<char>(0x80 | (cp & 0x3F))};
    else
      s += {static_cast<char>(0xF0 | cp >> 18), static_cast<char>(0x80 | (cp >> 12 & 0x3F)),
            static_cast<char>(0x80 | (cp >> 6 & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    return s;
  }

  Expr literal() {
    ++i_;
    std::string s;
    while (i_ < t_.size() && t_[i_] != '"') s += utf8(code_point());
    if (i_ >= t_.size()) error("unterminated string");
    ++i_;
    return lit(s);
  }

  // Any character outside `excluded` (ASCII bytes) — ASCII ones directly, others as UTF-8.
  Expr any_char(const ByteSet& excluded) {
    const Expr cont = bytes(ByteSet::range(0x80, 0xBF));
    ByteSet ascii;
    for (int b = 0; b < 128; ++b)
      if (!excluded.has(static_cast<uint8_t>(b))) ascii.add(static_cast<uint8_t>(b));
    return alt({bytes(ascii), seq({bytes(ByteSet::range(0xC2, 0xDF)), cont}),
                seq({bytes(ByteSet::range(0xE0, 0xEF)), cont, cont}),
                seq({bytes(ByteSet::range(0xF0, 0xF4)), cont, cont, cont})});
  }

  Expr char_class() {
    ++i_;
    bool negated = false;
    if (i_ < t_.size() && t_[i_] == '^') negated = true, ++i_;
    ByteSet s;
    while (i_ < t_.size() && t_[i_] != ']') {
      const uint32_t lo = code_point();
      uint32_t hi = lo;
      if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
        ++i_;
        hi = code_point();
      }
      if (hi >= 0x80) error("a non-ASCII character class member is not supported");
      if (hi < lo) error("a reversed range");
      s.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
    }
    if (i_ >= t_.size()) error("unterminated '['");
    ++i_;
    if (negated) return any_char(s);
    if (s.empty()) error("an empty class");
    return bytes(s);
  }

  static constexpr int kMaxGroupDepth = 128;
  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;
  GrammarBuilder b_;
  std::unordered_map<std::string, uint32_t> rules_;
};

}  // namespace

Grammar gbnf_grammar(std::string_view text, const Limits& limits) { return GbnfParser(text, limits).parse(); }

}  // namespace sluice::grammar
