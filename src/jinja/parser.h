// Tokens -> syntax tree, following jinja2's grammar and operator precedence:
//   cond (x if c else y) < or < and < not < compare (==, in, not in, chained) < + - < ~ <
//   * / // % < ** (left-assoc, as jinja2 parses it) < unary - + < postfix (. [] ()) |filter, is test
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace sluice::jinja {

// Throws sluice::Error with line and column on any syntax error. Nesting deeper than
// max_depth (blocks or expressions) is rejected rather than risking the stack.
Program parse(std::string_view source, int max_depth);

// Filter and test names the evaluator implements (filters.cpp).
bool has_filter(std::string_view name);
bool has_test(std::string_view name);

}  // namespace sluice::jinja
