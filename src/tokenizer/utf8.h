// UTF-8 helpers with the exact (lenient) rules llama.cpp's tokenizers use, plus a strict
// validator for the streaming decoder. Internal to src/tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::tok {

// Length of a "character" from its first byte's high nibble, without validation
// (spec §6.1 step 2): 0x00-0xBF -> 1 (a stray continuation byte is its own symbol),
// 0xC0-0xDF -> 2, 0xE0-0xEF -> 3, 0xF0-0xFF -> 4. Callers clip to the bytes left.
inline size_t utf8_len_from_lead(uint8_t b) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[b >> 4];
}

// True if `s` is well-formed UTF-8 (RFC 3629: no overlongs, surrogates or > U+10FFFF).
bool utf8_is_valid(std::string_view s);

// Appends code point `cpt` (<= 0x10FFFF) as UTF-8.
void utf8_append(std::string& out, uint32_t cpt);

// Rebuilds `s` the way llama.cpp's BPE pre-split does (spec §7.1 step 2): decode code points
// leniently (overlong forms and surrogates are accepted as decoded; a byte that cannot start
// a complete sequence becomes U+FFFD and one byte is skipped), then re-encode. Identity for
// valid UTF-8. A decoded value above U+10FFFF (which llama.cpp cannot re-encode and throws
// on) becomes U+FFFD here.
std::string utf8_rebuild_lenient(std::string_view s);

// Length of the longest prefix of `s` that a streaming decoder may release now, and the
// number of trailing bytes to hold back: those form the valid beginning of a character
// whose remaining bytes have not arrived. Invalid bytes before that point are replaced by
// U+FFFD in `out` (one per maximal ill-formed subpart, the Unicode "best practice").
// Returns the number of input bytes consumed; the rest is held.
size_t utf8_sanitize_prefix(std::string_view s, std::string& out, bool final);

}  // namespace sluice::tok
