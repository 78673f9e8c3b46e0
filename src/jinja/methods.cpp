// Attribute/item access, methods of str/dict/list, global functions, argument binding.
#include <algorithm>
#include <cstring>
#include <ctime>

#include "jinja/builtins.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"

namespace sluice::jinja {

std::vector<Value> bind_args(const char* fn, const CallArgs& args, std::initializer_list<ParamSpec> params) {
  std::vector<Value> out;
  std::vector<bool> set(params.size(), false);
  for (const auto& p : params) out.push_back(p.dflt);
  if (args.pos.size() > params.size())
    raise("%s() takes at most %zu argument(s) (%zu given)", fn, params.size(), args.pos.size());
  for (size_t k = 0; k < args.pos.size(); ++k) {
    out[k] = args.pos[k];
    set[k] = true;
  }
  for (const auto& [name, v] : args.kw) {
    size_t k = 0;
    for (const auto& p : params) {
      if (name == p.name) break;
      ++k;
    }
    if (k == params.size()) raise("%s() got an unexpected keyword argument '%s'", fn, name.c_str());
    if (set[k]) raise("%s() got multiple values for argument '%s'", fn, name.c_str());
    out[k] = v;
    set[k] = true;
  }
  size_t k = 0;
  for (const auto& p : params) {
    if (p.required && !set[k]) raise("%s() missing required argument '%s'", fn, p.name);
    ++k;
  }
  return out;
}

namespace {

const char* const kStrMethods[] = {
    "strip",     "lstrip",     "rstrip",       "split",        "rsplit",   "splitlines", "startswith", "endswith",
    "upper",     "lower",      "title",        "capitalize",   "swapcase", "replace",    "find",       "rfind",
    "index",     "rindex",     "count",        "join",         "isdigit",  "isdecimal",  "isnumeric",  "isalpha",
    "isalnum",   "isspace",    "isupper",      "islower",      "center",   "ljust",      "rjust",      "zfill",
    "partition", "rpartition", "removeprefix", "removesuffix", "format"};
const char* const kDictMethods[] = {"items", "keys", "values", "get", "copy"};
const char* const kListMethods[] = {"index", "count", "copy"};
// Mutating methods exist in Python but the immutable sandbox refuses them.
const char* const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char* const kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

template <size_t N>
bool listed(const char* const (&names)[N], const std::string& name) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

Value call_method(Interp& in, const Value& self, const std::string& name, CallArgs& args);

class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  const char* type_name() const override { return "builtin_function_or_method"; }
  std::string repr(int) const override {
    return cat("<built-in method ", name_, " of ", jinja::type_name(self_), " object>");
  }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override { return call_method(in, self_, name_, args); }
  int depth() const override { return 1 + self_.depth(); }

 private:
  Value self_;
  std::string name_;
};

Value bound(const Value& self, const std::string& name) {
  return Value::object(std::make_shared<BoundMethod>(self, name));
}

Value unsafe(const Value& self, const std::string& name) {
  return Value::undefined(cat("access to attribute '", name, "' of '", type_name(self), "' object is unsafe."));
}

Value no_attr(const Value& obj, const std::string& name) {
  return Value::undefined(cat("'", type_name(obj), " object' has no attribute '", name, "'"));
}

// Python attribute lookup only (no item fallback).
bool python_attr(const Value& obj, const std::string& name, Value* out) {
  switch (obj.kind()) {
    case Kind::String:
      if (listed(kStrMethods, name)) {
        *out = bound(obj, name);
        return true;
      }
      return false;
    case Kind::Dict:
      if (listed(kDictMethods, name)) {
        *out = bound(obj, name);
        return true;
      }
      if (listed(kDictUnsafe, name)) {
        *out = unsafe(obj, name);
        return true;
      }
      return false;
    case Kind::List:
      if (obj.view() != View::None) return false;
      if (listed(kListMethods, name) && (name != "copy" || !obj.is_tuple())) {
        *out = bound(obj, name);
        return true;
      }
      if (!obj.is_tuple() && listed(kListUnsafe, name)) {
        *out = unsafe(obj, name);
        return true;
      }
      return false;
    default: return false;
  }
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_object()) return obj.o().getattr(name);
  Value v;
  if (python_attr(obj, name, &v)) return v;
  if (obj.is_dict() && name.rfind("__", 0) != 0) {
    if (const Value* x = obj.d().find(std::string_view(name))) return *x;
  }
  return no_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  const bool int_key = key.is_int() || key.is_bool();
  if ((obj.is_list() || obj.is_string()) && int_key && obj.view() == View::None) {
    const int64_t n = py_len(obj);
    int64_t k = key.i();
    if (k < 0) k += n;
    if (k >= 0 && k < n) {
      if (obj.is_list()) return obj.l().items[static_cast<size_t>(k)];
      const size_t b = py::byte_offset(obj.s(), k);
      size_t e = b;
      py::next_cp(obj.s(), e);
      return Value::string(obj.s().substr(b, e - b));
    }
  } else if (obj.is_dict() && !(key.is_list() && !key.is_tuple()) && !key.is_dict()) {
    if (const Value* x = obj.d().find(key)) return *x;
  }
  if (key.is_string()) {
    if (obj.is_object()) return obj.o().getattr(key.s());
    Value v;
    if (python_attr(obj, key.s(), &v)) return v;
    return no_attr(obj, key.s());
  }
  return Value::undefined(cat(type_name(obj), " object has no element ", to_repr(key)));
}

// ---------------------------------------------------------------------------------------------
// methods

namespace {

std::optional<std::string> opt_str(const Value& v, const char* what) {
  if (v.is_none()) return std::nullopt;
  if (!v.is_string()) raise("%s arg must be None or str", what);
  return v.s();
}

const std::string& need_str(const Value& v, const char* fn) {
  if (!v.is_string()) raise("%s() argument must be str, not %s", fn, type_name(v));
  return v.s();
}

int64_t need_int(const Value& v, const char* fn) {
  if (!(v.is_int() || v.is_bool())) raise("%s(): '%s' object cannot be interpreted as an integer", fn, type_name(v));
  return v.i();
}

std::optional<int64_t> opt_int(const Value& v, const char* fn) {
  if (v.is_none()) return std::nullopt;
  return need_int(v, fn);
}

// s[start:end] in code points (Python slice bounds), for startswith/endswith/count.
std::string window(const std::string& s, const Value& start, const Value& end, const char* fn) {
  const auto len = static_cast<int64_t>(py::cp_count(s));
  int64_t b = opt_int(start, fn).value_or(0), e = opt_int(end, fn).value_or(len);
  if (b < 0) b = std::max<int64_t>(0, b + len);
  if (e < 0) e = std::max<int64_t>(0, e + len);
  b = std::min(b, len);
  e = std::min(e, len);
  if (b >= e) return {};
  const size_t bb = py::byte_offset(s, b);
  return s.substr(bb, py::byte_offset(s, e) - bb);
}

bool all_cps(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();)
    if (!pred(py::next_cp(s, i))) return false;
  return true;
}

// str.format with automatic/explicit positional and named fields, no format specs.
std::string str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      raise("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) raise("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conv = 's';
    const size_t bang = field.find('!');
    if (field.find(':') != std::string::npos) raise("format specifications are not supported");
    if (bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 's';
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_idx >= args.pos.size()) raise("Replacement index %zu out of range for positional args tuple", auto_idx);
      v = &args.pos[auto_idx++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = static_cast<size_t>(std::atoll(field.c_str()));
      if (k >= args.pos.size()) raise("Replacement index %zu out of range for positional args tuple", k);
      v = &args.pos[k];
    } else {
      for (const auto& [k, x] : args.kw)
        if (k == field) v = &x;
      if (!v) raise("'%s'", field.c_str());
    }
    out += conv == 'r' || conv == 'a' ? to_repr(*v) : to_str(*v);
  }
  return out;
}

Value str_method(Interp& in, const std::string& s, const std::string& name, CallArgs& a) {
  const char* fn = name.c_str();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto p = bind_args(fn, a, {{"chars", Value::none()}});
    return Value::string(py::strip(s, opt_str(p[0], fn), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto p = bind_args(fn, a, {{"sep", Value::none()}, {"maxsplit", Value::integer(-1)}});
    const auto parts = name == "split" ? py::split(s, opt_str(p[0], fn), need_int(p[1], fn))
                                       : py::rsplit(s, opt_str(p[0], fn), need_int(p[1], fn));
    std::vector<Value> out;
    for (const auto& x : parts) out.push_back(Value::string(x));
    return Value::list(std::move(out));
  }
  if (name == "splitlines") {
    auto p = bind_args(fn, a, {{"keepends", Value::boolean(false)}});
    std::vector<Value> out;
    for (const auto& x : py::splitlines(s, truthy(p[0]))) out.push_back(Value::string(x));
    return Value::list(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    auto p = bind_args(fn, a, {{"prefix", {}, true}, {"start", Value::none()}, {"end", Value::none()}});
    const std::string w = window(s, p[1], p[2], fn);
    std::vector<Value> cands = p[0].is_tuple() ? p[0].l().items : std::vector<Value>{p[0]};
    for (const auto& c : cands) {
      if (!c.is_string()) raise("%s first arg must be str or a tuple of str, not %s", fn, type_name(c));
      const std::string& x = c.s();
      if (x.size() <= w.size() &&
          (name == "startswith" ? w.compare(0, x.size(), x) == 0 : w.compare(w.size() - x.size(), x.size(), x) == 0))
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase") {
    bind_args(fn, a, {});
    if (name == "upper") return Value::string(py::upper(s));
    if (name == "lower") return Value::string(py::lower(s));
    if (name == "title") return Value::string(py::title(s));
    if (name == "capitalize") return Value::string(py::capitalize(s));
    return Value::string(py::swapcase(s));
  }
  if (name == "replace") {
    auto p = bind_args(fn, a, {{"old", {}, true}, {"new", {}, true}, {"count", Value::integer(-1)}});
    const std::string& o = need_str(p[0], fn);
    const std::string& r = need_str(p[1], fn);
    const int64_t count = need_int(p[2], fn);
    const int64_t hits = std::min<int64_t>(py::count(s, o), count < 0 ? INT64_MAX : count);
    if (r.size() > o.size() && static_cast<uint64_t>(hits) * (r.size() - o.size()) + s.size() > in.limits().max_bytes)
      raise("replace() result too large");
    return Value::string(py::replace(s, o, r, count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    auto p = bind_args(fn, a, {{"sub", {}, true}, {"start", Value::none()}, {"end", Value::none()}});
    const int64_t r = py::find(s, need_str(p[0], fn), opt_int(p[1], fn), opt_int(p[2], fn), name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) raise("substring not found");
    return Value::integer(r);
  }
  if (name == "count") {
    auto p = bind_args(fn, a, {{"sub", {}, true}, {"start", Value::none()}, {"end", Value::none()}});
    return Value::integer(py::count(window(s, p[1], p[2], fn), need_str(p[0], fn)));
  }
  if (name == "join") {
    auto p = bind_args(fn, a, {{"iterable", {}, true}});
    std::string out;
    size_t k = 0;
    for (const auto& x : iterate(p[0])) {
      if (!x.is_string()) raise("sequence item %zu: expected str instance, %s found", k, type_name(x));
      if (k++) out += s;
      out += x.s();
      if (out.size() > in.limits().max_bytes) raise("join() result too large");
    }
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
    bind_args(fn, a, {});
    return Value::boolean(all_cps(s, py::is_decimal));
  }
  if (name == "isalpha") {
    bind_args(fn, a, {});
    return Value::boolean(all_cps(s, py::is_alpha));
  }
  if (name == "isalnum") {
    bind_args(fn, a, {});
    return Value::boolean(all_cps(s, [](uint32_t c) { return py::is_alpha(c) || py::is_decimal(c); }));
  }
  if (name == "isspace") {
    bind_args(fn, a, {});
    return Value::boolean(all_cps(s, py::is_space));
  }
  if (name == "isupper" || name == "islower") {
    bind_args(fn, a, {});
    bool cased = false;
    for (size_t i = 0; i < s.size();) {
      const uint32_t c = py::next_cp(s, i);
      if (name == "isupper" ? py::is_lower(c) : py::is_upper(c)) return Value::boolean(false);
      cased = cased || py::is_cased(c);
    }
    return Value::boolean(cased);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto p = bind_args(fn, a, {{"width", {}, true}, {"fillchar", Value::string(" ")}});
    const int64_t w = need_int(p[0], fn);
    const std::string& fill = need_str(p[1], fn);
    if (py::cp_count(fill) != 1) raise("The fill character must be exactly one character long");
    if (w > static_cast<int64_t>(in.limits().max_bytes / 4)) raise("%s() width too large", fn);
    size_t i = 0;
    return Value::string(py::center(s, w, py::next_cp(fill, i), name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "zfill") {
    auto p = bind_args(fn, a, {{"width", {}, true}});
    const int64_t w = need_int(p[0], fn);
    if (w > static_cast<int64_t>(in.limits().max_bytes / 4)) raise("zfill() width too large");
    const int64_t len = static_cast<int64_t>(py::cp_count(s));
    if (w <= len) return Value::string(s);
    std::string sign, rest = s;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
      sign = s.substr(0, 1);
      rest = s.substr(1);
    }
    return Value::string(sign + std::string(static_cast<size_t>(w - len), '0') + rest);
  }
  if (name == "partition" || name == "rpartition") {
    auto p = bind_args(fn, a, {{"sep", {}, true}});
    const std::string& sep = need_str(p[0], fn);
    if (sep.empty()) raise("empty separator");
    const size_t f = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos)
      return name == "partition" ? Value::tuple({Value::string(s), Value::string(""), Value::string("")})
                                 : Value::tuple({Value::string(""), Value::string(""), Value::string(s)});
    return Value::tuple({Value::string(s.substr(0, f)), Value::string(sep), Value::string(s.substr(f + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto p = bind_args(fn, a, {{"affix", {}, true}});
    const std::string& x = need_str(p[0], fn);
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && x.size() <= s.size() && !x.empty() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "format") return Value::string(str_format(s, a));
  raise("'str' object has no attribute '%s'", fn);
}

Value call_method(Interp& in, const Value& self, const std::string& name, CallArgs& a) {
  const char* fn = name.c_str();
  if (self.is_string()) return str_method(in, self.s(), name, a);
  if (self.is_dict()) {
    const Dict& d = self.d();
    if (name == "items" || name == "keys" || name == "values") {
      bind_args(fn, a, {});
      std::vector<Value> out;
      out.reserve(d.size());
      for (const auto& [k, v] : d.items) out.push_back(name == "items" ? Value::tuple({k, v}) : name == "keys" ? k : v);
      return Value::dict_view(std::move(out), name == "items"  ? View::Items
                                              : name == "keys" ? View::Keys
                                                               : View::Values);
    }
    if (name == "get") {
      auto p = bind_args(fn, a, {{"key", {}, true}, {"default", Value::none()}});
      if ((p[0].is_list() && !p[0].is_tuple()) || p[0].is_dict()) raise("unhashable type: '%s'", type_name(p[0]));
      const Value* v = d.find(p[0]);
      return v ? *v : p[1];
    }
    if (name == "copy") {
      bind_args(fn, a, {});
      return self;
    }
  }
  if (self.is_list()) {
    const auto& items = self.l().items;
    if (name == "index") {
      auto p = bind_args(fn, a, {{"value", {}, true}});
      for (size_t k = 0; k < items.size(); ++k)
        if (py_eq(items[k], p[0])) return Value::integer(static_cast<int64_t>(k));
      raise("%s is not in list", to_repr(p[0]).c_str());
    }
    if (name == "count") {
      auto p = bind_args(fn, a, {{"value", {}, true}});
      int64_t n = 0;
      for (const auto& x : items) n += py_eq(x, p[0]);
      return Value::integer(n);
    }
    if (name == "copy") {
      bind_args(fn, a, {});
      return self;
    }
  }
  raise("'%s' object has no attribute '%s'", type_name(self), fn);
}

}  // namespace

}  // namespace sluice::jinja
