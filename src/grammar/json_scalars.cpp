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
// IPv6 in its full form (eight groups); RFC 4291's compressed forms are never generated.
const char* const kIpv6 = "[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){7}";
// Up to 4 labels (RFC 1123: letters, digits, inner hyphens, at most 63 octets; the last at
// most 61 and starting with a letter), so at most 253 octets (RFC 1035).
const char* const kHostname =
    "(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.){0,3}[A-Za-z](?:[A-Za-z0-9-]{0,59}[A-Za-z0-9])?";
// ISO 8601 durations, each number at most 4 digits.
const char* const kDuration =
    "P(?:\\d{1,4}W|(?:\\d{1,4}Y(?:\\d{1,4}M)?(?:\\d{1,4}D)?|\\d{1,4}M(?:\\d{1,4}D)?|\\d{1,4}D)(?:T(?:\\d{1,4}H(?:\\d{1,4}M)?(?:"
    "\\d{1,4}S)?|\\d{1,4}M(?:\\d{1,4}S)?|\\d{1,4}S))?|T(?:\\d{1,4}H(?:\\d{1,4}M)?(?:\\d{1,4}S)?|\\d{1,4}M(?:\\d{1,4}S)?|\\d{1,4}S))";
// An absolute URI with an authority (RFC 3986), from unreserved characters only: scheme,
// host (dot-separated names), optional port, path segments, optional query.
const char* const kUri =
    "[a-z][a-z0-9+.-]{0,15}://[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*(?::\\d{1,5})?(?:/[A-Za-z0-9._~-]*)*(?:\\?[A-Za-z0-9._~=&-]*)?";
const char* const kJsonPointer = "(?:/[A-Za-z0-9_.-]*)*";

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

// The regex of a format the grammar enforces; "" for a format it ignores. Formats JSON
// Schema defines map to a conservative subset (an IRI generated as a URI, ...); names it
// does not define (OpenAPI's int32, byte, ...) are annotations.
static std::string format_regex(const std::string& fmt) {
  if (fmt == "date") return kDate;
  if (fmt == "time") return kTime;
  if (fmt == "date-time") return std::string(kDate) + "T" + kTime;
  if (fmt == "uuid") return kUuid;
  if (fmt == "email" || fmt == "idn-email") return kEmail;
  if (fmt == "ipv4") return kIpv4;
  if (fmt == "ipv6") return kIpv6;
  if (fmt == "hostname" || fmt == "idn-hostname") return kHostname;
  if (fmt == "duration") return kDuration;
  if (fmt == "uri" || fmt == "uri-reference" || fmt == "iri" || fmt == "iri-reference" || fmt == "uri-template")
    return kUri;
  if (fmt == "json-pointer") return kJsonPointer;
  if (fmt == "relative-json-pointer") return std::string("(?:0|[1-9]\\d{0,5})(?:#|") + kJsonPointer + ")";
  if (fmt == "regex") return "[A-Za-z0-9 _-]*";  // literal text is a valid regex
  return "";
}

// A format's strings with min..max characters.
Expr SchemaCompiler::format_expr(const std::string& fmt, const std::string& path, uint64_t lo, uint64_t hi) {
  auto e = regex_to_expr_bounded("^" + format_regex(fmt) + "$", rx_, lo, hi);
  if (!e) {
    unsupported("'format' \"" + fmt + "\" with 'minLength'/'maxLength'", path);
    return regex_to_expr("^" + format_regex(fmt) + "$", rx_);
  }
  return std::move(*e);
}

Expr SchemaCompiler::string_expr(const Json& s, const std::string& path) {
  const uint32_t lo = s.contains("minLength") ? length_of(s, "minLength", path, opts_.limits.max_repeat) : 0;
  const uint32_t hi = s.contains("maxLength") ? length_of(s, "maxLength", path, opts_.limits.max_repeat) : kInf;
  if (lo > hi) fail("json schema: minLength > maxLength at %s", path.c_str());
  std::string fmt;
  if (s.contains("format")) {
    if (!s["format"].is_string()) fail("json schema: 'format' at %s must be a string", path.c_str());
    fmt = s["format"].get<std::string>();
    if (format_regex(fmt).empty()) fmt.clear();
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) fail("json schema: 'pattern' at %s must be a string", path.c_str());
    if (!fmt.empty()) unsupported("'pattern' with 'format' \"" + fmt + "\"", path);
    const std::string p = s["pattern"].get<std::string>();
    if (auto e = regex_to_expr_bounded(p, rx_, lo, hi)) return quoted(std::move(*e));
    unsupported("'pattern' with 'minLength'/'maxLength'", path);
    return quoted(regex_to_expr(p, rx_));
  }
  if (!fmt.empty()) return quoted(format_expr(fmt, path, lo, hi));
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

namespace {

// |v| as a Decimal rounded to `digits` fraction digits, away from zero when `up`, else
// towards it; nullopt beyond 1e18 (set `over`). The bound's shortest decimal text is what
// the schema's author wrote (40.5, 1e-05), so the bound is exact when it fits.
std::optional<Decimal> to_decimal(const Json& v, bool up, uint32_t digits) {
  std::string t = v.dump();
  if (!t.empty() && t[0] == '-') t.erase(0, 1);
  int64_t exp = 0;
  const size_t e = t.find_first_of("eE");
  if (e != std::string::npos) {
    exp = std::stoll(t.substr(e + 1));
    t.resize(e);
  }
  const size_t dot = t.find('.');
  int64_t point = static_cast<int64_t>(dot == std::string::npos ? t.size() : dot) + exp;
  if (dot != std::string::npos) t.erase(dot, 1);
  if (point < 0) {
    t.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (static_cast<int64_t>(t.size()) < point)
    t.append(static_cast<size_t>(point - static_cast<int64_t>(t.size())), '0');
  std::string ip = t.substr(0, static_cast<size_t>(point)), frac = t.substr(static_cast<size_t>(point));
  ip.erase(0, std::min(ip.find_first_not_of('0'), ip.size()));
  if (ip.size() > 18) return std::nullopt;
  Decimal d;
  d.ip = ip.empty() ? 0 : std::stoull(ip);
  bool rest = false;
  for (size_t i = digits; i < frac.size(); ++i) rest = rest || frac[i] != '0';
  frac.resize(std::min<size_t>(frac.size(), digits));
  d.frac.replace(0, frac.size(), frac);
  if (rest && up) d = step(d, +1, digits);
  return d;
}

}  // namespace

// d +- one unit in the last of `digits` fraction digits (d > 0 when stepping down).
Decimal step(Decimal d, int dir, uint32_t digits) {
  if (digits == 0) {
    d.ip += dir;
    return d;
  }
  for (size_t i = digits; i-- > 0;) {
    char& c = d.frac[i];
    if (dir > 0 && c != '9') return ++c, d;
    if (dir < 0 && c != '0') return --c, d;
    c = dir > 0 ? '0' : '9';
  }
  d.ip += dir;
  return d;
}

// Fraction digits f (positions i.. of `digits`) with lo <= 0.f <= hi where tight; `first`:
// at least one digit must follow.
static Expr fraction_digits(const std::optional<std::string>& lo, const std::optional<std::string>& hi, uint32_t i,
                            uint32_t digits, bool first) {
  const bool lt = lo.has_value(), ht = hi.has_value();
  const Expr any = bytes(ByteSet::range('0', '9'));
  if (!lt && !ht) return repeat(any, first ? 1 : 0, digits - i);
  std::vector<Expr> alts;
  const bool zeros_ok = !lt || lo->find_first_not_of('0', i) == std::string::npos;
  if (!first && zeros_ok) alts.push_back(empty());
  if (i == digits) return alts.empty() ? empty() : alts[0];
  const char l = lt ? (*lo)[i] : '0', h = ht ? (*hi)[i] : '9';
  if (l == h) {
    alts.push_back(seq({lit(std::string(1, l)), fraction_digits(lo, hi, i + 1, digits, false)}));
  } else {
    alts.push_back(seq({lit(std::string(1, l)), fraction_digits(lo, std::nullopt, i + 1, digits, false)}));
    if (l + 1 <= h - 1)
      alts.push_back(seq({bytes(ByteSet::range(static_cast<uint8_t>(l + 1), static_cast<uint8_t>(h - 1))),
                          repeat(any, 0, digits - i - 1)}));
    alts.push_back(seq({lit(std::string(1, h)), fraction_digits(std::nullopt, hi, i + 1, digits, false)}));
  }
  return alt(std::move(alts));
}

// The optional fraction part (".ddd", at most `digits` digits) with lo <= 0.f <= hi.
Expr SchemaCompiler::fraction(const std::optional<std::string>& lo, const std::optional<std::string>& hi,
                              uint32_t digits) {
  std::vector<Expr> alts;
  if (!lo || lo->find_first_not_of('0') == std::string::npos) alts.push_back(empty());
  if (digits > 0) alts.push_back(seq({lit("."), fraction_digits(lo, hi, 0, digits, true)}));
  return alt(std::move(alts));
}

// Magnitudes m with a <= m <= b (closed; b absent: no upper bound), with at most `digits`
// fraction digits (integers: none) and no exponent.
std::optional<Expr> SchemaCompiler::magnitude(Decimal a, bool, std::optional<Decimal> b, bool, bool integer,
                                              uint32_t digits) {
  if (b && a > *b) return std::nullopt;
  if (integer) return digits_range(a.ip, b ? b->ip : 0, !b);
  if (b && a.ip == b->ip) return seq({lit(digits_of(a.ip)), fraction(a.frac, b->frac, digits)});
  std::vector<Expr> alts{seq({lit(digits_of(a.ip)), fraction(a.frac, std::nullopt, digits)})};
  if (!b) alts.push_back(seq({digits_range(a.ip + 1, 0, true), fraction(std::nullopt, std::nullopt, digits)}));
  else if (a.ip + 1 <= b->ip - 1)
    alts.push_back(seq({digits_range(a.ip + 1, b->ip - 1, false), fraction(std::nullopt, std::nullopt, digits)}));
  if (b) alts.push_back(seq({lit(digits_of(b->ip)), fraction(std::nullopt, b->frac, digits)}));
  return alt(std::move(alts));
}

// multipleOf: integers (or numbers whose step is an integer) as digit strings tracked
// modulo the step; a step 10^-s on numbers as at most s fraction digits (`digits`).
// Returns the whole number grammar when it built one, else nullopt (bounds apply as usual).
std::optional<Expr> SchemaCompiler::multiple_of_expr(const Json& s, const std::string& path, bool integer,
                                                     uint32_t& digits) {
  const Json& k = s["multipleOf"];
  if (!k.is_number() || k.get<double>() <= 0) fail("json schema: 'multipleOf' at %s must be positive", path.c_str());
  std::string t = k.dump();
  uint64_t m = 0;
  uint32_t frac_digits = 0;
  if (k.is_number_integer()) {
    m = k.get<uint64_t>();
  } else {
    auto d = to_decimal(k, false, kMaxFractionDigits);
    if (!d) return unsupported("'multipleOf' over 1e18", path), std::nullopt;
    std::string f = d->frac;
    f.erase(f.find_last_not_of('0') + 1);
    frac_digits = static_cast<uint32_t>(f.size());
    const std::string all = digits_of(d->ip) + f;
    if (all.size() > 18) return unsupported("'multipleOf' with more than 18 digits", path), std::nullopt;
    m = std::stoull(all);
  }
  if (frac_digits > 0) {
    if (m == 1 && !integer) return digits = frac_digits, std::nullopt;  // 0.01: two fraction digits
    uint64_t p10 = 1;
    for (uint32_t i = 0; i < frac_digits; ++i) p10 *= 10;
    if (integer && p10 % m == 0) return std::nullopt;  // every integer is a multiple of 0.5
    unsupported("'multipleOf' " + t + " on a " + (integer ? "integer" : "number"), path);
    return std::nullopt;
  }
  if (m == 1) return integer ? std::nullopt : (digits = 0, std::nullopt);
  if (m > 1000) return unsupported("'multipleOf' over 1000", path), std::nullopt;
  return integer_multiples(s, path, m);
}

// Integers that are multiples of m within the schema's bounds: enumerated when the bounds
// leave at most 1000, else digit strings tracked modulo m (bounds: none, or >= 0 / <= 0).
std::optional<Expr> SchemaCompiler::integer_multiples(const Json& s, const std::string& path, uint64_t m) {
  std::optional<double> lo, hi;
  for (const char* key : {"minimum", "exclusiveMinimum"})
    if (s.contains(key) && s[key].is_number()) {
      const double x = std::string(key) == "minimum" ? std::ceil(s[key].get<double>())
                                                     : std::floor(s[key].get<double>()) + 1;
      lo = lo ? std::max(*lo, x) : x;
    }
  for (const char* key : {"maximum", "exclusiveMaximum"})
    if (s.contains(key) && s[key].is_number()) {
      const double x = std::string(key) == "maximum" ? std::floor(s[key].get<double>())
                                                     : std::ceil(s[key].get<double>()) - 1;
      hi = hi ? std::min(*hi, x) : x;
    }
  const double md = static_cast<double>(m);
  if (lo && hi) {
    const double first = std::ceil(*lo / md) * md, last = std::floor(*hi / md) * md;
    if (first > last)
      fail("json schema: no multiple of %llu within the bounds at %s", static_cast<unsigned long long>(m),
           path.c_str());
    if ((last - first) / md > 1000) return unsupported("'multipleOf' with wide bounds", path), std::nullopt;
    std::vector<Expr> alts;
    for (double x = first; x <= last; x += md)
      alts.push_back(lit(digits_of(static_cast<uint64_t>(std::fabs(x))).insert(0, x < 0 ? "-" : "")));
    return alt(std::move(alts));
  }
  const bool pos_only = lo && *lo >= 0, neg_only = hi && *hi <= 0;
  if ((lo && !pos_only) || (hi && !neg_only) || (lo && *lo > 0) || (hi && *hi < 0))
    return unsupported("'multipleOf' with bounds other than 0", path), std::nullopt;
  std::vector<uint32_t> rem(m);
  for (uint64_t r = 0; r < m; ++r) rem[r] = b_.declare("mod" + std::to_string(m) + "_" + std::to_string(r));
  for (uint64_t r = 0; r < m; ++r) {
    std::vector<Expr> alts;
    if (r == 0) alts.push_back(empty());
    for (int d = 0; d < 10; ++d)
      alts.push_back(seq({lit(std::string(1, static_cast<char>('0' + d))), ref(rem[(10 * r + d) % m])}));
    b_.define(rem[r], alt(std::move(alts)));
  }
  std::vector<Expr> nonzero;
  for (int d = 1; d < 10; ++d)
    nonzero.push_back(seq({lit(std::string(1, static_cast<char>('0' + d))), ref(rem[d % m])}));
  const Expr nz = alt(std::move(nonzero));
  if (pos_only) return alt({lit("0"), nz});
  if (neg_only) return alt({lit("0"), seq({lit("-"), nz})});
  return alt({lit("0"), seq({opt(lit("-")), nz})});
}

Expr SchemaCompiler::number_expr(const Json& s, const std::string& path, bool integer) {
  uint32_t digits = kMaxFractionDigits;
  if (s.contains("multipleOf")) {
    if (auto e = multiple_of_expr(s, path, integer, digits)) return std::move(*e);
  }
  // The tightest lower and upper bound: (value, open).
  std::optional<std::pair<Json, bool>> lo, hi;
  for (const auto& [key, is_lo, open] :
       {std::tuple{"minimum", true, false}, std::tuple{"exclusiveMinimum", true, true},
        std::tuple{"maximum", false, false}, std::tuple{"exclusiveMaximum", false, true}}) {
    if (!s.contains(key)) continue;
    const Json& v = s[key];
    if (!v.is_number()) fail("json schema: '%s' at %s must be a number", key, path.c_str());
    auto& slot = is_lo ? lo : hi;
    const double x = v.get<double>();
    if (!slot || (is_lo ? x > slot->first.get<double>() : x < slot->first.get<double>()) ||
        (x == slot->first.get<double>() && open))
      slot = std::pair{v, open};
  }
  if (!lo && !hi) {
    if (integer) return seq({opt(lit("-")), alt({lit("0"), seq({ref(digit1_), star(digit_range('0', '9'))})})});
    if (digits == kMaxFractionDigits) return ref(number_);
  }
  return bounded_number(lo, hi, path, integer, integer ? 0 : digits);
}

// Numbers within (value, open) bounds, no exponent: a non-negative and a negative branch
// over magnitudes, each bound first made closed on the grid of `digits` fraction digits
// (an open bound moves one step inwards; a bound off the grid rounds inwards).
Expr SchemaCompiler::bounded_number(const std::optional<std::pair<Json, bool>>& lo,
                                    const std::optional<std::pair<Json, bool>>& hi, const std::string& path,
                                    bool integer, uint32_t digits) {
  // A signed bound on the grid: (negative, magnitude); nullopt when beyond 1e18 (an upper
  // bound that far is dropped — it lets more through than any generated number; a lower
  // one the same).
  auto closed = [&](const std::pair<Json, bool>& b, bool is_lo) -> std::optional<std::pair<bool, Decimal>> {
    const bool neg = b.first.get<double>() < 0;
    // Inwards: a lower bound up (magnitude up when positive, down when negative).
    const bool mag_up = is_lo != neg;
    auto d = to_decimal(b.first, mag_up, digits);
    if (!d) {
      if (is_lo != neg) fail("json schema: bound at %s is beyond +-1e18", path.c_str());
      return std::nullopt;
    }
    const bool exact = to_decimal(b.first, !mag_up, digits) == d;
    if (b.second && exact) {
      if (mag_up) *d = step(*d, +1, digits);
      else if (*d == Decimal{}) return std::pair{!neg, step(*d, +1, digits)};  // open at 0: the other side
      else *d = step(*d, -1, digits);
    }
    return std::pair{neg && !(*d == Decimal{}), *d};
  };
  std::optional<std::pair<bool, Decimal>> L = lo ? closed(*lo, true) : std::nullopt;
  std::optional<std::pair<bool, Decimal>> H = hi ? closed(*hi, false) : std::nullopt;
  std::vector<Expr> alts;
  // x >= 0: magnitude in [max(L, 0), H].
  if (!H || !H->first) {
    const Decimal a = (L && !L->first) ? L->second : Decimal{};
    auto m = magnitude(a, false, H ? std::optional<Decimal>(H->second) : std::nullopt, false, integer, digits);
    if (m) alts.push_back(std::move(*m));
  }
  // x < 0: "-" and a magnitude in [max(-H, one step), -L].
  if (!L || L->first) {
    Decimal a = (H && H->first) ? H->second : step(Decimal{}, +1, digits);
    auto m = magnitude(a, false, L ? std::optional<Decimal>(L->second) : std::nullopt, false, integer, digits);
    if (m) alts.push_back(seq({lit("-"), std::move(*m)}));
  }
  if (alts.empty()) fail("json schema: no %s satisfies the bounds at %s", integer ? "integer" : "number", path.c_str());
  return alt(std::move(alts));
}

}  // namespace sluice::grammar::detail
