// JSON Schema front end, scalar part: literals, strings (length, pattern, format) and
// numbers with bounds.
#include <cmath>

#include "base/error.h"
#include "grammar/json_schema_impl.h"

namespace sluice::grammar::detail {

namespace {

// The formats as anchored patterns over the decoded string. Dates have per-month day
// ranges (February stops at 28: leap days are never generated) and years 1000-9999.
// Fractional seconds stop at 9 digits (nanoseconds). An email has a local part of at most
// 64 octets (RFC 5321) and 2-4 domain labels of at most 63 octets each (RFC 1035), so the
// domain stays within 255.
const char* const kDate =
    "[1-9]\\d{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|"
    "2[0-8]))";
const char* const kTime = "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,9})?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)";
const char* const kUuid = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
const char* const kEmail = "[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\\.[A-Za-z0-9-]{1,63}){1,3}";
const char* const kIpv4 = "(?:(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";

uint32_t length_of(const Json& s, const char* key, const std::string& path, size_t limit) {
  const Json& v = s.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    fail("json schema: '%s' at %s must be a non-negative integer", key, path.c_str());
  if (v.get<uint64_t>() > limit)
    fail("json schema: '%s' at %s over the limit %zu (limit max_repeat)", key, path.c_str(), limit);
  return v.get<uint32_t>();
}

std::string digits_of(uint64_t v) { return std::to_string(v); }

Expr digit_range(char a, char b) { return bytes(ByteSet::range(static_cast<uint8_t>(a), static_cast<uint8_t>(b))); }

// Decimal strings of one length between a and b (a <= b, same length).
Expr same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return empty();
  if (a.size() == 1) return digit_range(a[0], b[0]);
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0]) return seq({lit(a.substr(0, 1)), same_length(ra, rb)});
  if (ra == std::string(ra.size(), '0') && rb == std::string(rb.size(), '9'))
    return seq({digit_range(a[0], b[0]),
                repeat(digit_range('0', '9'), static_cast<uint32_t>(ra.size()), static_cast<uint32_t>(ra.size()))});
  std::vector<Expr> alts{seq({lit(a.substr(0, 1)), same_length(ra, std::string(ra.size(), '9'))})};
  if (a[0] + 1 <= b[0] - 1)
    alts.push_back(
        seq({digit_range(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1)),
             repeat(digit_range('0', '9'), static_cast<uint32_t>(ra.size()), static_cast<uint32_t>(ra.size()))}));
  alts.push_back(seq({lit(b.substr(0, 1)), same_length(std::string(rb.size(), '0'), rb)}));
  return alt(std::move(alts));
}

constexpr uint64_t kMaxBound = 1000000000000000000ull;  // 1e18: bounds beyond are rejected

}  // namespace

Expr SchemaCompiler::quoted(Expr content) {
  if (native_ && opts_.native_quote_token < 0) return seq({lit("<|\"|>"), std::move(content), lit("<|\"|>")});
  if (native_) return seq({token(opts_.native_quote_token), std::move(content), token(opts_.native_quote_token)});
  return seq({lit("\""), std::move(content), lit("\"")});
}

Expr SchemaCompiler::json_literal(const Json& v) {
  if (!native_) return lit(v.dump());
  if (v.is_string()) return quoted(lit(v.get<std::string>()));
  if (v.is_object()) {
    std::vector<Expr> parts{lit("{")};
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) parts.push_back(lit(","));
      first = false;
      parts.push_back(lit(k + ":"));
      parts.push_back(json_literal(x));
    }
    parts.push_back(lit("}"));
    return seq(std::move(parts));
  }
  if (v.is_array()) {
    std::vector<Expr> parts{lit("[")};
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) parts.push_back(lit(","));
      parts.push_back(json_literal(v[i]));
    }
    parts.push_back(lit("]"));
    return seq(std::move(parts));
  }
  return lit(v.dump());
}

Expr SchemaCompiler::format_expr(const std::string& fmt, const std::string& path) {
  std::string re;
  if (fmt == "date") re = kDate;
  else if (fmt == "time") re = kTime;
  else if (fmt == "date-time") re = std::string(kDate) + "T" + kTime;
  else if (fmt == "uuid") re = kUuid;
  else if (fmt == "email") re = kEmail;
  else if (fmt == "ipv4") re = kIpv4;
  else fail("json schema: unsupported format '%s' at %s", fmt.c_str(), path.c_str());
  return regex_to_expr("^" + re + "$", rx_);
}

Expr SchemaCompiler::string_expr(const Json& s, const std::string& path) {
  const bool has_len = s.contains("minLength") || s.contains("maxLength");
  if (s.contains("pattern") + s.contains("format") + has_len > 1)
    fail("json schema: combining 'pattern', 'format' and 'minLength'/'maxLength' at %s is not supported", path.c_str());
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) fail("json schema: 'pattern' at %s must be a string", path.c_str());
    return quoted(regex_to_expr(s["pattern"].get<std::string>(), rx_));
  }
  if (s.contains("format")) {
    if (!s["format"].is_string()) fail("json schema: 'format' at %s must be a string", path.c_str());
    return quoted(format_expr(s["format"].get<std::string>(), path));
  }
  if (!has_len) return quoted(star(char_));
  const uint32_t lo = s.contains("minLength") ? length_of(s, "minLength", path, opts_.limits.max_repeat) : 0;
  const uint32_t hi = s.contains("maxLength") ? length_of(s, "maxLength", path, opts_.limits.max_repeat) : kInf;
  if (lo > hi) fail("json schema: minLength > maxLength at %s", path.c_str());
  return quoted(repeat(char_, lo, hi));
}

// Decimal strings (no leading zeros) of the integers in [lo, hi], or [lo, inf).
Expr SchemaCompiler::digits_range(uint64_t lo, uint64_t hi, bool unbounded) {
  const std::string a = digits_of(lo);
  const size_t last = unbounded ? a.size() : digits_of(hi).size();
  std::vector<Expr> alts;
  for (size_t len = a.size(); len <= last; ++len) {
    const std::string from = len == a.size() ? a : "1" + std::string(len - 1, '0');
    const std::string to = (!unbounded && len == last) ? digits_of(hi) : std::string(len, '9');
    alts.push_back(same_length(from, to));
  }
  if (unbounded)
    alts.push_back(seq({ref(digit1_), repeat(digit_range('0', '9'), static_cast<uint32_t>(a.size()), kInf)}));
  return alt(std::move(alts));
}

// Magnitudes m with a <= m <= b (strict where open); b absent means no upper bound.
// Integers: digit strings. Numbers: an integer part and an optional fraction, exact at
// the bounds (a fraction above an open lower bound must be non-zero, the upper bound
// itself only with an all-zero fraction); no exponent.
std::optional<Expr> SchemaCompiler::magnitude(uint64_t a, bool a_open, std::optional<uint64_t> b, bool b_open,
                                              bool integer) {
  if (integer) {
    if (a_open) ++a;
    if (b && b_open) {
      if (*b == 0) return std::nullopt;
      *b -= 1;
    }
    if (b && a > *b) return std::nullopt;
    return digits_range(a, b.value_or(0), !b);
  }
  const Expr digit = digit_range('0', '9');
  const Expr frac_any = opt(seq({lit("."), repeat(digit, 1, kMaxFractionDigits)}));
  const Expr frac_zero = opt(seq({lit("."), repeat(lit("0"), 1, kMaxFractionDigits)}));
  // A non-zero fraction: k zeros, a non-zero digit, then any digits up to the cap.
  std::vector<Expr> nonzero;
  for (uint32_t k = 0; k < kMaxFractionDigits; ++k)
    nonzero.push_back(
        seq({repeat(lit("0"), k, k), digit_range('1', '9'), repeat(digit, 0, kMaxFractionDigits - 1 - k)}));
  const Expr frac_nonzero = seq({lit("."), alt(std::move(nonzero))});
  if (b && a == *b) {
    if (a_open || b_open) return std::nullopt;
    return seq({lit(digits_of(a)), frac_zero});
  }
  if (b && a > *b) return std::nullopt;
  std::vector<Expr> alts{seq({lit(digits_of(a)), a_open ? frac_nonzero : frac_any})};
  if (!b) alts.push_back(seq({digits_range(a + 1, 0, true), frac_any}));
  else if (a + 1 <= *b - 1) alts.push_back(seq({digits_range(a + 1, *b - 1, false), frac_any}));
  if (b && !b_open) alts.push_back(seq({lit(digits_of(*b)), frac_zero}));
  return alt(std::move(alts));
}

Expr SchemaCompiler::number_expr(const Json& s, const std::string& path, bool integer) {
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;
  auto bound = [&](const char* key, std::optional<double>& slot, bool& open, bool exclusive) {
    if (!s.contains(key)) return;
    const Json& v = s[key];
    if (v.is_boolean()) fail("json schema: '%s' as a boolean (draft 4) at %s is not supported", key, path.c_str());
    if (!v.is_number()) fail("json schema: '%s' at %s must be a number", key, path.c_str());
    const double x = v.get<double>();
    if (std::fabs(x) >= static_cast<double>(kMaxBound))
      fail("json schema: '%s' at %s is beyond +-1e18", key, path.c_str());
    if (!integer && x != std::floor(x))
      fail("json schema: a non-integer '%s' on a number at %s is not supported", key, path.c_str());
    const bool is_lo = &slot == &lo;
    // Keep the tighter of minimum / exclusiveMinimum (maximum / exclusiveMaximum).
    if (!slot || (is_lo ? x > *slot || (x == *slot && exclusive) : x < *slot || (x == *slot && exclusive))) {
      slot = x;
      open = exclusive;
    }
  };
  bound("minimum", lo, lo_open, false);
  bound("exclusiveMinimum", lo, lo_open, true);
  bound("maximum", hi, hi_open, false);
  bound("exclusiveMaximum", hi, hi_open, true);
  if (!lo && !hi) {
    if (integer) return seq({opt(lit("-")), alt({lit("0"), seq({ref(digit1_), star(digit_range('0', '9'))})})});
    return ref(number_);
  }
  if (integer) {  // integer bounds: round inwards, then closed
    if (lo) *lo = lo_open ? std::floor(*lo) + 1 : std::ceil(*lo);
    if (hi) *hi = hi_open ? std::ceil(*hi) - 1 : std::floor(*hi);
    lo_open = hi_open = false;
  }
  std::vector<Expr> alts;
  // x >= 0: magnitude in [max(lo, 0), hi].
  if (!hi || *hi > 0 || (*hi == 0 && !hi_open)) {
    const bool lo_pos = lo && *lo >= 0;
    auto m = magnitude(lo_pos ? static_cast<uint64_t>(*lo) : 0, lo_pos && lo_open,
                       hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt, hi_open, integer);
    if (m) alts.push_back(std::move(*m));
  }
  // x < 0: "-" and a magnitude in (max(0, -hi), -lo] — zero itself belongs to the branch above.
  if (!lo || *lo < 0) {
    const bool hi_neg = hi && *hi <= 0;
    const uint64_t a = hi_neg ? static_cast<uint64_t>(-*hi) : 0;
    const bool a_open = hi_neg ? (hi_open || (a == 0)) : true;
    auto m = magnitude(a, a_open, lo ? std::optional<uint64_t>(static_cast<uint64_t>(-*lo)) : std::nullopt, lo_open,
                       integer);
    if (m) alts.push_back(seq({lit("-"), std::move(*m)}));
  }
  if (alts.empty()) fail("json schema: no %s satisfies the bounds at %s", integer ? "integer" : "number", path.c_str());
  return alt(std::move(alts));
}

}  // namespace sluice::grammar::detail
