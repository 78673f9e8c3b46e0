// GBNF (llama.cpp's grammar text) -> grammar.
//
// Supported: `name ::= alternatives` rules (the start rule is `root`), `#` comments,
// string literals with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes, character classes
// `[a-z_]` / `[^...]` (members must be ASCII; a negated class also matches every non-ASCII
// character), `.` (any character), groups, `|`, `* + ? {m} {m,} {m,n}`, and token
// terminals `<[id]>` (one vocabulary id). Errors name the line and column.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace sluice::grammar {

Grammar gbnf_grammar(std::string_view text, const Limits& limits = {});

}  // namespace sluice::grammar
