// jinja2's filters over sequences and mappings: select/map/sort/unique/dictsort/join/...
// The generator-returning ones (select, reject, *attr, map, unique, batch, items) are lazy,
// as in jinja2: their bodies run when the result is consumed.
#include "jinja/filter_util.h"
#include "jinja/ops.h"
#include "jinja/parser.h"

namespace sluice::jinja::filters {

namespace {
Value min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  auto p = bind_args(want_max ? "max" : "min", a,
                     {{"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
  const auto parts = attr_parts(p[1]);
  const auto items = iterate(v);
  in.charge(items.size());
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    Value k = p[1].is_none() ? x : get_path(x, parts);
    return truthy(p[0]) ? k : ignore_case(k);
  };
  size_t best = 0;
  Value bk = key(items[0]);
  for (size_t k = 1; k < items.size(); ++k) {
    Value kk = key(items[k]);
    if (want_max ? py_less(bk, kk) : py_less(kk, bk)) {
      best = k;
      bk = std::move(kk);
    }
  }
  return items[best];
}

// select / reject / selectattr / rejectattr: generators; nothing is tested when the input is
// falsy (jinja2 checks `if value:` first).
Value select_reject(Interp& in, const Value& v, const CallArgs& a, bool keep, bool by_attr) {
  return lazy(v, [&in, v, a, keep, by_attr]() {
    std::vector<Value> out;
    if (!truthy(v)) return out;
    size_t off = 0;
    std::vector<Value> parts;
    if (by_attr) {
      if (a.pos.empty()) raise("Missing parameter for attribute name");
      parts = attr_parts(a.pos[0]);
      off = 1;
    }
    const bool has_test_name = a.pos.size() > off;
    std::string test_name;
    if (has_test_name) {
      if (!a.pos[off].is_string()) raise("test name must be a string");
      test_name = a.pos[off].s();
      if (!has_test(test_name)) raise("No test named '%s'.", test_name.c_str());
    }
    CallArgs rest;
    if (has_test_name) rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), a.pos.end());
    rest.kw = a.kw;
    for (auto& x : iterate(v)) {
      const Value subject = by_attr ? get_path(x, parts) : x;
      bool r;
      if (has_test_name) {
        CallArgs each = rest;
        r = apply_test(in, test_name, subject, each);
      } else {
        r = truthy(subject);
      }
      if (r == keep) out.push_back(std::move(x));
    }
    return out;
  });
}

}  // namespace

Value f_batch(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("batch", a, {{"linecount", {}, true}, {"fill_with", Value::none()}});
  return lazy(v, [&in, v, p]() {
    const int64_t n = as_int(p[0], "linecount");
    if (n <= 0) raise("batch size must be positive");
    std::vector<Value> out, cur;
    for (auto& x : iterate(v)) {
      if (static_cast<int64_t>(cur.size()) == n) {
        out.push_back(Value::list(std::move(cur)));
        cur.clear();
      }
      cur.push_back(std::move(x));
    }
    if (!cur.empty()) {
      if (!p[1].is_none())
        while (static_cast<int64_t>(cur.size()) < n) cur.push_back(p[1]);
      out.push_back(Value::list(std::move(cur)));
    }
    in.charge(out.size());
    return out;
  });
}

Value f_dictsort(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(
      "dictsort", a,
      {{"case_sensitive", Value::boolean(false)}, {"by", str_v("key")}, {"reverse", Value::boolean(false)}});
  int pos;
  if (p[1].is_string() && p[1].s() == "key") pos = 0;
  else if (p[1].is_string() && p[1].s() == "value") pos = 1;
  else raise("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) {
    no_undefined(v);
    raise("'%s' object has no attribute 'items'", type_name(v));
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, x] : v.d().items) {
    const Value& key = pos == 0 ? k : x;
    keyed.emplace_back(truthy(p[0]) ? key : ignore_case(key), Value::tuple({k, x}));
  }
  py_sort(in, keyed, truthy(p[2]));
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value f_first(Interp&, const Value& v, CallArgs& a) {
  bind_args("first", a, {});
  if (auto* it = v.as<Iterator>()) {
    Value x;
    if (it->next(&x)) return x;
  } else {
    auto items = iterate(v);
    if (!items.empty()) return items[0];
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interp&, const Value& v, CallArgs& a) {
  bind_args("last", a, {});
  if (v.as<Iterator>()) raise("'generator' object is not reversible");
  auto items = iterate(v);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

Value f_items(Interp&, const Value& v, CallArgs& a) {
  bind_args("items", a, {});
  return lazy(v, [v]() {
    std::vector<Value> out;
    if (v.is_undefined()) return out;
    if (!v.is_dict()) raise("Can only get item pairs from a mapping.");
    for (const auto& [k, x] : v.d().items) out.push_back(Value::tuple({k, x}));
    return out;
  });
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("join", a, {{"d", str_v("")}, {"attribute", Value::none()}});
  const std::string sep = to_str(p[0]);
  const auto parts = attr_parts(p[1]);
  std::string out;
  bool first = true;
  for (const auto& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(p[1].is_none() ? x : get_path(x, parts));
    if (out.size() > in.limits().max_bytes) raise("join() result too large");
  }
  return str_v(std::move(out));
}

Value f_list(Interp&, const Value& v, CallArgs& a) {
  bind_args("list", a, {});
  return Value::list(iterate(v));
}

Value f_map(Interp& in, const Value& v, CallArgs& a) {
  return lazy(v, [&in, v, a]() {
    std::vector<Value> out;
    if (!truthy(v)) return out;
    if (a.pos.empty()) {
      Value attr, dflt = Value::none();
      bool have_attr = false;
      for (const auto& [k, x] : a.kw) {
        if (k == "attribute") {
          attr = x;
          have_attr = true;
        } else if (k == "default") dflt = x;
        else raise("Unexpected keyword argument '%s'", k.c_str());
      }
      if (!have_attr) raise("map requires a filter argument");
      const auto parts = attr_parts(attr);
      for (const auto& x : iterate(v)) out.push_back(get_path(x, parts, &dflt));
      return out;
    }
    if (!a.pos[0].is_string()) raise("map filter name must be a string");
    const std::string name = a.pos[0].s();
    if (!has_filter(name)) raise("No filter named '%s'.", name.c_str());
    CallArgs rest{std::vector<Value>(a.pos.begin() + 1, a.pos.end()), a.kw};
    for (const auto& x : iterate(v)) {
      CallArgs each = rest;
      out.push_back(apply_filter(in, name, x, each));
    }
    return out;
  });
}

Value f_max(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Value f_min(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }

Value f_select(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, true, false); }

Value f_reject(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, false, false); }

Value f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, true, true); }

Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_reject(in, v, a, false, true); }

Value f_reverse(Interp&, const Value& v, CallArgs& a) {
  bind_args("reverse", a, {});
  if (v.is_string()) {
    auto cps = py::decode(v.s());
    std::reverse(cps.begin(), cps.end());
    return str_v(py::encode(cps));
  }
  if (v.as<Iterator>()) {  // reversed(generator) fails, jinja2 falls back to a reversed list
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (!(v.is_list() || v.is_dict() || v.is_undefined())) raise("argument must be iterable");
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  return make_iter(std::move(items));
}

Value f_sort(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(
      "sort", a,
      {{"reverse", Value::boolean(false)}, {"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
  std::vector<std::vector<Value>> attrs;
  if (p[2].is_string()) {
    for (const auto& part : py::split(p[2].s(), std::string(","), -1)) attrs.push_back(attr_parts(str_v(part)));
  } else if (!p[2].is_none()) {
    attrs.push_back({p[2]});
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& x : iterate(v)) {
    Value key;
    if (attrs.empty()) {
      key = truthy(p[1]) ? x : ignore_case(x);
    } else {
      std::vector<Value> ks;
      for (const auto& parts : attrs) {
        Value k = get_path(x, parts);
        ks.push_back(truthy(p[1]) ? k : ignore_case(k));
      }
      key = Value::list(std::move(ks));
    }
    keyed.emplace_back(std::move(key), std::move(x));
  }
  py_sort(in, keyed, truthy(p[0]));
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("sum", a, {{"attribute", Value::none()}, {"start", Value::integer(0)}});
  if (p[1].is_string()) raise("sum() can't sum strings [use ''.join(seq) instead]");
  const auto parts = attr_parts(p[0]);
  Value acc = p[1];
  for (const auto& x : iterate(v))
    acc = binop(Op::Add, acc, p[0].is_none() ? x : get_path(x, parts), in.limits().max_bytes, in.limits().max_items);
  return acc;
}

Value f_unique(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("unique", a, {{"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
  return lazy(v, [&in, v, p]() {
    const auto parts = attr_parts(p[1]);
    std::vector<Value> seen, out;
    for (auto& x : iterate(v)) {
      Value key = p[1].is_none() ? x : get_path(x, parts);
      if (!truthy(p[0])) key = ignore_case(key);
      if ((key.is_list() && !key.is_tuple()) || key.is_dict()) raise("unhashable type: '%s'", type_name(key));
      in.charge(seen.size() / 8 + 1);
      bool dup = false;
      for (const auto& s : seen) dup = dup || py_eq(s, key);
      if (!dup) {
        seen.push_back(std::move(key));
        out.push_back(std::move(x));
      }
    }
    return out;
  });
}

}  // namespace sluice::jinja::filters
