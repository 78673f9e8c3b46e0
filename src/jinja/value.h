// The value model of the template engine: Python's object model as jinja2 templates see it.
//
// Templates only ever see JSON-like data (the messages, tools and flags) plus a few objects
// the engine makes (namespace(), loop, macros, bound methods, single-pass generators).
// Lists and dicts are immutable once built: the HF sandbox forbids `append` and friends, so
// sharing them by pointer is safe. Namespaces are the one mutable object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"

namespace sluice::jinja {

class Interp;
class Value;

// Raised by evaluation code; the interpreter prefixes the template position before it
// reaches the caller. Still a sluice::Error, so nothing else can ever escape a render.
class EvalError : public sluice::Error {
 public:
  using sluice::Error::Error;
};
[[noreturn]] void raise(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Concatenation by appends (GCC 12 misreports `"lit" + std::string` under -O3 -Wrestrict).
template <class... T>
std::string cat(const T&... parts) {
  std::string s;
  (s.append(parts), ...);
  return s;
}

// Deepest list/dict nesting a value may have. Bounds every recursive walk (repr, tojson,
// equality, destruction) so a hostile template cannot overflow the stack.
inline constexpr int kMaxValueDepth = 400;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

// A list, a tuple, or one of a dict's views (d.keys(), d.values(), d.items()): views iterate
// like lists but print as dict_keys([...]), are not subscriptable and are not JSON data.
enum class View : uint8_t { None, Keys, Values, Items };

struct List;
struct Dict;
class Object;

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Value {
 public:
  Value() = default;                         // jinja2's Undefined with no name
  static Value undefined(std::string hint);  // hint: the message an operation on it raises
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict_view(std::vector<Value> items, View view);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> o);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }  // list or tuple
  bool is_tuple() const;
  View view() const;  // View::None unless a dict view
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool b() const { return u_.b; }
  int64_t i() const { return kind_ == Kind::Bool ? (u_.b ? 1 : 0) : u_.i; }  // bool is an int
  double f() const { return kind_ == Kind::Float ? u_.f : static_cast<double>(i()); }
  const std::string& s() const { return *static_cast<const std::string*>(p_.get()); }
  const List& l() const { return *static_cast<const List*>(p_.get()); }
  const Dict& d() const { return *static_cast<const Dict*>(p_.get()); }
  Object& o() const { return *static_cast<Object*>(p_.get()); }
  const std::shared_ptr<void>& ptr() const { return p_; }
  template <class T>
  T* as() const;  // the object as T, or nullptr
  const std::string& undefined_hint() const;
  int depth() const;  // 1 for scalars, 1 + deepest child for containers

 private:
  Kind kind_ = Kind::Undefined;
  union {
    bool b;
    int64_t i;
    double f;
  } u_{};
  std::shared_ptr<void> p_;  // string, List, Dict, Object, or the undefined hint
};

struct List {
  std::vector<Value> items;
  bool tuple = false;
  View view = View::None;
  int depth = 1;
};

// Insertion-ordered like a Python dict; string keys are indexed.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  std::unordered_map<std::string, size_t> index;
  int depth = 1;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces in place, keeping the first position
  size_t size() const { return items.size(); }
};

class Object {
 public:
  virtual ~Object() = default;
  virtual const char* type_name() const = 0;
  virtual std::string repr(int depth) const;
  // Attribute lookup (`x.name`); an undefined value when there is no such attribute.
  virtual Value getattr(const std::string& name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Interp& in, CallArgs& args);
  virtual int depth() const { return 1; }
};

// What jinja2's select/map/reverse... return: a generator. Truthy even when empty, has no
// length, and is consumed by iteration (a second loop over it sees nothing).
// jinja2 runs a generator's body only when it is consumed, so errors inside it (and its
// cost) appear only then; `producer` is that body.
class Iterator : public Object {
 public:
  explicit Iterator(std::vector<Value> items);
  Iterator(std::function<std::vector<Value>()> producer, int depth);
  const char* type_name() const override { return "generator"; }
  std::string repr(int) const override { return "<generator object>"; }
  std::vector<Value> take_rest();
  bool next(Value* out);
  int depth() const override { return depth_; }

 private:
  void force();
  std::function<std::vector<Value>()> producer_;
  std::vector<Value> items_;
  size_t pos_ = 0;
  int depth_ = 1;
};

class Namespace : public Object {
 public:
  const char* type_name() const override { return "Namespace"; }
  std::string repr(int depth) const override;
  Value getattr(const std::string& name) const override;
  void set(const std::string& name, Value v) { attrs_.set(Value::string(name), std::move(v)); }
  void clear() { attrs_ = Dict{}; }

 private:
  Dict attrs_;
};

template <class T>
T* Value::as() const {
  return kind_ == Kind::Object ? dynamic_cast<T*>(static_cast<Object*>(p_.get())) : nullptr;
}

// --- Python semantics ----------------------------------------------------------------------
const char* type_name(const Value& v);  // type(v).__name__
bool truthy(const Value& v);            // bool(v)
std::string to_str(const Value& v);     // str(v): what {{ v }} prints
std::string to_repr(const Value& v, int depth = 0);
bool py_eq(const Value& a, const Value& b, int depth = 0);
// a < b with Python's rules; raises TypeError-like errors for unorderable pairs.
bool py_less(const Value& a, const Value& b, const char* op = "<", int depth = 0);
// Materializes iteration (consumes generators). Strings yield code points, dicts keys,
// Undefined nothing. Raises for non-iterables.
std::vector<Value> iterate(const Value& v);
// len(v); raises for values without a length.
int64_t py_len(const Value& v);
// `needle in haystack`.
bool py_contains(const Value& haystack, const Value& needle);
// The UndefinedError an operation on an undefined value raises.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace sluice::jinja
