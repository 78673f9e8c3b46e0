#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "jinja/pystr.h"

namespace sluice::jinja {

void raise(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[512];
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(small, sizeof small, fmt, ap2);
  va_end(ap2);
  std::string msg;
  if (n >= 0 && static_cast<size_t>(n) < sizeof small) {
    msg = small;
  } else if (n > 0) {
    msg.resize(static_cast<size_t>(n));
    std::vsnprintf(msg.data(), msg.size() + 1, fmt, ap);
  }
  va_end(ap);
  throw EvalError(msg);
}

static int checked_depth(int d) {
  if (d > kMaxValueDepth) raise("value nested deeper than %d levels", kMaxValueDepth);
  return d;
}

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.p_ = std::make_shared<std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v = none();
  v.kind_ = Kind::Bool, v.u_.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v = none();
  v.kind_ = Kind::Int, v.u_.i = i;
  return v;
}
Value Value::number(double d) {
  Value v = none();
  v.kind_ = Kind::Float, v.u_.f = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.p_ = std::make_shared<std::string>(std::move(s));
  return v;
}
Value Value::list(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  int d = 0;
  for (const auto& x : items) d = std::max(d, x.depth());
  l->depth = checked_depth(d + 1);
  l->items = std::move(items);
  Value v;
  v.kind_ = Kind::List;
  v.p_ = std::move(l);
  return v;
}
Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  static_cast<List*>(v.p_.get())->tuple = true;
  return v;
}
Value Value::dict(Dict d) {
  int depth = 0;
  for (const auto& [k, x] : d.items) depth = std::max({depth, k.depth(), x.depth()});
  d.depth = checked_depth(depth + 1);
  Value v;
  v.kind_ = Kind::Dict;
  v.p_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::Object;
  if (o) checked_depth(o->depth());
  v.p_ = std::move(o);
  return v;
}

Value Value::dict_view(std::vector<Value> items, View view) {
  Value v = list(std::move(items));
  static_cast<List*>(v.p_.get())->view = view;
  return v;
}

bool Value::is_tuple() const { return kind_ == Kind::List && l().tuple; }
View Value::view() const { return kind_ == Kind::List ? l().view : View::None; }

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  return kind_ == Kind::Undefined && p_ ? *static_cast<const std::string*>(p_.get()) : empty;
}

int Value::depth() const {
  switch (kind_) {
    case Kind::List: return l().depth;
    case Kind::Dict: return d().depth;
    case Kind::Object: return p_ ? o().depth() : 1;
    default: return 1;
  }
}

// ---------------------------------------------------------------------------------------------

const Value* Dict::find(std::string_view key) const {
  auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &items[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.s()));
  for (const auto& [k, v] : items)
    if (!k.is_string() && py_eq(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (key.is_string()) {
    auto [it, inserted] = index.emplace(key.s(), items.size());
    if (!inserted) {
      items[it->second].second = std::move(value);
      return;
    }
  } else {
    for (auto& [k, v] : items)
      if (!k.is_string() && py_eq(k, key)) {
        v = std::move(value);
        return;
      }
  }
  items.emplace_back(std::move(key), std::move(value));
}

std::string Object::repr(int) const { return std::string("<") + type_name() + " object>"; }
Value Object::getattr(const std::string& name) const {
  return Value::undefined(std::string("'") + type_name() + " object' has no attribute '" + name + "'");
}
Value Object::call(Interp&, CallArgs&) { raise("'%s' object is not callable", type_name()); }

Iterator::Iterator(std::vector<Value> items) : items_(std::move(items)) {
  int d = 0;
  for (const auto& x : items_) d = std::max(d, x.depth());
  depth_ = d + 1;
}
Iterator::Iterator(std::function<std::vector<Value>()> producer, int depth)
    : producer_(std::move(producer)), depth_(depth + 1) {}
void Iterator::force() {
  if (!producer_) return;
  auto f = std::move(producer_);
  producer_ = nullptr;
  items_ = f();
}
std::vector<Value> Iterator::take_rest() {
  force();
  std::vector<Value> rest(items_.begin() + static_cast<std::ptrdiff_t>(pos_), items_.end());
  pos_ = items_.size();
  return rest;
}
bool Iterator::next(Value* out) {
  force();
  if (pos_ >= items_.size()) return false;
  *out = items_[pos_++];
  return true;
}

// Python's repr shows a container that is already being printed as {...}; a namespace can
// contain itself, so track the ones being printed.
std::string Namespace::repr(int depth) const {
  thread_local std::vector<const Namespace*> active;
  for (const Namespace* n : active)
    if (n == this) return "<Namespace {...}>";
  active.push_back(this);
  try {
    std::string s = "<Namespace " + to_repr(Value::dict(attrs_), depth + 1) + ">";
    active.pop_back();
    return s;
  } catch (...) {
    active.pop_back();
    throw;
  }
}
Value Namespace::getattr(const std::string& name) const {
  if (const Value* v = attrs_.find(std::string_view(name))) return *v;
  return Value::undefined("'Namespace object' has no attribute '" + name + "'");
}

// ---------------------------------------------------------------------------------------------

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List:
      switch (v.view()) {
        case View::Keys: return "dict_keys";
        case View::Values: return "dict_values";
        case View::Items: return "dict_items";
        case View::None: break;
      }
      return v.is_tuple() ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Object: return v.o().type_name();
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.b();
    case Kind::Int: return v.i() != 0;
    case Kind::Float: return v.f() != 0;
    case Kind::String: return !v.s().empty();
    case Kind::List: return !v.l().items.empty();
    case Kind::Dict: return v.d().size() != 0;
    case Kind::Object: return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "";
    case Kind::String: return v.s();
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v, int depth) {
  if (depth > kMaxValueDepth) raise("value nested deeper than %d levels", kMaxValueDepth);
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return v.b() ? "True" : "False";
    case Kind::Int: return py::int_str(v.i());
    case Kind::Float: return py::float_repr(v.f());
    case Kind::String: return py::repr(v.s());
    case Kind::List: {
      const List& l = v.l();
      if (l.view != View::None) {
        std::string inner = "[";
        for (size_t k = 0; k < l.items.size(); ++k) {
          if (k) inner += ", ";
          inner += to_repr(l.items[k], depth + 1);
        }
        return std::string(type_name(v)) + "(" + inner + "])";
      }
      std::string out = l.tuple ? "(" : "[";
      for (size_t k = 0; k < l.items.size(); ++k) {
        if (k) out += ", ";
        out += to_repr(l.items[k], depth + 1);
      }
      if (l.tuple && l.items.size() == 1) out += ",";
      out += l.tuple ? ")" : "]";
      return out;
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.d().items) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(k, depth + 1) + ": " + to_repr(x, depth + 1);
      }
      return out + "}";
    }
    case Kind::Object: return v.o().repr(depth);
  }
  return "";
}

static bool both_numbers(const Value& a, const Value& b) { return a.is_number() && b.is_number(); }

// Compares numbers exactly, as CPython does for int vs float (long double holds any int64).
static int num_cmp(const Value& a, const Value& b, bool* unordered) {
  *unordered = false;
  if (!a.is_float() && !b.is_float()) return a.i() < b.i() ? -1 : a.i() > b.i() ? 1 : 0;
  const long double x = a.is_float() ? a.f() : static_cast<long double>(a.i());
  const long double y = b.is_float() ? b.f() : static_cast<long double>(b.i());
  if (std::isnan(x) || std::isnan(y)) {
    *unordered = true;
    return 0;
  }
  return x < y ? -1 : x > y ? 1 : 0;
}

bool py_eq(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) raise("value nested deeper than %d levels", kMaxValueDepth);
  if (both_numbers(a, b)) {
    bool unordered;
    const int c = num_cmp(a, b, &unordered);
    return !unordered && c == 0;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.s() == b.s();
    case Kind::List: {
      const List &x = a.l(), &y = b.l();
      if (x.view != y.view) return false;
      if (x.view == View::Values) return a.ptr() == b.ptr();  // values views compare by identity
      if (x.view != View::None) {                             // keys/items views compare as sets
        if (x.items.size() != y.items.size()) return false;
        for (const auto& e : x.items) {
          bool found = false;
          for (const auto& f : y.items) found = found || py_eq(e, f, depth + 1);
          if (!found) return false;
        }
        return true;
      }
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t k = 0; k < x.items.size(); ++k)
        if (!py_eq(x.items[k], y.items[k], depth + 1)) return false;
      return true;
    }
    case Kind::Dict: {
      const Dict &x = a.d(), &y = b.d();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* o = y.find(k);
        if (!o || !py_eq(v, *o, depth + 1)) return false;
      }
      return true;
    }
    case Kind::Object: return a.ptr() == b.ptr();
    default: return false;
  }
}

bool py_less(const Value& a, const Value& b, const char* op, int depth) {
  if (depth > kMaxValueDepth) raise("value nested deeper than %d levels", kMaxValueDepth);
  if (both_numbers(a, b)) {
    bool unordered;
    const int c = num_cmp(a, b, &unordered);
    return !unordered && c < 0;
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_string() && b.is_string()) return a.s() < b.s();  // UTF-8 order == code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && a.view() == View::None && b.view() == View::None) {
    const auto &x = a.l().items, &y = b.l().items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!py_eq(x[k], y[k], depth + 1)) return py_less(x[k], y[k], op, depth + 1);
    }
    return x.size() < y.size();
  }
  raise("'%s' not supported between instances of '%s' and '%s'", op, type_name(a), type_name(b));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::String: {
      std::vector<Value> out;
      const std::string& s = v.s();
      for (size_t i = 0; i < s.size();) {
        const size_t b = i;
        py::next_cp(s, i);
        out.push_back(Value::string(s.substr(b, i - b)));
      }
      return out;
    }
    case Kind::List: return v.l().items;
    case Kind::Dict: {
      std::vector<Value> out;
      out.reserve(v.d().size());
      for (const auto& kv : v.d().items) out.push_back(kv.first);
      return out;
    }
    case Kind::Object:
      if (auto* it = v.as<Iterator>()) return it->take_rest();
      break;
    default: break;
  }
  raise("'%s' object is not iterable", type_name(v));
}

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return static_cast<int64_t>(py::cp_count(v.s()));
    case Kind::List: return static_cast<int64_t>(v.l().items.size());
    case Kind::Dict: return static_cast<int64_t>(v.d().size());
    default: raise("object of type '%s' has no len()", type_name(v));
  }
}

bool py_contains(const Value& hay, const Value& needle) {
  switch (hay.kind()) {
    case Kind::String:
      if (!needle.is_string()) raise("'in <string>' requires string as left operand, not %s", type_name(needle));
      return hay.s().find(needle.s()) != std::string::npos;
    case Kind::List:
      for (const auto& x : hay.l().items)
        if (py_eq(x, needle)) return true;
      return false;
    case Kind::Dict:
      if (needle.is_list() && !needle.is_tuple()) raise("unhashable type: 'list'");
      if (needle.is_dict()) raise("unhashable type: 'dict'");
      return hay.d().find(needle) != nullptr;
    case Kind::Undefined: return false;
    case Kind::Object:
      if (auto* it = hay.as<Iterator>()) {
        Value x;
        while (it->next(&x))
          if (py_eq(x, needle)) return true;
        return false;
      }
      break;
    default: break;
  }
  raise("argument of type '%s' is not iterable", type_name(hay));
}

void fail_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  raise("%s", hint.empty() ? "value is undefined" : hint.c_str());
}

}  // namespace sluice::jinja
