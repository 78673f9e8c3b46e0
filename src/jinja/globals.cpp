// Global functions of HF's chat-template environment: jinja2's range (capped like the
// sandbox), dict, namespace, joiner, plus transformers' raise_exception and strftime_now.
#include <cstdio>
#include <ctime>

#include "jinja/builtins.h"

namespace sluice::jinja {

namespace {

const std::string& need_str(const Value& v, const char* fn) {
  if (!v.is_string()) raise("%s() argument must be str, not %s", fn, type_name(v));
  return v.s();
}

Dict dict_from(const CallArgs& a, const char* fn) {
  Dict d;
  if (a.pos.size() > 1) raise("%s expected at most 1 argument, got %zu", fn, a.pos.size());
  if (a.pos.size() == 1) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      d = src.d();
    } else {
      for (const auto& item : iterate(src)) {
        if (!item.is_list() || item.l().items.size() != 2)
          raise("dictionary update sequence element has wrong length or type");
        d.set(item.l().items[0], item.l().items[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kw) d.set(Value::string(k), v);
  return d;
}

Value fn_range(Interp& in, CallArgs& a, const Value&) {
  if (!a.kw.empty()) raise("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) raise("range expected 1 to 3 arguments, got %zu", a.pos.size());
  for (const auto& v : a.pos)
    if (!(v.is_int() || v.is_bool())) raise("'%s' object cannot be interpreted as an integer", type_name(v));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) stop = a.pos[0].i();
  else {
    start = a.pos[0].i();
    stop = a.pos[1].i();
  }
  if (a.pos.size() == 3) step = a.pos[2].i();
  if (step == 0) raise("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 absstep = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 len = span <= 0 ? 0 : (span + absstep - 1) / absstep;
  // The sandbox caps ranges so `range(10**9)` cannot stall the renderer.
  if (len > 100000) raise("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  in.charge(static_cast<uint64_t>(len));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(len));
  for (int64_t k = 0, v = start; k < static_cast<int64_t>(len); ++k, v += step) out.push_back(Value::integer(v));
  return Value::list(std::move(out));
}

Value fn_dict(Interp&, CallArgs& a, const Value&) { return Value::dict(dict_from(a, "dict")); }

Value fn_namespace(Interp& in, CallArgs& a, const Value&) {
  auto ns = in.make_namespace();
  for (const auto& [k, v] : dict_from(a, "namespace").items) {
    if (!k.is_string()) raise("namespace attribute names must be strings");
    ns->set(k.s(), v);
  }
  return Value::object(ns);
}

Value fn_raise_exception(Interp&, CallArgs& a, const Value&) {
  auto p = bind_args("raise_exception", a, {{"message", {}, true}});
  raise("%s", to_str(p[0]).c_str());
}

// datetime.now().strftime(fmt): %f, %z and %Z are datetime's own (a naive datetime has no
// zone, so %z and %Z are empty); everything else is C strftime in the C locale.
Value fn_strftime_now(Interp& in, CallArgs& a, const Value&) {
  auto p = bind_args("strftime_now", a, {{"format", {}, true}});
  const std::string& fmt = need_str(p[0], "strftime_now");
  if (fmt.size() > 1024) raise("strftime_now() format too long");
  std::string f;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      f += fmt[i];
      continue;
    }
    const char c = fmt[++i];
    if (c == 'f') {
      char b[16];
      std::snprintf(b, sizeof b, "%06d", in.now().micro);
      f += b;
    } else if (c == 'z' || c == 'Z') {
    } else {
      f += '%';
      f += c;
    }
  }
  if (f.empty()) return Value::string("");
  std::tm tm = in.now().tm;
  std::vector<char> buf(256 + 64 * f.size());
  const size_t n = std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
  return Value::string(std::string(buf.data(), n));
}

class Joiner : public Object {
 public:
  explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
  const char* type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs&) override {
    if (!used_) {
      used_ = true;
      return Value::string("");
    }
    return Value::string(sep_);
  }

 private:
  std::string sep_;
  bool used_ = false;
};

Value fn_joiner(Interp&, CallArgs& a, const Value&) {
  auto p = bind_args("joiner", a, {{"sep", Value::string(", ")}});
  return Value::object(std::make_shared<Joiner>(to_str(p[0])));
}

}  // namespace

std::vector<std::pair<std::string, Value>> global_functions() {
  auto f = [](const char* name, NativeFunction::Fn fn) {
    return std::make_pair(std::string(name), Value::object(std::make_shared<NativeFunction>(name, fn)));
  };
  return {f("range", fn_range),
          f("dict", fn_dict),
          f("namespace", fn_namespace),
          f("joiner", fn_joiner),
          f("raise_exception", fn_raise_exception),
          f("strftime_now", fn_strftime_now)};
}

}  // namespace sluice::jinja
