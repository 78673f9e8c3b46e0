#include "jinja/lexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "jinja/pystr.h"

namespace sluice::jinja {

void syntax_error(int line, int col, const std::string& msg) {
  fail("chat template syntax error at line %d, column %d: %s", line, col, msg.c_str());
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(unsigned char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_name_char(unsigned char c) { return is_name_start(c) || is_digit(static_cast<char>(c)); }
int hexval(char c) {
  if (is_digit(c)) return c - '0';
  c = static_cast<char>(c | 0x20);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // jinja2 splits on \r\n, \r and \n, drops one trailing newline, and rejoins with \n, so
    // line endings inside data and string literals all come out as \n.
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    const size_t n = src_.size();
    while (pos_ < n) {
      const size_t k = next_tag(pos_);
      if (k == std::string::npos) {
        emit_data(pos_, src_.substr(pos_));
        break;
      }
      const char kind = src_[k + 1];
      size_t after = k + 2;
      const char sign = after < n && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(k, &raw_end);
      std::string text = src_.substr(pos_, k - pos_);
      lstrip_text(text, sign, kind != '{');
      emit_data(pos_, std::move(text));
      if (raw) {
        line_starting_ = src_[raw_end - 1] == '\n';
        lex_raw(k, raw_end);
        continue;
      }
      if (sign) ++after;
      if (kind == '#') {
        lex_comment(k, after);
        continue;
      }
      push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, k, std::string(src_, k, after - k));
      pos_ = after;
      lex_tag(kind == '{');
    }
    push(Tok::Eof, n, "");
    return std::move(out_);
  }

 private:
  std::string src_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  bool line_starting_ = true;  // the previous match ended with a newline (or at start)
  std::vector<Token> out_;

  // Line and column (in code points) of a byte offset. Tokens arrive in order, so the
  // column is counted on from the previous token on the same line (linear, not quadratic,
  // for long single-line templates).
  mutable size_t memo_off_ = 0, memo_line_start_ = 0;
  mutable int memo_line_ = 1, memo_col_ = 1;
  void where(size_t off, int* line, int* col) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off) - 1;
    *line = static_cast<int>(it - line_starts_.begin()) + 1;
    const size_t from = (*it == memo_line_start_ && off >= memo_off_) ? memo_off_ : *it;
    const int base = from == memo_off_ && *it == memo_line_start_ ? memo_col_ : 1;
    *col = base + static_cast<int>(py::cp_count(std::string_view(src_).substr(from, off - from)));
    memo_off_ = off;
    memo_line_start_ = *it;
    memo_line_ = *line;
    memo_col_ = *col;
  }
  [[noreturn]] void error(size_t off, const std::string& msg) const {
    int line, col;
    where(std::min(off, src_.size()), &line, &col);
    syntax_error(line, col, msg);
  }
  Token& push(Tok t, size_t off, std::string text) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    where(off, &tok.line, &tok.col);
    out_.push_back(std::move(tok));
    return out_.back();
  }
  void emit_data(size_t off, std::string text) {
    if (!text.empty()) push(Tok::Data, off, std::move(text));
  }

  size_t next_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // Whitespace run in the sense of Python's \s (Unicode whitespace); returns its end.
  size_t skip_ws(size_t i) const {
    while (i < src_.size()) {
      size_t j = i;
      if (!py::is_space(py::next_cp(src_, j))) break;
      i = j;
    }
    return i;
  }

  // `{%-` strips all whitespace before the tag. Otherwise, with lstrip_blocks, a block or
  // comment tag preceded on its line only by whitespace loses that whitespace, unless `{%+`.
  // "On its line" includes the case where the previous tag ended the line (trim_blocks).
  void lstrip_text(std::string& text, char sign, bool block_like) const {
    if (sign == '-') {
      text = py::strip(text, std::nullopt, false, true);
    } else if (sign != '+' && block_like) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
        const std::string tail = text.substr(l_pos);
        if (py::strip(tail, std::nullopt, true, true).empty()) text.resize(l_pos);
      }
    }
  }

  // {%(-|+|)\s*raw\s*(-%}\s*|%})
  bool match_raw_begin(size_t k, size_t* end) const {
    size_t i = k + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_ws(i);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_ws(i + 3);
    if (src_.compare(i, 3, "-%}") == 0) {
      *end = skip_ws(i + 3);
      return true;
    }
    if (src_.compare(i, 2, "%}") == 0) {
      *end = i + 2;
      return true;
    }
    return false;
  }

  // Block end at i: `+%}`, `-%}\s*`, or `%}` plus one newline (trim_blocks). Returns end.
  size_t block_end_at(size_t i, const char* close) const {
    if (src_[i] == '+' && src_.compare(i + 1, 2, close) == 0) return i + 3;
    if (src_[i] == '-' && src_.compare(i + 1, 2, close) == 0) return skip_ws(i + 3);
    if (src_.compare(i, 2, close) == 0) {
      size_t e = i + 2;
      if (close[0] != '}' && e < src_.size() && src_[e] == '\n') ++e;
      return e;
    }
    return std::string::npos;
  }

  void lex_raw(size_t k, size_t body) {
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t j = i + 2;
      const char sign = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j] : 0;
      if (sign) ++j;
      j = skip_ws(j);
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_ws(j + 6);
      if (j >= src_.size()) break;
      const size_t e = block_end_at(j, "%}");
      if (e == std::string::npos) continue;
      std::string text = src_.substr(body, i - body);
      lstrip_text(text, sign, true);
      emit_data(body, std::move(text));
      pos_ = e;
      line_starting_ = src_[e - 1] == '\n';
      return;
    }
    error(k, "Missing end of raw directive");
  }

  void lex_comment(size_t k, size_t from) {
    for (size_t i = from; i < src_.size(); ++i) {
      const char c = src_[i];
      if (c != '+' && c != '-' && c != '#') continue;
      const size_t e = block_end_at(i, "#}");
      if (e == std::string::npos) continue;
      pos_ = e;
      line_starting_ = src_[e - 1] == '\n';
      return;
    }
    error(k, "Missing end of comment tag");
  }

  // (\d+_)*\d+
  size_t digits_us(size_t i) const {
    if (i >= src_.size() || !is_digit(src_[i])) return std::string::npos;
    while (i < src_.size()) {
      if (is_digit(src_[i])) {
        ++i;
        continue;
      }
      if (src_[i] == '_' && i + 1 < src_.size() && is_digit(src_[i + 1])) {
        ++i;
        continue;
      }
      break;
    }
    return i;
  }

  size_t match_float(size_t i) const {
    if (i > 0 && src_[i - 1] == '.') return std::string::npos;  // (?<!\.)
    const size_t d = digits_us(i);
    if (d == std::string::npos) return d;
    size_t frac = std::string::npos;
    if (d < src_.size() && src_[d] == '.') frac = digits_us(d + 1);
    auto exponent = [&](size_t at) -> size_t {
      if (at >= src_.size() || (src_[at] | 0x20) != 'e') return std::string::npos;
      ++at;
      if (at < src_.size() && (src_[at] == '+' || src_[at] == '-')) ++at;
      return digits_us(at);
    };
    if (frac != std::string::npos) {
      const size_t e = exponent(frac);
      return e != std::string::npos ? e : frac;
    }
    return exponent(d);
  }

  size_t match_int(size_t i) const {
    const size_t n = src_.size();
    if (src_[i] == '0' && i + 1 < n) {
      const char p = static_cast<char>(src_[i + 1] | 0x20);
      const int base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 0;
      if (base) {
        size_t j = i + 2;
        auto ok = [&](char c) {
          const int v = hexval(c);
          return v >= 0 && v < base;
        };
        size_t end = std::string::npos;
        while (j < n) {  // (_?digit)+
          const size_t k = src_[j] == '_' ? j + 1 : j;
          if (k < n && ok(src_[k])) {
            j = k + 1;
            end = j;
          } else break;
        }
        if (end != std::string::npos) return end;
      }
    }
    if (src_[i] == '0') {  // 0(_?0)*
      size_t j = i + 1;
      while (j < n) {
        const size_t k = src_[j] == '_' ? j + 1 : j;
        if (k < n && src_[k] == '0') j = k + 1;
        else break;
      }
      return j;
    }
    if (src_[i] >= '1' && src_[i] <= '9') {  // [1-9](_?\d)*
      size_t j = i + 1;
      while (j < n) {
        const size_t k = src_[j] == '_' ? j + 1 : j;
        if (k < n && is_digit(src_[k])) j = k + 1;
        else break;
      }
      return j;
    }
    return std::string::npos;
  }

  // Python's "unicode-escape" decoding of a literal body (after backslashreplace of non-ASCII).
  std::string unescape(size_t b, size_t e) const {
    std::string out;
    size_t i = b;
    while (i < e) {
      if (src_[i] != '\\') {
        const size_t s = i;
        py::next_cp(src_, i);
        out.append(src_, s, i - s);
        continue;
      }
      const size_t at = i;
      const char c = src_[i + 1];
      i += 2;
      auto hex = [&](int ndig, const char* what) {
        uint32_t v = 0;
        for (int k = 0; k < ndig; ++k, ++i) {
          const int h = i < e ? hexval(src_[i]) : -1;
          if (h < 0) error(at, std::string("truncated ") + what + " escape");
          v = v * 16 + static_cast<uint32_t>(h);
        }
        if (v > 0x10FFFF) error(at, "illegal Unicode character");
        if (v >= 0xD800 && v <= 0xDFFF) error(at, "surrogate code point in string literal");
        py::append_utf8(out, v);
      };
      switch (c) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': hex(2, "\\xXX"); break;
        case 'u': hex(4, "\\uXXXX"); break;
        case 'U': hex(8, "\\UXXXXXXXX"); break;
        case 'N': error(at, "\\N{...} escapes are not supported");
        default:
          if (c >= '0' && c <= '7') {
            uint32_t v = static_cast<uint32_t>(c - '0');
            for (int k = 0; k < 2 && i < e && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i) v = v * 8 + (src_[i] - '0');
            py::append_utf8(out, v);
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            // The non-ASCII character became "\xNN"/"\uNNNN" before decoding, so the
            // backslash escapes the backslash and the hex form stays as text.
            size_t j = i - 1;
            const uint32_t cp = py::next_cp(src_, j);
            char buf[16];
            std::snprintf(buf, sizeof buf, cp <= 0xFF ? "\\x%02x" : cp <= 0xFFFF ? "\\u%04x" : "\\U%08x", cp);
            out += buf;
            i = j;
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  size_t match_string(size_t i) const {
    const char q = src_[i];
    for (size_t j = i + 1; j < src_.size(); ++j) {
      if (src_[j] == '\\') {
        ++j;
        continue;
      }
      if (src_[j] == q) return j + 1;
    }
    return std::string::npos;
  }

  // Python identifiers: ASCII letters, digits, '_', and (approximately) Unicode letters.
  bool ident_char_at(size_t i, bool start) const {
    const auto c = static_cast<unsigned char>(src_[i]);
    if (c < 0x80) return start ? is_name_start(c) : is_name_char(c);
    size_t j = i;
    const uint32_t cp = py::next_cp(src_, j);
    return py::is_alpha(cp) || (!start && py::is_decimal(cp));
  }

  void lex_tag(bool variable) {
    std::vector<char> balance;
    const size_t n = src_.size();
    while (pos_ < n) {
      const size_t i = pos_;
      if (balance.empty()) {
        const size_t e = variable ? (src_[i] == '-' && src_.compare(i + 1, 2, "}}") == 0 ? skip_ws(i + 3)
                                     : src_.compare(i, 2, "}}") == 0                     ? i + 2
                                                                                         : std::string::npos)
                                  : block_end_at(i, "%}");
        if (e != std::string::npos) {
          push(variable ? Tok::VarEnd : Tok::BlockEnd, i, "");
          pos_ = e;
          line_starting_ = src_[e - 1] == '\n';
          return;
        }
      }
      const size_t w = skip_ws(i);
      if (w != i) {
        pos_ = w;
        continue;
      }
      size_t e = match_float(i);
      if (e != std::string::npos) {
        std::string digits;
        for (size_t k = i; k < e; ++k)
          if (src_[k] != '_') digits += src_[k];
        Token& t = push(Tok::Float, i, digits);
        const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.fval);
        if (r.ec == std::errc::result_out_of_range)  // Python gives inf / 0.0 here
          t.fval = digits.find("e-") != std::string::npos || digits.find("E-") != std::string::npos ? 0.0 : HUGE_VAL;
        pos_ = e;
        continue;
      }
      e = is_digit(src_[i]) ? match_int(i) : std::string::npos;
      if (e != std::string::npos) {
        std::string digits;
        for (size_t k = i; k < e; ++k)
          if (src_[k] != '_') digits += src_[k];
        int64_t v = 0;
        if (!py::parse_int(digits, 0, &v)) error(i, "integer literal out of range: " + digits);
        push(Tok::Int, i, digits).ival = v;
        pos_ = e;
        continue;
      }
      if (ident_char_at(i, true)) {
        size_t j = i;
        while (j < n && ident_char_at(j, false)) {
          if (static_cast<unsigned char>(src_[j]) < 0x80) ++j;
          else py::next_cp(src_, j);
        }
        push(Tok::Name, i, src_.substr(i, j - i));
        pos_ = j;
        continue;
      }
      if (src_[i] == '\'' || src_[i] == '"') {
        e = match_string(i);
        if (e != std::string::npos) {
          push(Tok::String, i, unescape(i + 1, e - 1));
          pos_ = e;
          continue;
        }
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                         "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
      const char* op = nullptr;
      for (const char* o : kOps)
        if (src_.compare(i, std::char_traits<char>::length(o), o) == 0) {
          op = o;
          break;
        }
      if (!op) {
        size_t j = i;
        const uint32_t cp = py::next_cp(src_, j);
        std::string shown;
        py::append_utf8(shown, cp);
        error(i, "unexpected char '" + shown + "'");
      }
      const char c = op[0];
      if (op[1] == 0 && (c == '{' || c == '(' || c == '[')) {
        balance.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
      } else if (op[1] == 0 && (c == '}' || c == ')' || c == ']')) {
        if (balance.empty()) error(i, std::string("unexpected '") + c + "'");
        if (balance.back() != c) error(i, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
        balance.pop_back();
      }
      push(Tok::Op, i, op);
      pos_ = i + std::char_traits<char>::length(op);
    }
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (!py::valid_utf8(source)) fail("chat template is not valid UTF-8");
  return Lexer(source).run();
}

}  // namespace sluice::jinja
