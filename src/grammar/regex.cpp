#include "grammar/regex.h"

#include <string>

#include "base/error.h"

namespace sluice::grammar {

namespace {

class RegexParser {
 public:
  RegexParser(std::string_view p, const RegexContext& ctx) : p_(p), ctx_(ctx) {}

  Expr parse() {
    bool head = false, tail = false;
    if (!p_.empty() && p_[0] == '^') {
      head = true;
      i_ = 1;
    }
    std::string_view body = p_;
    if (!body.empty() && body.back() == '$' && (body.size() < 2 || body[body.size() - 2] != '\\')) {
      tail = true;
      p_.remove_suffix(1);
    }
    Expr e = alternation();
    if (i_ < p_.size()) unsupported("unbalanced ')'");
    std::vector<Expr> parts;
    if (!head) parts.push_back(star(any_char()));
    parts.push_back(std::move(e));
    if (!tail) parts.push_back(star(any_char()));
    return seq(std::move(parts));
  }

 private:
  [[noreturn]] void unsupported(const char* what) {
    fail("pattern '%.*s': %s at offset %zu is not supported", static_cast<int>(p_.size()), p_.data(), what, i_);
  }
  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  Expr alternation() {
    std::vector<Expr> alts{concat()};
    while (at('|')) {
      ++i_;
      alts.push_back(concat());
    }
    return alt(std::move(alts));
  }

  Expr concat() {
    std::vector<Expr> parts;
    while (i_ < p_.size() && !at('|') && !at(')')) parts.push_back(quantified());
    return seq(std::move(parts));
  }

  Expr quantified() {
    Expr e = atom();
    for (;;) {
      uint32_t lo = 0, hi = kInf;
      if (at('*')) {
        ++i_;
      } else if (at('+')) {
        lo = 1;
        ++i_;
      } else if (at('?')) {
        hi = 1;
        ++i_;
      } else if (at('{')) {
        braces(lo, hi);
      } else {
        return e;
      }
      if (at('?')) ++i_;  // lazy: same language
      e = repeat(std::move(e), lo, hi);
    }
  }

  void braces(uint32_t& lo, uint32_t& hi) {
    size_t j = i_ + 1;
    auto number = [&](uint32_t& v) {
      const size_t s = j;
      v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && v < 100000) v = v * 10 + (p_[j++] - '0');
      return j > s;
    };
    if (!number(lo)) unsupported("'{' without a count");
    hi = lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(hi)) hi = kInf;
    }
    if (j >= p_.size() || p_[j] != '}') unsupported("malformed {n,m}");
    i_ = j + 1;
  }

  Expr atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (at('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
        else unsupported("lookaround or group flag");
      }
      Expr e = alternation();
      if (!at(')')) unsupported("unclosed '('");
      ++i_;
      return e;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return any_char();
    }
    if (c == '^' || c == '$') unsupported("an anchor inside the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') unsupported("a quantifier with nothing before it");
    if (c == '\\') {
      ByteSet s;
      bool negated = false;
      if (class_escape(s, negated)) return set_expr(s, negated);
      return literal(first(s));
    }
    ++i_;
    return literal(static_cast<uint8_t>(c));
  }

  static uint8_t first(const ByteSet& s) {
    for (int b = 0; b < 256; ++b)
      if (s.has(static_cast<uint8_t>(b))) return static_cast<uint8_t>(b);
    return 0;
  }

  // After '\\': fills s; returns true for a class escape (\d ...), false for one literal byte.
  bool class_escape(ByteSet& s, bool& negated) {
    if (i_ + 1 >= p_.size()) unsupported("a trailing backslash");
    const char c = p_[i_ + 1];
    i_ += 2;
    switch (c) {
      case 'd':
      case 'D':
        s.add_range('0', '9');
        negated = c == 'D';
        return true;
      case 'w':
      case 'W':
        s.add_range('a', 'z');
        s.add_range('A', 'Z');
        s.add_range('0', '9');
        s.add('_');
        negated = c == 'W';
        return true;
      case 's':
      case 'S':
        s.add(' ');
        s.add('\t');
        s.add('\n');
        s.add('\r');
        s.add('\f');
        s.add('\v');
        negated = c == 'S';
        return true;
      case 'n': s.add('\n'); return false;
      case 't': s.add('\t'); return false;
      case 'r': s.add('\r'); return false;
      case 'f': s.add('\f'); return false;
      case 'v': s.add('\v'); return false;
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          i_ -= 2;
          unsupported("this escape");
        }
        s.add(static_cast<uint8_t>(c));
        return false;
    }
  }

  Expr char_class() {
    ++i_;
    bool negated = false;
    if (at('^')) negated = true, ++i_;
    ByteSet s;
    bool first_item = true;
    while (i_ < p_.size() && (!at(']') || first_item)) {
      first_item = false;
      uint8_t lo;
      if (at('\\')) {
        ByteSet e;
        bool neg = false;
        if (class_escape(e, neg)) {
          if (neg) unsupported("a negated escape inside a class");
          for (int k = 0; k < 4; ++k) s.w[k] |= e.w[k];
          continue;
        }
        lo = first(e);
      } else {
        lo = static_cast<uint8_t>(p_[i_++]);
      }
      if (lo >= 0x80) unsupported("a non-ASCII character inside a class");
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        uint8_t hi;
        if (at('\\')) {
          ByteSet e;
          bool neg = false;
          if (class_escape(e, neg)) unsupported("a class escape as a range end");
          hi = first(e);
        } else {
          hi = static_cast<uint8_t>(p_[i_++]);
        }
        if (hi >= 0x80) unsupported("a non-ASCII character inside a class");
        if (hi < lo) unsupported("a reversed range");
        s.add_range(lo, hi);
      } else {
        s.add(lo);
      }
    }
    if (!at(']')) unsupported("an unclosed '['");
    ++i_;
    return set_expr(s, negated);
  }

  // One character from an ASCII set (or from its complement, which includes non-ASCII).
  Expr set_expr(const ByteSet& ascii, bool negated) {
    ByteSet raw;
    std::vector<Expr> alts;
    for (int b = 0; b < 128; ++b) {
      if (ascii.has(static_cast<uint8_t>(b)) == negated) continue;
      if (ctx_.json_string && (b < 0x20 || b == '"' || b == '\\')) {
        alts.push_back(escaped(static_cast<uint8_t>(b)));
      } else {
        raw.add(static_cast<uint8_t>(b));
      }
    }
    if (!raw.empty()) alts.push_back(bytes(raw));
    if (negated) alts.push_back(ref(ctx_.utf8_multi));
    if (alts.empty()) unsupported("an empty class");
    return alt(std::move(alts));
  }

  Expr any_char() {
    if (ctx_.json_string) return ctx_.json_char;
    ByteSet raw = ByteSet::range(0, 0x7f);
    return alt({bytes(raw), ref(ctx_.utf8_multi)});
  }

  // JSON's spelling of one ASCII character that must be escaped.
  static Expr escaped(uint8_t b) {
    switch (b) {
      case '"': return lit("\\\"");
      case '\\': return lit("\\\\");
      case '\n': return lit("\\n");
      case '\t': return lit("\\t");
      case '\r': return lit("\\r");
      case '\b': return lit("\\b");
      case '\f': return lit("\\f");
      default: return lit(strfmt("\\u%04x", b));
    }
  }

  Expr literal(uint8_t b) {
    if (ctx_.json_string && (b < 0x20 || b == '"' || b == '\\')) return escaped(b);
    return bytes(ByteSet::of(b));
  }

  std::string_view p_;
  const RegexContext& ctx_;
  size_t i_ = 0;
};

}  // namespace

Expr regex_to_expr(std::string_view pattern, const RegexContext& ctx) { return RegexParser(pattern, ctx).parse(); }

}  // namespace sluice::grammar
