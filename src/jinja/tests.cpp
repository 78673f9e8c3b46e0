// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...).
#include "jinja/builtins.h"
#include "jinja/ops.h"
#include "jinja/parser.h"
#include "jinja/pystr.h"

namespace sluice::jinja {

namespace {

using TestFn = bool (*)(Interp&, const Value&, CallArgs&);

// Undefined raises on any numeric operation (its __mod__ does), like jinja2.
void no_undefined(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
}

// ---- tests --------------------------------------------------------------------------------

bool no_args(const char* name, CallArgs& a) {
  bind_args(name, a, {});
  return true;
}
Value one_arg(const char* name, CallArgs& a) { return bind_args(name, a, {{"other", {}, true}})[0]; }

bool t_boolean(Interp&, const Value& v, CallArgs& a) { return no_args("boolean", a) && v.is_bool(); }
// Undefined defines __call__ (to raise), so Python's callable() says yes.
bool t_callable(Interp&, const Value& v, CallArgs& a) {
  return no_args("callable", a) && (v.is_undefined() || (v.is_object() && v.o().callable()));
}
bool t_defined(Interp&, const Value& v, CallArgs& a) { return no_args("defined", a) && !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, CallArgs& a) { return no_args("undefined", a) && v.is_undefined(); }
bool t_none(Interp&, const Value& v, CallArgs& a) { return no_args("none", a) && v.is_none(); }
bool t_true(Interp&, const Value& v, CallArgs& a) { return no_args("true", a) && v.is_bool() && v.b(); }
bool t_false(Interp&, const Value& v, CallArgs& a) { return no_args("false", a) && v.is_bool() && !v.b(); }
bool t_string(Interp&, const Value& v, CallArgs& a) { return no_args("string", a) && v.is_string(); }
bool t_mapping(Interp&, const Value& v, CallArgs& a) { return no_args("mapping", a) && v.is_dict(); }
bool t_number(Interp&, const Value& v, CallArgs& a) { return no_args("number", a) && v.is_number(); }
bool t_integer(Interp&, const Value& v, CallArgs& a) { return no_args("integer", a) && v.is_int(); }
bool t_float(Interp&, const Value& v, CallArgs& a) { return no_args("float", a) && v.is_float(); }
bool t_escaped(Interp&, const Value&, CallArgs& a) { return no_args("escaped", a) && false; }
bool t_iterable(Interp&, const Value& v, CallArgs& a) {
  return no_args("iterable", a) &&
         (v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || v.as<Iterator>());
}
// jinja2's test_sequence: len() and __getitem__ both exist (Undefined has both).
bool t_sequence(Interp&, const Value& v, CallArgs& a) {
  return no_args("sequence", a) &&
         (v.is_string() || (v.is_list() && v.view() == View::None) || v.is_dict() || v.is_undefined());
}
bool parity(const Value& v, int64_t want) {
  no_undefined(v);
  return py_eq(binop(Op::Mod, v, Value::integer(2), 0, 0), Value::integer(want));
}
bool t_odd(Interp&, const Value& v, CallArgs& a) { return no_args("odd", a) && parity(v, 1); }
bool t_even(Interp&, const Value& v, CallArgs& a) { return no_args("even", a) && parity(v, 0); }
bool t_divisibleby(Interp&, const Value& v, CallArgs& a) {
  const Value n = bind_args("divisibleby", a, {{"num", {}, true}})[0];
  no_undefined(v);
  return py_eq(binop(Op::Mod, v, n, 0, 0), Value::integer(0));
}
bool t_lower(Interp&, const Value& v, CallArgs& a) {
  no_args("lower", a);
  const std::string s = to_str(v);
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = py::next_cp(s, i);
    if (py::is_upper(c)) return false;
    cased = cased || py::is_lower(c);
  }
  return cased;
}
bool t_upper(Interp&, const Value& v, CallArgs& a) {
  no_args("upper", a);
  const std::string s = to_str(v);
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = py::next_cp(s, i);
    if (py::is_lower(c)) return false;
    cased = cased || py::is_upper(c);
  }
  return cased;
}
bool t_eq(Interp&, const Value& v, CallArgs& a) { return py_eq(v, one_arg("eq", a)); }
bool t_ne(Interp&, const Value& v, CallArgs& a) { return !py_eq(v, one_arg("ne", a)); }
bool t_lt(Interp&, const Value& v, CallArgs& a) { return compare(Op::Lt, v, one_arg("lt", a)); }
bool t_le(Interp&, const Value& v, CallArgs& a) { return compare(Op::Le, v, one_arg("le", a)); }
bool t_gt(Interp&, const Value& v, CallArgs& a) { return compare(Op::Gt, v, one_arg("gt", a)); }
bool t_ge(Interp&, const Value& v, CallArgs& a) { return compare(Op::Ge, v, one_arg("ge", a)); }
bool t_in(Interp&, const Value& v, CallArgs& a) { return py_contains(bind_args("in", a, {{"seq", {}, true}})[0], v); }
// `is sameas`: Python identity. Singletons compare by value; small ints are cached by
// CPython (-5..256); containers and objects by pointer.
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value o = one_arg("sameas", a);
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::None:
    case Kind::Undefined: return true;
    case Kind::Bool: return v.b() == o.b();
    case Kind::Int: return v.i() == o.i() && v.i() >= -5 && v.i() <= 256;
    case Kind::Float: return false;
    default: return v.ptr() == o.ptr();
  }
}
bool t_filter(Interp&, const Value& v, CallArgs& a) {
  return no_args("filter", a) && v.is_string() && has_filter(v.s());
}
bool t_test(Interp&, const Value& v, CallArgs& a) { return no_args("test", a) && v.is_string() && has_test(v.s()); }

struct NamedTest {
  const char* name;
  TestFn fn;
};
const NamedTest kTests[] = {
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"escaped", t_escaped},
    {"even", t_even},
    {"false", t_false},
    {"filter", t_filter},
    {"float", t_float},
    {"ge", t_ge},
    {">=", t_ge},
    {"gt", t_gt},
    {">", t_gt},
    {"greaterthan", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"<=", t_le},
    {"lower", t_lower},
    {"lt", t_lt},
    {"<", t_lt},
    {"lessthan", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"!=", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"test", t_test},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

}  // namespace

bool has_test(std::string_view name) {
  for (const auto& t : kTests)
    if (name == t.name) return true;
  return false;
}

bool apply_test(Interp& in, const std::string& name, const Value& v, CallArgs& args) {
  for (const auto& t : kTests)
    if (name == t.name) return t.fn(in, v, args);
  raise("No test named '%s'.", name.c_str());
}

}  // namespace sluice::jinja
