// Python operators on template values: arithmetic, comparison, slicing, `%` formatting.
#pragma once

#include <cstddef>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace sluice::jinja {

// a <op> b for the arithmetic operators and `~`. Results larger than max_bytes (strings) or
// max_items (lists) are refused before they are built.
Value binop(Op op, const Value& a, const Value& b, size_t max_bytes, size_t max_items);
Value unop(Op op, const Value& a);
// ==, !=, <, <=, >, >=, in, not in.
bool compare(Op op, const Value& a, const Value& b);
// obj[start:stop:step]; an undefined value where Python raises TypeError (jinja2's getitem
// turns those into Undefined).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// printf-style `fmt % args` (also the `format` filter).
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace sluice::jinja
