// jinja2 resolves names per frame at compile time, which is observable in one case: a name
// whose first reference in a frame is an unconditional assignment is a fresh local there. It
// starts undefined (even if the render context has that name) unless an enclosing frame
// refers to it. So in
//     {% for m in messages %}{{ tools }}{% endfor %}{% set tools = [] %}
// the loop sees `tools` undefined, not the caller's value. This pass finds those names; the
// interpreter sets them to Undefined when it enters the frame.
#pragma once

#include "jinja/ast.h"

namespace sluice::jinja {

void analyze_scopes(Program& program);

}  // namespace sluice::jinja
