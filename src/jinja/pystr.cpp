#include "jinja/pystr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace sluice::jinja::py {

// ---------------------------------------------------------------------------------------------
// UTF-8

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else return false;
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Reject overlong forms, surrogates (CPython's UTF-8 codec does too) and > U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

uint32_t next_cp(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
  uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<uint32_t> decode(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_cp(s, i));
  return out;
}

std::string encode(const uint32_t* cps, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t k = 0; k < n; ++k) append_utf8(out, cps[k]);
  return out;
}

size_t cp_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t byte_offset(std::string_view s, int64_t cp) {
  if (cp <= 0) return 0;
  size_t i = 0;
  for (int64_t k = 0; k < cp && i < s.size(); ++k) next_cp(s, i);
  return i;
}

// ---------------------------------------------------------------------------------------------
// strip / split / replace

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars) set = decode(*chars);
  auto strippable = [&](uint32_t c) {
    if (!chars) return is_space(c);
    for (uint32_t x : set)
      if (x == c) return true;
    return false;
  };
  const auto cps = decode(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  return encode(cps.data() + b, e - b);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t pos = 0;
    while (maxsplit-- > 0) {
      const size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const auto cps = decode(s);
  size_t k = 0;
  const size_t n = cps.size();
  while (true) {
    while (k < n && is_space(cps[k])) ++k;
    if (k == n) break;
    if (maxsplit-- <= 0) {  // the rest, trailing whitespace kept (CPython does the same)
      out.push_back(encode(cps.data() + k, n - k));
      break;
    }
    size_t e = k;
    while (e < n && !is_space(cps[e])) ++e;
    out.push_back(encode(cps.data() + k, e - k));
    k = e;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t end = s.size();
    while (maxsplit-- > 0 && end >= sep->size()) {
      const size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const auto cps = decode(s);
    size_t e = cps.size();
    while (true) {
      while (e > 0 && is_space(cps[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit-- <= 0) {
        out.push_back(encode(cps.data(), e));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(cps[b - 1])) --b;
      out.push_back(encode(cps.data() + b, e - b));
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const auto cps = decode(s);
  std::vector<std::string> out;
  size_t b = 0, k = 0;
  while (k < cps.size()) {
    if (!is_linebreak(cps[k])) {
      ++k;
      continue;
    }
    size_t eol = k + 1;
    if (cps[k] == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
    out.push_back(encode(cps.data() + b, (keepends ? eol : k) - b));
    b = k = eol;
  }
  if (b < cps.size()) out.push_back(encode(cps.data() + b, cps.size() - b));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {  // CPython inserts `repl` before every code point and at the end
    size_t i = 0;
    while (i < s.size()) {
      if (count-- > 0) out += repl;
      const size_t start = i;
      next_cp(s, i);
      out.append(s.substr(start, i - start));
    }
    if (count > 0) out += repl;
    return out;
  }
  size_t pos = 0;
  while (count-- > 0) {
    const size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out += repl;
    pos = f + old.size();
  }
  out.append(s.substr(pos));
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(cp_count(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end,
             bool reverse) {
  const auto len = static_cast<int64_t>(cp_count(s));
  int64_t b = start.value_or(0), e = end.value_or(len);
  if (b < 0) b = std::max<int64_t>(0, b + len);
  if (e < 0) e = std::max<int64_t>(0, e + len);
  if (e > len) e = len;
  if (b > len || b > e) return -1;
  const size_t bb = byte_offset(s, b), eb = byte_offset(s, e);
  const std::string_view window = s.substr(bb, eb - bb);
  const size_t f = reverse ? window.rfind(sub) : window.find(sub);
  if (f == std::string_view::npos) return -1;
  return b + static_cast<int64_t>(cp_count(window.substr(0, f)));
}

std::string center(std::string_view s, int64_t width, uint32_t fill, int align) {
  const auto len = static_cast<int64_t>(cp_count(s));
  if (width <= len) return std::string(s);
  const int64_t marg = width - len;
  int64_t left = align < 0 ? 0 : align > 0 ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t k = 0; k < left; ++k) append_utf8(out, fill);
  out += s;
  for (int64_t k = 0; k < marg - left; ++k) append_utf8(out, fill);
  return out;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = next_cp(s, i);
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c < 0x7F || is_printable(c)) append_utf8(out, c);
    else if (c <= 0xFF) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c <= 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", c);
      out += buf;
    }
  }
  out += quote;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Numbers

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then CPython's layout rule for repr(): positional notation
  // when the decimal exponent is in [-4, 16), otherwise d.ddde+XX.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::atoi(sci.c_str() + epos + 1);
  const int decpt = exp10 + 1;  // position of the decimal point relative to the digits
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return out;
}

std::string int_str(int64_t v) { return std::to_string(v); }

static std::string_view strip_ws(std::string_view s) {
  const auto b = strip(s, std::nullopt, true, true);
  // strip() returns a fresh string; find the same range in s to keep a view.
  const size_t at = s.find(b);
  return b.empty() ? std::string_view{} : s.substr(at, b.size());
}

static int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

bool parse_int(std::string_view s, int base, int64_t* out) {
  s = strip_ws(s);
  if (base != 0 && (base < 2 || base > 36)) return false;
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  bool prefixed = false;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      s.remove_prefix(2);
      prefixed = true;
    }
  }
  if (base == 0) {
    // Without a prefix base 0 means decimal, and a leading zero is only allowed for 0 itself.
    base = 10;
    bool all_zero = true;
    for (char c : s) all_zero = all_zero && (c == '0' || c == '_');
    if (s.size() > 1 && s[0] == '0' && !all_zero) return false;
  }
  if (s.empty()) return false;
  unsigned __int128 v = 0;
  bool prev_us = !prefixed;  // an underscore may follow a prefix, never start a number
  bool any = false;
  for (char c : s) {
    if (c == '_') {
      if (prev_us) return false;
      prev_us = true;
      continue;
    }
    const int d = digit_value(c);
    if (d >= base) return false;
    v = v * base + d;
    if (v > static_cast<unsigned __int128>(INT64_MAX) + 1) return false;
    prev_us = false;
    any = true;
  }
  if (!any || prev_us) return false;
  if (!neg && v > static_cast<unsigned __int128>(INT64_MAX)) return false;
  *out = neg ? static_cast<int64_t>(-static_cast<__int128>(v)) : static_cast<int64_t>(v);
  return true;
}

bool parse_float(std::string_view s, double* out) {
  s = strip_ws(s);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  std::string low;
  for (char c : s) low += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  if (low == "inf" || low == "infinity") {
    *out = neg ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (low == "nan") {
    *out = neg ? -NAN : NAN;
    return true;
  }
  // digits with single underscores between digits, optional fraction and exponent
  std::string clean;
  size_t i = 0;
  auto digits = [&](bool required) {
    size_t start = clean.size();
    while (i < s.size()) {
      if (s[i] >= '0' && s[i] <= '9') {
        clean += s[i++];
        continue;
      }
      if (s[i] == '_' && clean.size() > start && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') {
        ++i;
        continue;
      }
      break;
    }
    return !required || clean.size() > start;
  };
  const bool int_part = digits(false);
  bool frac_part = false;
  if (i < s.size() && s[i] == '.') {
    clean += s[i++];
    frac_part = digits(false) && clean.back() != '.';
  }
  if (!int_part && !frac_part) return false;
  bool neg_exp = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    clean += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      neg_exp = s[i] == '-';
      clean += s[i++];
    }
    if (!digits(true)) return false;
  }
  if (i != s.size()) return false;
  double v = 0;
  auto r = std::from_chars(clean.data(), clean.data() + clean.size(), v);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars reports overflow/underflow; CPython returns inf / 0.0 for those.
    v = neg_exp ? 0.0 : HUGE_VAL;
  } else if (r.ec != std::errc() || r.ptr != clean.data() + clean.size()) {
    return false;
  }
  *out = neg ? -v : v;
  return true;
}

}  // namespace sluice::jinja::py
