// Unicode character classes and case mapping with CPython's semantics (see pystr.h).
#include "jinja/pystr.h"

namespace sluice::jinja::py {

// ---------------------------------------------------------------------------------------------
// Character classes. Case mapping covers Latin (ASCII, Latin-1, Extended-A, Extended
// Additional), Greek, Cyrillic, Armenian and fullwidth Latin; other scripts are caseless here.

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_linebreak(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

static bool in(uint32_t c, uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; }

static uint32_t simple_upper(uint32_t c) {
  if (c < 0x80) return in(c, 'a', 'z') ? c - 32 : c;
  if (c == 0xB5) return 0x39C;
  if (in(c, 0xE0, 0xFE) && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (in(c, 0x100, 0x12F) || in(c, 0x132, 0x137) || in(c, 0x14A, 0x177)) return (c & 1) ? c - 1 : c;
  if (c == 0x131) return 'I';
  if (in(c, 0x139, 0x148) || in(c, 0x179, 0x17E)) return (c & 1) ? c : c - 1;
  if (c == 0x17F) return 'S';
  if (c == 0x3AC) return 0x386;
  if (in(c, 0x3AD, 0x3AF)) return c - 37;
  if (in(c, 0x3B1, 0x3C1) || in(c, 0x3C3, 0x3CB)) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3CC) return 0x38C;
  if (in(c, 0x3CD, 0x3CE)) return c - 63;
  if (in(c, 0x430, 0x44F)) return c - 32;
  if (in(c, 0x450, 0x45F)) return c - 80;
  if (in(c, 0x460, 0x481) || in(c, 0x48A, 0x4BF) || in(c, 0x4D0, 0x52F)) return (c & 1) ? c - 1 : c;
  if (in(c, 0x4C1, 0x4CE)) return (c & 1) ? c : c - 1;
  if (c == 0x4CF) return 0x4C0;
  if (in(c, 0x561, 0x586)) return c - 48;
  if (in(c, 0x1E00, 0x1E95) || in(c, 0x1EA0, 0x1EFF)) return (c & 1) ? c - 1 : c;
  if (in(c, 0xFF41, 0xFF5A)) return c - 32;
  return c;
}

static uint32_t simple_lower(uint32_t c) {
  if (c < 0x80) return in(c, 'A', 'Z') ? c + 32 : c;
  if (in(c, 0xC0, 0xDE) && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (in(c, 0x100, 0x12F) || in(c, 0x132, 0x137) || in(c, 0x14A, 0x177)) return (c & 1) ? c : c + 1;
  if (c == 0x130) return 'i';
  if (in(c, 0x139, 0x148) || in(c, 0x179, 0x17E)) return (c & 1) ? c + 1 : c;
  if (c == 0x386) return 0x3AC;
  if (in(c, 0x388, 0x38A)) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (in(c, 0x38E, 0x38F)) return c + 63;
  if (in(c, 0x391, 0x3A1) || in(c, 0x3A3, 0x3AB)) return c + 32;
  if (in(c, 0x410, 0x42F)) return c + 32;
  if (in(c, 0x400, 0x40F)) return c + 80;
  if (in(c, 0x460, 0x481) || in(c, 0x48A, 0x4BF) || in(c, 0x4D0, 0x52F)) return (c & 1) ? c : c + 1;
  if (c == 0x4C0) return 0x4CF;
  if (in(c, 0x4C1, 0x4CE)) return (c & 1) ? c + 1 : c;
  if (in(c, 0x531, 0x556)) return c + 48;
  if (in(c, 0x1E00, 0x1E95) || in(c, 0x1EA0, 0x1EFF)) return (c & 1) ? c : c + 1;
  if (c == 0x1E9E) return 0xDF;
  if (in(c, 0xFF21, 0xFF3A)) return c + 32;
  return c;
}

bool is_upper(uint32_t c) { return simple_lower(c) != c; }
bool is_lower(uint32_t c) { return simple_upper(c) != c || c == 0xDF || c == 0x138 || c == 0x149; }
bool is_cased(uint32_t c) { return is_upper(c) || is_lower(c); }

bool is_alpha(uint32_t c) {
  if (c < 0x80) return in(c, 'a', 'z') || in(c, 'A', 'Z');
  if (is_cased(c) || c == 0xAA || c == 0xBA) return true;
  // Common caseless scripts (approximation of the Unicode letter categories).
  return in(c, 0x5D0, 0x5EA) || in(c, 0x620, 0x64A) || in(c, 0x904, 0x939) || in(c, 0xE01, 0xE30) ||
         in(c, 0x3041, 0x3096) || in(c, 0x30A1, 0x30FA) || in(c, 0x3400, 0x4DBF) || in(c, 0x4E00, 0x9FFF) ||
         in(c, 0xAC00, 0xD7A3) || in(c, 0x20000, 0x2FA1F);
}

bool is_decimal(uint32_t c) {
  return in(c, '0', '9') || in(c, 0x660, 0x669) || in(c, 0x6F0, 0x6F9) || in(c, 0x966, 0x96F) || in(c, 0xFF10, 0xFF19);
}

// str.isprintable() is false for the categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs except
// U+0020. Without the Unicode database we list the common members of those categories;
// unassigned code points (Cn) count as printable here.
bool is_printable(uint32_t c) {
  if (c < 0x20 || in(c, 0x7F, 0xA0) || c == 0xAD) return false;
  if (c < 0x300) return true;
  return !(in(c, 0x600, 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x1680 || c == 0x180E ||
           in(c, 0x2000, 0x200F) || in(c, 0x2028, 0x202F) || in(c, 0x205F, 0x206F) || c == 0x3000 ||
           in(c, 0xD800, 0xF8FF) || c == 0xFEFF || in(c, 0xFFF9, 0xFFFB) || c == 0xFFFE || c == 0xFFFF ||
           c == 0x110BD || in(c, 0x1D173, 0x1D17A) || c == 0xE0001 || in(c, 0xE0020, 0xE007F) || c >= 0xF0000);
}

// Full mappings that are not one code point to one code point.
static void append_upper(std::string& out, uint32_t c, bool title) {
  if (c == 0xDF) {
    out += title ? "Ss" : "SS";
    return;
  }
  if (c == 0x149) {
    out += "\xCA\xBCN";
    return;
  }
  append_utf8(out, simple_upper(c));
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_upper(out, next_cp(s, i), false);
  return out;
}

// Greek capital sigma lowers to final sigma at the end of a word (CPython implements the
// Unicode Final_Sigma condition; we use "cased before, not cased after").
static void append_lower(std::string& out, const std::vector<uint32_t>& cps, size_t k) {
  const uint32_t c = cps[k];
  if (c == 0x130) {
    out += "i\xCC\x87";
    return;
  }
  if (c == 0x3A3) {
    const bool before = k > 0 && is_cased(cps[k - 1]);
    const bool after = k + 1 < cps.size() && is_cased(cps[k + 1]);
    append_utf8(out, before && !after ? 0x3C2 : 0x3C3);
    return;
  }
  append_utf8(out, simple_lower(c));
}

std::string lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& ch : out)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch + 32);
    return out;
  }
  const auto cps = decode(s);
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < cps.size(); ++k) append_lower(out, cps, k);
  return out;
}

std::string capitalize(std::string_view s) {
  const auto cps = decode(s);
  std::string out;
  for (size_t k = 0; k < cps.size(); ++k) {
    if (k == 0) append_upper(out, cps[k], true);
    else append_lower(out, cps, k);
  }
  return out;
}

std::string title(std::string_view s) {
  const auto cps = decode(s);
  std::string out;
  bool prev_cased = false;
  for (size_t k = 0; k < cps.size(); ++k) {
    if (prev_cased) append_lower(out, cps, k);
    else append_upper(out, cps[k], true);
    prev_cased = is_cased(cps[k]);
  }
  return out;
}

// jinja2's `title` filter: split at runs of [-\s({[<] (kept), then item[0].upper() +
// item[1:].lower() for every piece, separators included (they are unchanged by it).
std::string jinja_title(std::string_view s) {
  const auto cps = decode(s);
  auto is_sep = [](uint32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c); };
  std::string out;
  size_t k = 0;
  while (k < cps.size()) {
    const bool sep = is_sep(cps[k]);
    size_t e = k;
    while (e < cps.size() && is_sep(cps[e]) == sep) ++e;
    std::vector<uint32_t> piece(cps.begin() + k, cps.begin() + e);
    append_upper(out, piece[0], false);
    for (size_t j = 1; j < piece.size(); ++j) append_lower(out, piece, j);
    k = e;
  }
  return out;
}

std::string swapcase(std::string_view s) {
  const auto cps = decode(s);
  std::string out;
  for (size_t k = 0; k < cps.size(); ++k) {
    if (is_upper(cps[k])) append_lower(out, cps, k);
    else if (is_lower(cps[k])) append_upper(out, cps[k], false);
    else append_utf8(out, cps[k]);
  }
  return out;
}

}  // namespace sluice::jinja::py
