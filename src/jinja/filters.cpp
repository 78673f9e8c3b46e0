// jinja2's builtin filters on strings and numbers, with HF's `tojson` (json.dumps without
// HTML escaping), and the filter table (sequence filters are in filters_seq.cpp).
#include <cmath>
#include <cstdio>
#include <cstring>

#include "jinja/filter_util.h"
#include "jinja/json_bridge.h"
#include "jinja/ops.h"
#include "jinja/parser.h"

namespace sluice::jinja {

namespace {

using namespace filters;
using FilterFn = Value (*)(Interp&, const Value&, CallArgs&);

Value f_abs(Interp&, const Value& v, CallArgs& a) {
  bind_args("abs", a, {});
  if (v.is_float()) return Value::number(std::fabs(v.f()));
  if (v.is_number()) {
    if (v.i() == INT64_MIN) raise("integer overflow (template integers are 64-bit)");
    return Value::integer(v.i() < 0 ? -v.i() : v.i());
  }
  raise("bad operand type for abs(): '%s'", type_name(v));
}

Value f_attr(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("attr", a, {{"name", {}, true}});
  if (!p[0].is_string()) return Value::undefined("attribute name must be a string");
  return get_attr(v, p[0].s());
}

// A filter with no arguments that maps the value's text.
Value text_filter(const char* name, const Value& v, CallArgs& a, std::string (*f)(std::string_view)) {
  bind_args(name, a, {});
  return str_v(f(to_str(v)));
}
Value f_capitalize(Interp&, const Value& v, CallArgs& a) { return text_filter("capitalize", v, a, py::capitalize); }
Value f_lower(Interp&, const Value& v, CallArgs& a) { return text_filter("lower", v, a, py::lower); }
Value f_upper(Interp&, const Value& v, CallArgs& a) { return text_filter("upper", v, a, py::upper); }
Value f_title(Interp&, const Value& v, CallArgs& a) { return text_filter("title", v, a, py::jinja_title); }
Value f_string(Interp&, const Value& v, CallArgs& a) {
  bind_args("string", a, {});
  return str_v(to_str(v));
}

Value f_center(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("center", a, {{"width", Value::integer(80)}});
  const int64_t w = as_int(p[0], "width");
  if (w > static_cast<int64_t>(in.limits().max_bytes / 4)) raise("center() width too large");
  return str_v(py::center(to_str(v), w, ' ', 0));
}

Value f_length(Interp&, const Value& v, CallArgs& a) {
  bind_args("length", a, {});
  return Value::integer(py_len(v));
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("default", a, {{"default_value", str_v("")}, {"boolean", Value::boolean(false)}});
  if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0];
  return v;
}

Value f_escape(Interp&, const Value& v, CallArgs& a) {
  bind_args("escape", a, {});
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return str_v(std::move(out));
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("float", a, {{"default", Value::number(0.0)}});
  no_undefined(v);
  if (v.is_number()) return Value::number(v.f());
  double d;
  if (v.is_string() && py::parse_float(v.s(), &d)) return Value::number(d);
  return p[0];
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("int", a, {{"default", Value::integer(0)}, {"base", Value::integer(10)}});
  no_undefined(v);
  if (v.is_int() || v.is_bool()) return Value::integer(v.i());
  if (v.is_float()) {
    // int(float): truncation; inf raises OverflowError (not caught by the filter), nan gives the default.
    if (std::isnan(v.f())) return p[0];
    if (!(std::fabs(v.f()) < 9.2233720368547758e18)) raise("cannot convert float to integer");
    return Value::integer(static_cast<int64_t>(v.f()));
  }
  if (v.is_string()) {
    int64_t n;
    if (py::parse_int(v.s(), static_cast<int>(as_int(p[1], "base")), &n)) return Value::integer(n);
    double d;
    if (py::parse_float(v.s(), &d)) {
      if (std::isnan(d)) return p[0];
      if (!(std::fabs(d) < 9.2233720368547758e18)) raise("cannot convert float to integer");
      return Value::integer(static_cast<int64_t>(d));
    }
  }
  return p[0];
}

Value f_format(Interp&, const Value& v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty()) raise("can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    Dict d;
    for (const auto& [k, x] : a.kw) d.set(str_v(k), x);
    return str_v(percent_format(to_str(v), Value::dict(std::move(d))));
  }
  return str_v(percent_format(to_str(v), Value::tuple(a.pos)));
}

Value f_indent(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(
      "indent", a, {{"width", Value::integer(4)}, {"first", Value::boolean(false)}, {"blank", Value::boolean(false)}});
  no_undefined(v);
  if (!v.is_string()) raise("unsupported operand type(s) for +=: '%s' and 'str'", type_name(v));
  std::string ind;
  if (p[0].is_string()) ind = p[0].s();
  else {
    const int64_t w = as_int(p[0], "width");
    if (w > 4096) raise("indent width too large");
    if (w > 0) ind.assign(static_cast<size_t>(w), ' ');
  }
  const auto lines = py::splitlines(v.s() + "\n", false);
  if (ind.size() * lines.size() + v.s().size() > in.limits().max_bytes) raise("indent() result too large");
  std::string rv;
  if (truthy(p[2])) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv.append("\n").append(ind);
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += '\n';
      if (!lines[k].empty()) rv += ind;
      rv += lines[k];
    }
  }
  if (truthy(p[1])) rv = ind + rv;
  return str_v(std::move(rv));
}

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("replace", a, {{"old", {}, true}, {"new", {}, true}, {"count", Value::none()}});
  const std::string s = to_str(v), o = to_str(p[0]), r = to_str(p[1]);
  const int64_t count = p[2].is_none() ? -1 : as_int(p[2], "count");
  const int64_t hits = std::min<int64_t>(py::count(s, o), count < 0 ? INT64_MAX : count);
  if (r.size() > o.size() && static_cast<uint64_t>(hits) * (r.size() - o.size()) + s.size() > in.limits().max_bytes)
    raise("replace() result too large");
  return str_v(py::replace(s, o, r, count));
}

// Python round(x, n): ties to even on the exact binary value, which is what glibc's printf
// rounding gives as well.
double round_float(double x, int64_t n) {
  if (!std::isfinite(x) || n > 308) return x;
  if (n == 0) return std::nearbyint(x);
  if (n > 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(n, 340)), x);
    double r;
    py::parse_float(buf, &r);
    return r;
  }
  if (n < -308) return std::copysign(0.0, x);
  const double p = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / p) * p;
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("round", a, {{"precision", Value::integer(0)}, {"method", str_v("common")}});
  no_undefined(v);
  if (!v.is_number()) raise("type %s doesn't define __round__ method", type_name(v));
  const int64_t n = as_int(p[0], "precision");
  const std::string method = p[1].is_string() ? p[1].s() : "";
  if (method == "common") {
    if (!v.is_float()) {
      if (n >= 0) return Value::integer(v.i());
      if (n < -18) return Value::integer(0);
      int64_t m = 1;
      for (int64_t k = 0; k < -n; ++k) m *= 10;
      const int64_t x = v.i();
      int64_t q = x / m, r = x % m;
      if (r < 0) {
        r += m;
        --q;
      }
      if (2 * r > m || (2 * r == m && (q & 1))) ++q;
      int64_t out;
      if (__builtin_mul_overflow(q, m, &out)) raise("integer overflow (template integers are 64-bit)");
      return Value::integer(out);
    }
    return Value::number(round_float(v.f(), n));
  }
  if (method != "ceil" && method != "floor") raise("method must be common, ceil or floor");
  const double scale = std::pow(10.0, static_cast<double>(n));
  const double x = v.f() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interp&, const Value& v, CallArgs& a) {
  bind_args("safe", a, {});
  return str_v(to_str(v));
}

// HF's override: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("tojson", a,
                     {{"ensure_ascii", Value::boolean(false)},
                      {"indent", Value::none()},
                      {"separators", Value::none()},
                      {"sort_keys", Value::boolean(false)}});
  DumpOptions o;
  o.ensure_ascii = truthy(p[0]);
  if (p[1].is_string()) {
    o.indent = p[1].s();
  } else if (p[1].is_int() || p[1].is_bool()) {
    const int64_t w = p[1].i();
    if (w > 4096) raise("indent too large");
    o.indent = std::string(static_cast<size_t>(std::max<int64_t>(w, 0)), ' ');
  } else if (!p[1].is_none()) {
    raise("indent must be an int or a string, not %s", type_name(p[1]));
  }
  if (p[2].is_none()) {
    o.item_sep = o.indent ? "," : ", ";
    o.key_sep = ": ";
  } else {
    const auto seps = iterate(p[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) raise("separators must be a pair of strings");
    o.item_sep = seps[0].s();
    o.key_sep = seps[1].s();
  }
  o.sort_keys = truthy(p[3]);
  return str_v(dumps(v, o));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("trim", a, {{"chars", Value::none()}});
  std::optional<std::string> chars;
  if (!p[0].is_none()) chars = to_str(p[0]);
  return str_v(py::strip(to_str(v), chars, true, true));
}

Value f_wordcount(Interp&, const Value& v, CallArgs& a) {
  bind_args("wordcount", a, {});
  const std::string s = to_str(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = py::next_cp(s, i);
    const bool w = c == '_' || py::is_alpha(c) || py::is_decimal(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

struct NamedFilter {
  const char* name;
  FilterFn fn;
};
const NamedFilter kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_escape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

bool has_filter(std::string_view name) {
  for (const auto& f : kFilters)
    if (name == f.name) return true;
  return false;
}

Value apply_filter(Interp& in, const std::string& name, const Value& v, CallArgs& args) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.fn(in, v, args);
  raise("No filter named '%s'.", name.c_str());
}

}  // namespace sluice::jinja
