#include "jinja/json_bridge.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/pystr.h"

namespace sluice::jinja {

template <class J>
static Value convert(const J& j, int depth) {
  if (depth > kMaxValueDepth) raise("JSON input nested deeper than %d levels", kMaxValueDepth);
  auto checked = [](const std::string& s) {
    if (!py::valid_utf8(s)) raise("JSON input string is not valid UTF-8");
    return s;
  };
  switch (j.type()) {
    case J::value_t::null: return Value::none();
    case J::value_t::boolean: return Value::boolean(j.template get<bool>());
    case J::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      // Python ints are unbounded; beyond int64 we fall back to a float (documented).
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case J::value_t::number_float: return Value::number(j.template get<double>());
    case J::value_t::string: return Value::string(checked(j.template get_ref<const std::string&>()));
    case J::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(convert(x, depth + 1));
      return Value::list(std::move(items));
    }
    case J::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.set(Value::string(checked(it.key())), convert(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    case J::value_t::binary:
    case J::value_t::discarded: break;
  }
  raise("unsupported JSON value");
}

Value from_json(const nlohmann::json& j) { return convert(j, 0); }
Value from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }

// ---------------------------------------------------------------------------------------------

static void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = py::next_cp(s, i);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E && c != 0x7F)) {
      if (c >= 0x10000) {  // ensure_ascii writes astral characters as surrogate pairs
        const uint32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
      }
      out += buf;
    } else {
      py::append_utf8(out, c);
    }
  }
  out += '"';
}

static std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py::float_repr(d);
}

namespace {
struct Dumper {
  const DumpOptions& o;
  std::string out;

  void newline(int level) {
    if (!o.indent) return;
    out += '\n';
    for (int k = 0; k < level; ++k) out += *o.indent;
  }

  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String: return k.s();
      case Kind::Bool: return k.b() ? "true" : "false";
      case Kind::Int: return py::int_str(k.i());
      case Kind::Float: return float_json(k.f());
      case Kind::None: return "null";
      default: raise("keys must be str, int, float, bool or None, not %s", type_name(k));
    }
  }

  void dump(const Value& v, int level) {
    if (level > kMaxValueDepth) raise("value nested deeper than %d levels", kMaxValueDepth);
    switch (v.kind()) {
      case Kind::None: out += "null"; return;
      case Kind::Bool: out += v.b() ? "true" : "false"; return;
      case Kind::Int: out += py::int_str(v.i()); return;
      case Kind::Float: out += float_json(v.f()); return;
      case Kind::String: dump_string(out, v.s(), o.ensure_ascii); return;
      case Kind::List: {
        if (v.view() != View::None) raise("Object of type %s is not JSON serializable", type_name(v));
        const auto& items = v.l().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t k = 0; k < items.size(); ++k) {
          if (k) out += o.item_sep;
          newline(level + 1);
          dump(items[k], level + 1);
        }
        newline(level);
        out += ']';
        return;
      }
      case Kind::Dict: {
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& kv : v.d().items) items.push_back(&kv);
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (o.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return py_less(a->first, b->first); });
        out += '{';
        bool first = true;
        for (const auto* kv : items) {
          if (!first) out += o.item_sep;
          first = false;
          newline(level + 1);
          dump_string(out, key_text(kv->first), o.ensure_ascii);
          out += o.key_sep;
          dump(kv->second, level + 1);
        }
        newline(level);
        out += '}';
        return;
      }
      default: raise("Object of type %s is not JSON serializable", type_name(v));
    }
  }
};
}  // namespace

std::string dumps(const Value& v, const DumpOptions& opt) {
  Dumper d{opt, {}};
  d.dump(v, 0);
  return std::move(d.out);
}

}  // namespace sluice::jinja
