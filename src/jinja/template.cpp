#include "jinja/template.h"

#include <chrono>

#include "jinja/builtins.h"
#include "jinja/fold.h"
#include "jinja/parser.h"
#include "jinja/scoping.h"

namespace sluice::jinja {

static std::shared_ptr<const Program> compile(std::string_view source, const Limits& limits) {
  auto p = std::make_shared<Program>(parse(source, limits.max_parse_depth));
  fold_constants(*p, limits);
  analyze_scopes(*p);
  return p;
}

Template::Template(std::string_view source, const Limits& limits)
    : program_(compile(source, limits)), limits_(limits) {}

std::string Template::render(std::vector<std::pair<std::string, Value>> vars, const Clock& now) const {
  Interp in(limits_, now);
  return in.render(*program_, global_functions(), std::move(vars));
}

Clock wall_clock() {
  const auto t = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  Clock c;
  localtime_r(&secs, &c.tm);
  c.micro = static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() %
                             1000000);
  return c;
}

}  // namespace sluice::jinja
