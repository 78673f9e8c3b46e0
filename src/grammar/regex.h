// A regex subset compiled to grammar expressions, for JSON Schema `pattern`, GBNF-free
// string formats and tests.
//
// Supported: literals (UTF-8 passes through), `.`, classes `[a-z_]` / `[^...]` over ASCII,
// escapes \d \w \s \D \W \S \. \\ \/ \- \n \t \r and other escaped punctuation, groups
// `(...)` and `(?:...)`, alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (a trailing
// lazy `?` is accepted: a grammar has no preference), `^` at the very start and `$` at the
// very end. Anything else (backreferences, lookaround, anchors elsewhere, non-ASCII class
// ranges, \b, \p{..}) is an error naming the construct.
//
// In JSON-string mode the pattern describes the decoded string: literal characters that
// JSON must escape are emitted escaped, negated classes and `.` also admit any escape and
// any non-ASCII character, and an unanchored pattern may be surrounded by any characters
// (JSON Schema patterns search, they do not match whole strings).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "grammar/grammar.h"

namespace sluice::grammar {

struct RegexContext {
  GrammarBuilder* b = nullptr;
  bool json_string = false;
  Expr json_char;           // json_string mode: one JSON string character
  uint32_t utf8_multi = 0;  // a rule for one well-formed non-ASCII UTF-8 character
};

// Throws sluice::Error ("pattern '...': <what> at offset N is not supported").
Expr regex_to_expr(std::string_view pattern, const RegexContext& ctx);

// Whether every prefix of a match has infinitely many completions: the pattern is unanchored
// at an end (any characters may precede or follow the match, and that loop stays alive), or it
// is one concatenation whose last part repeats something non-empty without bound
// (`^[a-z][a-z0-9-]*$`: every prefix can reach that repetition). Sufficient, not exact:
// `^(a|b+)$` is false (after "a" nothing may follow). Throws as regex_to_expr on a pattern
// outside the subset.
bool regex_always_extends(std::string_view pattern, const RegexContext& ctx);

// The pattern's strings of min_chars to max_chars characters (max_chars may be kInf), or
// nullopt when this subset cannot express the intersection: it can when the pattern's own
// lengths lie inside the bounds, or when the pattern is anchored and its one variable-length
// part is a single character under one quantifier (`^[a-z][a-z0-9-]*$`).
std::optional<Expr> regex_to_expr_bounded(std::string_view pattern, const RegexContext& ctx, uint64_t min_chars,
                                          uint64_t max_chars);

}  // namespace sluice::grammar
