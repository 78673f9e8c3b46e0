#include "tokenizer/utf8.h"

namespace sluice::tok {

namespace {

inline bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Strict decoding of one character at s[i]. Returns its length (1..4) when the bytes at i
// form a complete well-formed character; 0 when they are a valid but incomplete prefix
// that ends at the end of `s`; and -k when the first k bytes are a maximal ill-formed
// subpart (k >= 1), to be replaced by one U+FFFD.
int strict_step(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;  // continuation byte, C0/C1, F5..FF: never valid
  }
  for (int k = 1; k < need; ++k) {
    if (i + k >= s.size()) return 0;  // valid so far, more bytes may come
    const auto b = static_cast<uint8_t>(s[i + k]);
    const bool ok = (k == 1) ? (b >= lo && b <= hi) : is_cont(b);
    if (!ok) return -k;
  }
  return need;
}

}  // namespace

bool utf8_is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    const int n = strict_step(s, i);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

void utf8_append(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

std::string utf8_rebuild_lenient(std::string_view s) {
  // llama.cpp unicode_cpt_from_utf8: the lead byte's bits pick the length, each following
  // byte must be a continuation byte and present; no check for overlongs or surrogates.
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  const size_t n = s.size();
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  while (i < n) {
    const uint8_t b0 = b(i);
    uint32_t cpt = 0xFFFD;
    size_t len = 1;
    if (!(b0 & 0x80)) {
      cpt = b0;
    } else if (!(b0 & 0x40)) {
      // stray continuation byte
    } else if (!(b0 & 0x20)) {
      if (i + 1 < n && is_cont(b(i + 1))) {
        cpt = (uint32_t(b0 & 0x1F) << 6) | (b(i + 1) & 0x3F);
        len = 2;
      }
    } else if (!(b0 & 0x10)) {
      if (i + 2 < n && is_cont(b(i + 1)) && is_cont(b(i + 2))) {
        cpt = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F);
        len = 3;
      }
    } else if (!(b0 & 0x08)) {
      if (i + 3 < n && is_cont(b(i + 1)) && is_cont(b(i + 2)) && is_cont(b(i + 3))) {
        cpt = (uint32_t(b0 & 0x07) << 18) | (uint32_t(b(i + 1) & 0x3F) << 12) | (uint32_t(b(i + 2) & 0x3F) << 6) |
              (b(i + 3) & 0x3F);
        len = 4;
        if (cpt > 0x10FFFF) cpt = 0xFFFD;
      }
    }
    utf8_append(out, cpt);
    i += len;
  }
  return out;
}

size_t utf8_sanitize_prefix(std::string_view s, std::string& out, bool final) {
  size_t i = 0;
  while (i < s.size()) {
    const int n = strict_step(s, i);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else if (n < 0) {
      out.append("\xEF\xBF\xBD");
      i += static_cast<size_t>(-n);
    } else {  // incomplete tail
      if (!final) return i;
      out.append("\xEF\xBF\xBD");
      return s.size();
    }
  }
  return i;
}

}  // namespace sluice::tok
