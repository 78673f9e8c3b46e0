// Python `str` semantics over UTF-8 std::string, as jinja2 inherits them from CPython.
//
// Chat templates run under jinja2 on Python strings: indices and lengths count code points,
// `strip()` knows Unicode whitespace, `str(1.0)` is "1.0". These helpers reproduce the parts
// templates use, over valid UTF-8 (every string that reaches them was validated on entry).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::jinja::py {

// --- UTF-8 ------------------------------------------------------------------------------
bool valid_utf8(std::string_view s);
// Decodes the code point starting at s[i] and advances i. s must be valid UTF-8.
uint32_t next_cp(std::string_view s, size_t& i);
void append_utf8(std::string& out, uint32_t cp);
std::vector<uint32_t> decode(std::string_view s);
std::string encode(const uint32_t* cps, size_t n);
inline std::string encode(const std::vector<uint32_t>& v) { return encode(v.data(), v.size()); }
size_t cp_count(std::string_view s);
bool is_ascii(std::string_view s);
// Byte offset of code point index `cp` (0..cp_count); clamps to s.size().
size_t byte_offset(std::string_view s, int64_t cp);

// --- character classes (CPython's unicodectype subset) ------------------------------------
bool is_space(uint32_t cp);      // str.isspace(): also what `re` calls \s
bool is_linebreak(uint32_t cp);  // str.splitlines() boundaries
bool is_upper(uint32_t cp);
bool is_lower(uint32_t cp);
bool is_cased(uint32_t cp);
bool is_alpha(uint32_t cp);
bool is_decimal(uint32_t cp);
bool is_printable(uint32_t cp);  // approximates str.isprintable() (see pystr.cpp)

// --- str methods ---------------------------------------------------------------------------
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);   // str.capitalize()
std::string title(std::string_view s);        // str.title(): "they're" -> "They'Re"
std::string jinja_title(std::string_view s);  // the `title` filter: words split at [-\s({[<]
std::string swapcase(std::string_view s);
// strip/lstrip/rstrip; chars == nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// split/rsplit; sep == nullopt splits on runs of whitespace. Throws on an empty separator.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
int64_t count(std::string_view s, std::string_view sub);
// find/rfind in code points, -1 when absent; [start, end) are Python slice bounds.
int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end,
             bool reverse);
std::string center(std::string_view s, int64_t width, uint32_t fill, int align /*-1 l, 0 c, 1 r*/);
// Python's repr() of a str: quotes and escapes chosen the way CPython chooses them.
std::string repr(std::string_view s);

// --- numbers -------------------------------------------------------------------------------
std::string float_repr(double d);  // repr(float): shortest round-trip, "1e+16", "1.0"
std::string int_str(int64_t v);
// int(s, base) for a str: whitespace, sign, underscores, 0x/0o/0b prefixes. False on error
// (including values outside int64, which CPython would accept as big integers).
bool parse_int(std::string_view s, int base, int64_t* out);
// float(s) for a str: decimal, exponent, underscores, inf/infinity/nan. False on error.
bool parse_float(std::string_view s, double* out);

}  // namespace sluice::jinja::py
