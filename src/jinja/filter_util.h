// Helpers shared by the filter implementations (filters.cpp, filters_seq.cpp). Internal.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/builtins.h"
#include "jinja/pystr.h"

namespace sluice::jinja::filters {

inline Value str_v(std::string s) { return Value::string(std::move(s)); }

// Undefined raises on any numeric conversion (its __int__/__float__ do), like jinja2.
inline void no_undefined(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
}

inline int64_t as_int(const Value& v, const char* what) {
  if (!(v.is_int() || v.is_bool())) raise("%s must be an integer, not %s", what, type_name(v));
  return v.i();
}

inline Value ignore_case(const Value& v) { return v.is_string() ? str_v(py::lower(v.s())) : v; }

// make_attrgetter: "a.b.0" walks items, digit parts as integers.
inline std::vector<Value> attr_parts(const Value& attr) {
  std::vector<Value> parts;
  if (attr.is_none() || attr.is_undefined()) return parts;
  if (!attr.is_string()) return {attr};
  for (const auto& p : py::split(attr.s(), std::string("."), -1)) {
    bool digits = !p.empty();
    for (char c : p) digits = digits && c >= '0' && c <= '9';
    int64_t n;
    if (digits && py::parse_int(p, 10, &n)) parts.push_back(Value::integer(n));
    else parts.push_back(str_v(p));
  }
  return parts;
}

inline Value get_path(const Value& item, const std::vector<Value>& parts, const Value* dflt = nullptr) {
  Value v = item;
  for (const auto& p : parts) {
    v = get_item(v, p);
    if (dflt && !dflt->is_none() && v.is_undefined()) v = *dflt;
  }
  return v;
}

inline void charge_sort(Interp& in, size_t n) {
  size_t lg = 1;
  while ((size_t{1} << lg) < n) ++lg;
  in.charge(n * lg);
}

// Python's sorted(): stable; reverse=True keeps equal items in their original order.
inline void py_sort(Interp& in, std::vector<std::pair<Value, Value>>& keyed, bool reverse) {
  charge_sort(in, keyed.size());
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
}

inline Value make_iter(std::vector<Value> items) { return Value::object(std::make_shared<Iterator>(std::move(items))); }
inline Value lazy(const Value& input, std::function<std::vector<Value>()> body) {
  return Value::object(std::make_shared<Iterator>(std::move(body), input.depth()));
}

// Sequence filters (filters_seq.cpp).
Value f_batch(Interp& in, const Value& v, CallArgs& a);
Value f_dictsort(Interp& in, const Value& v, CallArgs& a);
Value f_first(Interp& in, const Value& v, CallArgs& a);
Value f_last(Interp& in, const Value& v, CallArgs& a);
Value f_items(Interp& in, const Value& v, CallArgs& a);
Value f_join(Interp& in, const Value& v, CallArgs& a);
Value f_list(Interp& in, const Value& v, CallArgs& a);
Value f_map(Interp& in, const Value& v, CallArgs& a);
Value f_max(Interp& in, const Value& v, CallArgs& a);
Value f_min(Interp& in, const Value& v, CallArgs& a);
Value f_select(Interp& in, const Value& v, CallArgs& a);
Value f_reject(Interp& in, const Value& v, CallArgs& a);
Value f_selectattr(Interp& in, const Value& v, CallArgs& a);
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a);
Value f_reverse(Interp& in, const Value& v, CallArgs& a);
Value f_sort(Interp& in, const Value& v, CallArgs& a);
Value f_sum(Interp& in, const Value& v, CallArgs& a);
Value f_unique(Interp& in, const Value& v, CallArgs& a);

}  // namespace sluice::jinja::filters
