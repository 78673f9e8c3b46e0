#include "jinja/ops.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "jinja/pystr.h"

namespace sluice::jinja {

static const char* op_symbol(Op op) {
  switch (op) {
    case Op::Add: return "+";
    case Op::Sub: return "-";
    case Op::Mul: return "*";
    case Op::Div: return "/";
    case Op::FloorDiv: return "//";
    case Op::Mod: return "%";
    case Op::Pow: return "** or pow()";
    case Op::Lt: return "<";
    case Op::Le: return "<=";
    case Op::Gt: return ">";
    case Op::Ge: return ">=";
    default: return "?";
  }
}

[[noreturn]] static void unsupported(Op op, const Value& a, const Value& b) {
  raise("unsupported operand type(s) for %s: '%s' and '%s'", op_symbol(op), type_name(a), type_name(b));
}

// CPython integers never overflow; ours are 64-bit, so say so instead of wrapping.
[[noreturn]] static void overflow() { raise("integer overflow (template integers are 64-bit)"); }
static int64_t add(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) overflow();
  return r;
}
static int64_t sub(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_sub_overflow(x, y, &r)) overflow();
  return r;
}
static int64_t mul(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_mul_overflow(x, y, &r)) overflow();
  return r;
}

static Value repeat(const Value& seq, int64_t n, size_t max_bytes, size_t max_items) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const size_t len = seq.s().size();
    if (len && static_cast<uint64_t>(n) > max_bytes / len) raise("string repetition result too large");
    std::string out;
    out.reserve(len * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) out += seq.s();
    return Value::string(std::move(out));
  }
  const auto& items = seq.l().items;
  if (!items.empty() && static_cast<uint64_t>(n) > max_items / items.size()) raise("list repetition result too large");
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// CPython's float_divmod: the remainder takes the sign of the divisor.
static void float_divmod(double x, double y, double* div, double* mod) {
  double m = std::fmod(x, y);
  double d = (x - m) / y;
  if (m != 0) {
    if ((y < 0) != (m < 0)) {
      m += y;
      d -= 1.0;
    }
  } else {
    m = std::copysign(0.0, y);
  }
  double fd;
  if (d != 0) {
    fd = std::floor(d);
    if (d - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, x / y);
  }
  *div = fd;
  *mod = m;
}

Value binop(Op op, const Value& a, const Value& b, size_t max_bytes, size_t max_items) {
  if (op == Op::Concat) {  // `~` stringifies both sides; Undefined prints as ''
    std::string s = to_str(a);
    const std::string t = to_str(b);
    if (s.size() + t.size() > max_bytes) raise("string result too large");
    return Value::string(s + t);
  }
  // str % x is str.__mod__, which accepts anything (Undefined looks like a mapping to it).
  if (op == Op::Mod && a.is_string()) return Value::string(percent_format(a.s(), b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  switch (op) {
    case Op::Add:
      if (ints) return Value::integer(add(a.i(), b.i()));
      if (nums) return Value::number(a.f() + b.f());
      if (a.is_string() && b.is_string()) {
        if (a.s().size() + b.s().size() > max_bytes) raise("string result too large");
        return Value::string(a.s() + b.s());
      }
      if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && a.view() == View::None &&
          b.view() == View::None) {
        if (a.l().items.size() + b.l().items.size() > max_items) raise("list result too large");
        std::vector<Value> out = a.l().items;
        out.insert(out.end(), b.l().items.begin(), b.l().items.end());
        return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
      }
      if (a.is_string()) raise("can only concatenate str (not \"%s\") to str", type_name(b));
      if (a.is_list()) raise("can only concatenate %s (not \"%s\") to %s", type_name(a), type_name(b), type_name(a));
      unsupported(op, a, b);
    case Op::Sub:
      if (ints) return Value::integer(sub(a.i(), b.i()));
      if (nums) return Value::number(a.f() - b.f());
      unsupported(op, a, b);
    case Op::Mul:
      if (ints) return Value::integer(mul(a.i(), b.i()));
      if (nums) return Value::number(a.f() * b.f());
      if ((a.is_string() || (a.is_list() && a.view() == View::None)) && b.is_number() && !b.is_float())
        return repeat(a, b.i(), max_bytes, max_items);
      if ((b.is_string() || (b.is_list() && b.view() == View::None)) && a.is_number() && !a.is_float())
        return repeat(b, a.i(), max_bytes, max_items);
      if (a.is_string() || a.is_list() || b.is_string() || b.is_list())
        raise("can't multiply sequence by non-int of type '%s'", type_name(a.is_string() || a.is_list() ? b : a));
      unsupported(op, a, b);
    case Op::Div:
      if (nums) {
        if (b.f() == 0) raise("division by zero");
        return Value::number(a.f() / b.f());
      }
      unsupported(op, a, b);
    case Op::FloorDiv:
    case Op::Mod:
      if (ints) {
        const int64_t x = a.i(), y = b.i();
        if (y == 0) raise("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
          if (op == Op::Mod) return Value::integer(0);
          overflow();
        }
        int64_t q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
          --q;
          r += y;
        }
        return Value::integer(op == Op::FloorDiv ? q : r);
      }
      if (nums) {
        if (b.f() == 0) raise(op == Op::Mod ? "float modulo" : "float floor division by zero");
        double d, m;
        float_divmod(a.f(), b.f(), &d, &m);
        return Value::number(op == Op::FloorDiv ? d : m);
      }
      if (op == Op::Mod && a.is_string()) return Value::string(percent_format(a.s(), b));
      unsupported(op, a, b);
    case Op::Pow:
      if (ints && b.i() >= 0) {
        int64_t r = 1, base = a.i();
        for (int64_t e = b.i(); e > 0; e >>= 1) {
          if (e & 1) r = mul(r, base);
          if (e > 1) base = mul(base, base);
        }
        return Value::integer(r);
      }
      if (nums) {
        const double x = a.f(), y = b.f();
        if (x == 0 && y < 0) raise("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) raise("complex results are not supported");
        const double r = std::pow(x, y);
        if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) raise("(34, 'Numerical result out of range')");
        return Value::number(r);
      }
      unsupported(op, a, b);
    default: break;
  }
  unsupported(op, a, b);
}

Value unop(Op op, const Value& a) {
  if (op == Op::Not) return Value::boolean(!truthy(a));
  if (a.is_undefined()) fail_undefined(a);
  if (!a.is_number()) raise("bad operand type for unary %s: '%s'", op == Op::Neg ? "-" : "+", type_name(a));
  if (op == Op::Plus) return a.is_float() ? a : Value::integer(a.i());
  if (a.is_float()) return Value::number(-a.f());
  if (a.i() == INT64_MIN) overflow();
  return Value::integer(-a.i());
}

bool compare(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::Eq: return py_eq(a, b);
    case Op::Ne: return !py_eq(a, b);
    case Op::In: return py_contains(b, a);
    case Op::NotIn: return !py_contains(b, a);
    default: break;
  }
  if (a.is_number() && b.is_number()) {
    // Direct comparison keeps NaN semantics (every ordering test false).
    if (!a.is_float() && !b.is_float()) {
      const int64_t x = a.i(), y = b.i();
      return op == Op::Lt ? x < y : op == Op::Le ? x <= y : op == Op::Gt ? x > y : x >= y;
    }
    const long double x = a.is_float() ? a.f() : static_cast<long double>(a.i());
    const long double y = b.is_float() ? b.f() : static_cast<long double>(b.i());
    return op == Op::Lt ? x < y : op == Op::Le ? x <= y : op == Op::Gt ? x > y : x >= y;
  }
  const bool ordered = (a.is_string() && b.is_string()) ||
                       (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && a.view() == View::None &&
                        b.view() == View::None);
  if (!ordered) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    raise("'%s' not supported between instances of '%s' and '%s'", op_symbol(op), type_name(a), type_name(b));
  }
  switch (op) {
    case Op::Lt: return py_less(a, b);
    case Op::Gt: return py_less(b, a);
    case Op::Le: return !py_less(b, a);
    default: return !py_less(a, b);
  }
}

// PySlice_AdjustIndices over a sequence of length n.
static bool slice_bounds(const Value& v, int64_t* out) {
  if (v.is_none()) return false;
  *out = v.i();
  return true;
}

// jinja2 compiles x[a:b] to a plain Python subscript (not the sandbox's getitem), so every
// failure raises instead of giving Undefined.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) raise("unhashable type: 'slice'");
  if (obj.view() != View::None) raise("'%s' object is not subscriptable", type_name(obj));
  if (!obj.is_string() && !obj.is_list()) raise("'%s' object is not subscriptable", type_name(obj));
  for (const Value* v : {&start, &stop, &step})
    if (!(v->is_none() || v->is_int() || v->is_bool()))
      raise("slice indices must be integers or None or have an __index__ method");
  int64_t st = 1;
  if (slice_bounds(step, &st) && st == 0) raise("slice step cannot be zero");
  std::vector<uint32_t> cps;
  const bool is_str = obj.is_string();
  const bool ascii = is_str && py::is_ascii(obj.s());
  if (is_str && !ascii) cps = py::decode(obj.s());
  const int64_t n = is_str ? static_cast<int64_t>(ascii ? obj.s().size() : cps.size())
                           : static_cast<int64_t>(obj.l().items.size());
  int64_t b, e;
  const bool has_b = slice_bounds(start, &b), has_e = slice_bounds(stop, &e);
  if (!has_b) b = st < 0 ? n - 1 : 0;
  else if (b < 0) b = std::max<int64_t>(b + n, st < 0 ? -1 : 0);
  else if (b >= n) b = st < 0 ? n - 1 : n;
  if (!has_e) e = st < 0 ? -1 : n;
  else if (e < 0) e = std::max<int64_t>(e + n, st < 0 ? -1 : 0);
  else if (e >= n) e = st < 0 ? n - 1 : n;
  std::vector<int64_t> idx;
  if (st > 0)
    for (int64_t k = b; k < e; k += st) idx.push_back(k);
  else
    for (int64_t k = b; k > e; k += st) idx.push_back(k);
  if (is_str) {
    std::string out;
    for (int64_t k : idx) {
      if (ascii) out += obj.s()[static_cast<size_t>(k)];
      else py::append_utf8(out, cps[static_cast<size_t>(k)]);
    }
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(idx.size());
  for (int64_t k : idx) out.push_back(obj.l().items[static_cast<size_t>(k)]);
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// ---------------------------------------------------------------------------------------------

template <class T>
static std::string cfmt(const std::string& spec, T v) {
  const int n = std::snprintf(nullptr, 0, spec.c_str(), v);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n), '\0');
  std::snprintf(out.data(), out.size() + 1, spec.c_str(), v);
  return out;
}

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> list;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) list = args.l().items;
  else if (args.is_dict()) mapping = &args.d();
  else list.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) raise("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) raise("incomplete format key");
      if (!mapping) raise("format requires a mapping");
      arg = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!arg) raise("format key not found");
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::strchr("-+ #0", fmt[i]) && fmt[i]) flags += fmt[i++];
    int64_t width = -1, prec = -1;
    auto number = [&]() {
      int64_t v = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        v = v * 10 + (fmt[i++] - '0');
        if (v > 4096) raise("format width or precision too large");
      }
      return v;
    };
    if (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width = number();
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      prec = number();
    }
    if (i >= fmt.size()) raise("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (mapping) arg = &args;
      else if (next < list.size()) arg = &list[next++];
      else raise("not enough arguments for format string");
    }
    std::string spec = "%" + flags;
    if (width >= 0) spec += std::to_string(width);
    if (prec >= 0) spec += cat(".", std::to_string(prec));
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string t = conv == 's' ? to_str(*arg) : to_repr(*arg);
        if (prec >= 0) t.resize(py::byte_offset(t, prec));
        const bool left = flags.find('-') != std::string::npos;
        out += py::center(t, width, ' ', left ? -1 : 1);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o':
      case 'c': {
        if (!arg->is_number()) raise("%%%c format: a real number is required, not %s", conv, type_name(*arg));
        const double fv = arg->f();
        if (arg->is_float() && !(std::isfinite(fv) && std::fabs(fv) < 9.2e18)) raise("cannot convert float to integer");
        const long long v = arg->is_float() ? static_cast<long long>(fv) : static_cast<long long>(arg->i());
        if (conv == 'c') {
          if (v < 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) raise("%%c arg not in range(0x110000)");
          py::append_utf8(out, static_cast<uint32_t>(v));
          break;
        }
        out += cfmt(spec + "ll" + (conv == 'i' || conv == 'u' ? 'd' : conv), v);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!arg->is_number()) raise("must be real number, not %s", type_name(*arg));
        out += cfmt(spec + conv, arg->f());
        break;
      default: raise("unsupported format character '%c'", conv);
    }
  }
  // CPython skips this check when the argument looks like a mapping (has __getitem__ and is
  // not a tuple or str): lists and Undefined included.
  const bool mapping_like = mapping || (args.is_list() && !args.is_tuple()) || args.is_undefined();
  if (!mapping_like && next < list.size()) raise("not all arguments converted during string formatting");
  return out;
}

}  // namespace sluice::jinja
