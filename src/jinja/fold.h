// jinja2's compile-time constant folding, reproduced because it is observable: the
// optimizer evaluates every maximal constant subexpression (literals and operators/filters
// on them) once, and keeps the result only if Python could write it as a literal. Inside
// such an evaluation a failing slice (`none[1:]`) is Undefined, at run time it raises.
#pragma once

#include "jinja/ast.h"
#include "jinja/interp.h"

namespace sluice::jinja {

void fold_constants(Program& program, const Limits& limits);

}  // namespace sluice::jinja
