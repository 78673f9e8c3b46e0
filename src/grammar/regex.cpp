#include "grammar/regex.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace sluice::grammar {

namespace {

class RegexParser {
 public:
  RegexParser(std::string_view p, const RegexContext& ctx) : p_(p), ctx_(ctx) {}

  Expr parse() { return assemble(parse_top(), nullptr); }

  // See regex_always_extends.
  bool always_extends() {
    const Top t = parse_top();
    if (!t.head || !t.tail) return true;
    return t.simple && !t.parts.empty() && t.parts.back().hi >= kInf && t.parts.back().len.mx >= kInf;
  }

  // The pattern with its length in characters limited to [lo, hi] (hi may be kInf), when
  // that is expressible: the pattern's own lengths already lie inside, or it is anchored and
  // one concatenation whose only variable-length part is one character repeated (then that
  // repetition's bounds absorb the limit, e.g. ^[a-z][a-z0-9-]*$ with maxLength 63).
  std::optional<Expr> parse_bounded(uint64_t lo, uint64_t hi) {
    Top t = parse_top();
    if (t.len.mn >= lo && t.len.mx <= hi) return assemble(std::move(t), nullptr);
    if (!t.head || !t.tail || !t.simple) return std::nullopt;
    size_t var = SIZE_MAX;
    uint64_t fixed = 0;
    for (size_t i = 0; i < t.parts.size(); ++i) {
      const Part& p = t.parts[i];
      if (p.len.mn == p.len.mx) {
        fixed += p.len.mn;
        continue;
      }
      if (var != SIZE_MAX || !p.one_char) return std::nullopt;
      var = i;
    }
    if (var == SIZE_MAX || hi < fixed) return std::nullopt;
    Part& p = t.parts[var];
    const uint64_t rlo = std::max<uint64_t>(p.lo, lo > fixed ? lo - fixed : 0);
    const uint64_t rhi = std::min<uint64_t>(p.hi, hi == kInf ? kInf : hi - fixed);
    if (rlo > rhi || rlo >= kInf) return std::nullopt;
    Expr atom = p.atom;
    p.expr = repeat(std::move(atom), static_cast<uint32_t>(rlo), static_cast<uint32_t>(rhi));
    return assemble(std::move(t), nullptr);
  }

 private:
  // Lengths in characters (kInf: unbounded).
  struct Len {
    uint64_t mn = 0, mx = 0;
  };
  // One quantified atom of the top-level concatenation.
  struct Part {
    Expr expr, atom;  // the part as parsed; the atom it repeats
    Len len;
    uint64_t lo = 1, hi = 1;
    bool one_char = false;  // one character, repeated by a single quantifier
  };
  struct Top {
    bool head = false, tail = false, simple = false;  // simple: one alternative, parts valid
    std::vector<Part> parts;
    Expr alt;  // when not simple
    Len len;
  };

  static uint64_t sat_add(uint64_t a, uint64_t b) {
    return (a >= kInf || b >= kInf) ? kInf : std::min<uint64_t>(a + b, kInf);
  }
  static uint64_t sat_mul(uint64_t a, uint64_t b) {
    if (a == 0 || b == 0) return 0;
    if (a >= kInf || b >= kInf) return kInf;
    return a > kInf / b ? kInf : a * b;
  }

  Top parse_top() {
    Top t;
    if (!p_.empty() && p_[0] == '^') {
      t.head = true;
      i_ = 1;
    }
    if (!p_.empty() && p_.back() == '$' && (p_.size() < 2 || p_[p_.size() - 2] != '\\')) {
      t.tail = true;
      p_.remove_suffix(1);
    }
    std::vector<Part> first = concat_parts();
    if (!at('|')) {
      t.simple = true;
      for (const Part& p : first) t.len = Len{sat_add(t.len.mn, p.len.mn), sat_add(t.len.mx, p.len.mx)};
      t.parts = std::move(first);
    } else {
      i_ = t.head ? 1 : 0;
      t.alt = alternation();
      t.len = len_;
    }
    if (i_ < p_.size()) unsupported("unbalanced ')'");
    if (!t.head || !t.tail) t.len.mx = kInf;
    return t;
  }

  Expr assemble(Top t, std::nullptr_t) {
    std::vector<Expr> parts;
    if (!t.head) parts.push_back(star(any_char()));
    if (t.simple) {
      std::vector<Expr> body;
      for (Part& p : t.parts) body.push_back(std::move(p.expr));
      parts.push_back(seq(std::move(body)));
    } else {
      parts.push_back(std::move(t.alt));
    }
    if (!t.tail) parts.push_back(star(any_char()));
    return seq(std::move(parts));
  }

  [[noreturn]] void unsupported(const char* what) {
    fail("pattern '%.*s': %s at offset %zu is not supported", static_cast<int>(p_.size()), p_.data(), what, i_);
  }
  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  // Sets len_ to the alternation's length range.
  Expr alternation() {
    std::vector<Expr> alts{concat()};
    Len len = len_;
    while (at('|')) {
      ++i_;
      alts.push_back(concat());
      len = Len{std::min(len.mn, len_.mn), std::max(len.mx, len_.mx)};
    }
    len_ = len;
    return alt(std::move(alts));
  }

  std::vector<Part> concat_parts() {
    std::vector<Part> parts;
    while (i_ < p_.size() && !at('|') && !at(')')) parts.push_back(quantified());
    return parts;
  }

  Expr concat() {
    std::vector<Expr> parts;
    Len len;
    for (Part& p : concat_parts()) {
      len = Len{sat_add(len.mn, p.len.mn), sat_add(len.mx, p.len.mx)};
      parts.push_back(std::move(p.expr));
    }
    len_ = len;
    return seq(std::move(parts));
  }

  Part quantified() {
    Part p;
    p.atom = atom();
    p.expr = p.atom;
    p.len = len_;
    const bool one_char = atom_is_char_;
    int n_quant = 0;
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
        p.one_char = one_char && n_quant == 1;
        return p;
      }
      if (at('?')) ++i_;  // lazy: same language
      ++n_quant;
      p.lo = lo;
      p.hi = hi;
      p.len = Len{sat_mul(p.len.mn, lo), hi == kInf ? (p.len.mx ? kInf : 0) : sat_mul(p.len.mx, hi)};
      p.expr = repeat(std::move(p.expr), lo, hi);
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

  // Sets len_ and atom_is_char_ (one character: a literal, a class or '.').
  Expr atom() {
    const char c = p_[i_];
    len_ = Len{1, 1};
    atom_is_char_ = true;
    if (static_cast<uint8_t>(c) >= 0x80 && static_cast<uint8_t>(c) < 0xC0) {
      len_ = Len{0, 0};  // a UTF-8 continuation byte: part of the character before it
      atom_is_char_ = false;
    }
    if (c == '(') {
      atom_is_char_ = false;
      ++i_;
      if (at('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
        else unsupported("lookaround or group flag");
      }
      Expr e = alternation();  // sets len_
      atom_is_char_ = false;
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
  Len len_;
  bool atom_is_char_ = false;
};

}  // namespace

Expr regex_to_expr(std::string_view pattern, const RegexContext& ctx) { return RegexParser(pattern, ctx).parse(); }

bool regex_always_extends(std::string_view pattern, const RegexContext& ctx) {
  return RegexParser(pattern, ctx).always_extends();
}

std::optional<Expr> regex_to_expr_bounded(std::string_view pattern, const RegexContext& ctx, uint64_t min_chars,
                                          uint64_t max_chars) {
  return RegexParser(pattern, ctx).parse_bounded(min_chars, max_chars);
}

}  // namespace sluice::grammar
