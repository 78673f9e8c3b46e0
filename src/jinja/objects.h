// Runtime objects the interpreter hands to templates: macros and the `loop` variable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/interp.h"

namespace sluice::jinja {

// jinja2's LoopContext. One shared state per loop (changed() remembers across iterations),
// one object per iteration.
struct LoopState {
  std::vector<Value> items;
  Value last_changed;
  bool changed_called = false;
};

Value make_loop(std::shared_ptr<LoopState> state, size_t index0);
// A callable macro (or a call block's `caller`) closing over the scope it was defined in.
Value make_macro(const Stmt* def, ScopePtr closure, std::string name);

}  // namespace sluice::jinja
