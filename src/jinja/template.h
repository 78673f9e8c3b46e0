// A parsed Jinja template (the subset chat templates use) and its renderer.
//
// Parsing happens once; render() is const and keeps all state on its own stack, so one
// Template may be rendered from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/interp.h"
#include "jinja/value.h"

namespace sluice::jinja {

struct Program;

class Template {
 public:
  // Throws sluice::Error ("chat template syntax error at line L, column C: ...").
  explicit Template(std::string_view source, const Limits& limits = {});
  // `vars` are the context variables (messages, add_generation_prompt, ...). The globals of
  // HF's environment (range, namespace, raise_exception, strftime_now, ...) are added.
  // Throws sluice::Error with the template position for every failure.
  std::string render(std::vector<std::pair<std::string, Value>> vars, const Clock& now) const;

 private:
  std::shared_ptr<const Program> program_;
  Limits limits_;
};

Clock wall_clock();  // local time now, as datetime.now() sees it

}  // namespace sluice::jinja
