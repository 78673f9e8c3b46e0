// Tree-walking evaluator with jinja2's scoping rules:
//  * every for-loop iteration runs in a fresh scope (a `set` inside a loop never leaks out,
//    and is not seen by the next iteration), `if` does not open a scope;
//  * macros see the scope they were defined in, resolved at call time (top-level names set
//    after the definition are visible, as with jinja2's late-binding closures);
//  * namespace() objects are the only way to carry state out of a loop.
// Every evaluation step is charged against a budget and every string/list size is capped, so
// untrusted templates cannot hang the process or exhaust memory.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace sluice::jinja {

struct Limits {
  size_t max_bytes = 16u << 20;     // largest string: rendered output, captures, built values
  size_t max_items = 1u << 20;      // largest list/dict a template may build
  uint64_t max_steps = 20'000'000;  // evaluation work units (about a second of work)
  int max_call_depth = 64;          // macro call nesting
  int max_parse_depth = 200;        // block and expression nesting in the source
};

struct Clock {  // what strftime_now() sees: local wall time, fixed in tests
  std::tm tm{};
  int micro = 0;
};

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  void clear() { vars_.clear(); }

 private:
  std::shared_ptr<Scope> parent_;
  std::unordered_map<std::string, Value> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { Normal, Break, Continue };

// A positioned render error ("chat template error at line L, column C: ...").
class TemplateError : public sluice::Error {
 public:
  using sluice::Error::Error;
};

class Interp {
 public:
  Interp(const Limits& limits, const Clock& now) : limits_(limits), now_(now) {}
  ~Interp();  // breaks the reference cycles a template can build (namespaces, closures)
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  // Renders with `globals` (functions) under `vars` (the context variables).
  std::string render(const Program& program, std::vector<std::pair<std::string, Value>> globals,
                     std::vector<std::pair<std::string, Value>> vars);

  Value eval(const Expr& e, const ScopePtr& scope);
  Flow exec(const Body& body, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs& args);
  Value call_macro(const Stmt& def, const ScopePtr& closure, const std::string& name, CallArgs& args);

  void charge(uint64_t units) {
    steps_ += units;
    if (steps_ > limits_.max_steps) raise("template exceeded its evaluation budget");
  }
  const Limits& limits() const { return limits_; }
  const Clock& now() const { return now_; }
  std::shared_ptr<Namespace> make_namespace();
  void track_scope(const ScopePtr& s) { closures_.push_back(s); }
  // Compile-time constant folding mode (see fold.cpp): names, calls and context filters
  // throw NotConstant, failed slices give Undefined.
  void set_folding(bool on) { folding_ = on; }
  struct NotConstant {};

 private:
  Limits limits_;
  Clock now_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  bool folding_ = false;
  std::string* out_ = nullptr;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  std::vector<ScopePtr> closures_;

  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope);
  Flow exec_for(const Stmt& s, const ScopePtr& scope);
  Flow capture(const Body& body, const ScopePtr& scope, std::string* text);
  void emit(const std::string& s);
  void assign(const Target& t, const Value& v, Scope& scope);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope);
  Value run_filter(const Expr& f, const Value& v, const ScopePtr& scope);
  Value apply_chain(const Expr& f, const Value& input, const ScopePtr& scope);
};

}  // namespace sluice::jinja
