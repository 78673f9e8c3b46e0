// The engine's standard library: filters, tests, attribute/item access with the HF sandbox's
// rules, methods on str/dict/list, and the global functions HF templates may call.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "jinja/interp.h"
#include "jinja/value.h"

namespace sluice::jinja {

Value apply_filter(Interp& in, const std::string& name, const Value& v, CallArgs& args);
bool apply_test(Interp& in, const std::string& name, const Value& v, CallArgs& args);

// `obj.name` (Python attribute first, then item) and `obj[key]` (item first, then attribute),
// as the sandboxed environment resolves them. Failures give undefined values, except on
// undefined objects, which raise.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);

// range, dict, namespace, joiner, cycler, raise_exception, strftime_now.
std::vector<std::pair<std::string, Value>> global_functions();

// Python-style argument binding for builtins. A parameter without a default is required.
struct ParamSpec {
  const char* name;
  Value dflt;
  bool required = false;
};
std::vector<Value> bind_args(const char* fn, const CallArgs& args, std::initializer_list<ParamSpec> params);

// A callable implemented in C++.
class NativeFunction : public Object {
 public:
  using Fn = Value (*)(Interp&, CallArgs&, const Value& self);
  NativeFunction(std::string name, Fn fn, Value self = {}) : name_(std::move(name)), fn_(fn), self_(std::move(self)) {}
  const char* type_name() const override { return "builtin_function_or_method"; }
  std::string repr(int) const override { return "<built-in function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override { return fn_(in, args, self_); }
  int depth() const override { return 1 + self_.depth(); }

 private:
  std::string name_;
  Fn fn_;
  Value self_;
};

}  // namespace sluice::jinja
