#include "jinja/interp.h"

#include <exception>
#include <new>

#include "jinja/builtins.h"
#include "jinja/objects.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"

namespace sluice::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

namespace {

struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth, int max) : d(depth) {
    if (++d > max) {
      --d;
      raise("macro calls nested deeper than %d levels", max);
    }
  }
  ~DepthGuard() { --d; }
};

// Names that start out undefined in a new frame (see scoping.h).
void init_fresh(Scope& scope, const std::vector<std::string>& names) {
  for (const auto& n : names) scope.set(n, Value::undefined(cat("'", n, "' is undefined")));
}

[[noreturn]] void at(Pos p, const std::exception& e) {
  throw TemplateError(strfmt("chat template error at line %d, column %d: %s", p.line, p.col, e.what()));
}

}  // namespace

Interp::~Interp() {
  for (auto& ns : namespaces_) ns->clear();
  for (auto& s : closures_) s->clear();
}

std::shared_ptr<Namespace> Interp::make_namespace() {
  if (namespaces_.size() >= limits_.max_items) raise("too many namespace objects");
  auto ns = std::make_shared<Namespace>();
  namespaces_.push_back(ns);
  return ns;
}

std::string Interp::render(const Program& program, std::vector<std::pair<std::string, Value>> globals,
                           std::vector<std::pair<std::string, Value>> vars) {
  auto base = std::make_shared<Scope>();
  for (auto& [k, v] : globals) base->set(k, std::move(v));
  auto root = std::make_shared<Scope>(base);
  for (auto& [k, v] : vars) root->set(k, std::move(v));
  init_fresh(*root, program.fresh);
  track_scope(root);
  track_scope(base);
  std::string out;
  out_ = &out;
  try {
    exec(program.body, root);
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError("chat template error: out of memory");
  } catch (const std::exception& e) {
    throw TemplateError(std::string("chat template error: ") + e.what());
  }
  return out;
}

void Interp::emit(const std::string& s) {
  charge(s.size() / 64);
  if (out_->size() + s.size() > limits_.max_bytes) raise("rendered text exceeds %zu bytes", limits_.max_bytes);
  out_->append(s);
}

Flow Interp::capture(const Body& body, const ScopePtr& scope, std::string* text) {
  std::string* saved = out_;
  out_ = text;
  try {
    const Flow f = exec(body, scope);
    out_ = saved;
    return f;
  } catch (...) {
    out_ = saved;
    throw;
  }
}

Flow Interp::exec(const Body& body, const ScopePtr& scope) {
  for (const auto& s : body) {
    charge(1);
    Flow f;
    try {
      f = exec_stmt(*s, scope);
    } catch (const TemplateError&) {
      throw;
    } catch (const sluice::Error& e) {
      at(s->pos, e);
    } catch (const std::length_error& e) {
      at(s->pos, e);
    }
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

void Interp::assign(const Target& t, const Value& v, Scope& scope) {
  switch (t.kind) {
    case Target::Name: scope.set(t.name, v); return;
    case Target::Attr: {
      const Value* ns = scope.find(t.name);
      Namespace* obj = ns ? ns->as<Namespace>() : nullptr;
      if (!obj) raise("cannot assign attribute on non-namespace object");
      obj->set(t.attr, v);
      return;
    }
    case Target::Tuple: {
      if (!(v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || v.as<Iterator>()))
        raise("cannot unpack non-iterable %s object", type_name(v));
      const std::vector<Value> items = iterate(v);
      if (items.size() > t.items.size()) raise("too many values to unpack (expected %zu)", t.items.size());
      if (items.size() < t.items.size())
        raise("not enough values to unpack (expected %zu, got %zu)", t.items.size(), items.size());
      for (size_t k = 0; k < items.size(); ++k) assign(t.items[k], items[k], scope);
      return;
    }
  }
}

Flow Interp::exec_for(const Stmt& s, const ScopePtr& scope) {
  auto st = std::make_shared<LoopState>();
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  charge(items.size());
  if (s.cond) {  // `for x in xs if cond`: filtered before loop.* is computed
    std::vector<Value> kept;
    for (auto& x : items) {
      auto test_scope = std::make_shared<Scope>(scope);
      assign(s.target, x, *test_scope);
      if (truthy(eval(*s.cond, test_scope))) kept.push_back(std::move(x));
    }
    items = std::move(kept);
  }
  st->items = std::move(items);
  // jinja2 runs `else` unless some iteration reached the end of its body: a loop that only
  // ever hit `continue`, or stopped at `break` in its first iteration, also runs it.
  bool completed = false;
  for (size_t k = 0; k < st->items.size(); ++k) {
    charge(1);
    auto iter_scope = std::make_shared<Scope>(scope);
    init_fresh(*iter_scope, s.fresh);
    assign(s.target, st->items[k], *iter_scope);
    iter_scope->set("loop", make_loop(st, k));
    const Flow f = exec(s.body, iter_scope);
    if (f == Flow::Break) break;
    if (f == Flow::Continue) continue;
    completed = true;
  }
  if (!completed && !s.else_body.empty()) return exec(s.else_body, std::make_shared<Scope>(scope));
  return Flow::Normal;
}

Flow Interp::exec_stmt(const Stmt& s, const ScopePtr& scope) {
  switch (s.kind) {
    case StmtKind::Data: emit(s.text); return Flow::Normal;
    case StmtKind::Output: emit(to_str(eval(*s.expr, scope))); return Flow::Normal;
    case StmtKind::If:
      for (const auto& [cond, body] : s.branches)
        if (truthy(eval(*cond, scope))) return exec(body, scope);
      return exec(s.else_body, scope);
    case StmtKind::For: return exec_for(s, scope);
    case StmtKind::Set: assign(s.target, eval(*s.expr, scope), *scope); return Flow::Normal;
    case StmtKind::SetBlock: {
      std::string text;
      auto inner = std::make_shared<Scope>(scope);
      init_fresh(*inner, s.fresh);
      const Flow f = capture(s.body, inner, &text);
      Value v = Value::string(std::move(text));
      if (s.filter) v = apply_chain(*s.filter, v, scope);
      assign(s.target, v, *scope);
      return f;
    }
    case StmtKind::Macro:
      track_scope(scope);
      scope->set(s.text, make_macro(&s, scope, s.text));
      return Flow::Normal;
    case StmtKind::CallBlock: {
      track_scope(scope);
      const Expr& call_expr = *s.expr;
      const Value callee = eval(*call_expr.a, scope);
      CallArgs args = eval_args(call_expr, scope);
      args.kw.emplace_back("caller", make_macro(&s, scope, "caller"));
      emit(to_str(call(callee, args)));
      return Flow::Normal;
    }
    case StmtKind::FilterBlock: {
      std::string text;
      auto inner = std::make_shared<Scope>(scope);
      init_fresh(*inner, s.fresh);
      const Flow f = capture(s.body, inner, &text);
      emit(to_str(apply_chain(*s.filter, Value::string(std::move(text)), scope)));
      return f;
    }
    case StmtKind::With: {
      std::vector<Value> vals;
      for (const auto& p : s.params) vals.push_back(eval(*p.value, scope));
      auto inner = std::make_shared<Scope>(scope);
      init_fresh(*inner, s.fresh);
      for (size_t k = 0; k < vals.size(); ++k) assign(s.with_targets[k], vals[k], *inner);
      return exec(s.body, inner);
    }
    case StmtKind::Block: {
      auto inner = std::make_shared<Scope>(scope);
      init_fresh(*inner, s.fresh);
      return exec(s.body, inner);
    }
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

// ---------------------------------------------------------------------------------------------

Value Interp::eval(const Expr& e, const ScopePtr& scope) {
  charge(1);
  try {
    Value v = eval_inner(e, scope);
    if (v.is_string() && v.s().size() > limits_.max_bytes) raise("string value exceeds %zu bytes", limits_.max_bytes);
    if (v.is_list() && v.l().items.size() > limits_.max_items) raise("list value exceeds %zu items", limits_.max_items);
    return v;
  } catch (const TemplateError&) {
    throw;
  } catch (const sluice::Error& err) {
    at(e.pos, err);
  } catch (const std::length_error& err) {
    at(e.pos, err);
  }
}

CallArgs Interp::eval_args(const Expr& e, const ScopePtr& scope) {
  CallArgs a;
  for (const auto& arg : e.args) {
    if (arg.name.empty()) a.pos.push_back(eval(*arg.value, scope));
    else a.kw.emplace_back(arg.name, eval(*arg.value, scope));
  }
  if (e.dyn_args) {
    for (auto& x : iterate(eval(*e.dyn_args, scope))) a.pos.push_back(std::move(x));
  }
  if (e.dyn_kwargs) {
    const Value d = eval(*e.dyn_kwargs, scope);
    if (!d.is_dict()) raise("argument after ** must be a mapping, not %s", type_name(d));
    for (const auto& [k, v] : d.d().items) {
      if (!k.is_string()) raise("keywords must be strings");
      a.kw.emplace_back(k.s(), v);
    }
  }
  for (size_t x = 0; x < a.kw.size(); ++x)
    for (size_t y = x + 1; y < a.kw.size(); ++y)
      if (a.kw[x].first == a.kw[y].first) raise("got multiple values for keyword argument '%s'", a.kw[x].first.c_str());
  return a;
}

Value Interp::run_filter(const Expr& f, const Value& v, const ScopePtr& scope) {
  if (!f.known) raise("No filter named '%s'.", f.name.c_str());
  CallArgs args = eval_args(f, scope);
  return apply_filter(*this, f.name, v, args);
}

Value Interp::apply_chain(const Expr& f, const Value& input, const ScopePtr& scope) {
  const Value v = f.a ? apply_chain(*f.a, input, scope) : input;
  return run_filter(f, v, scope);
}

// jinja2 cannot fold these (no as_const): a name, a call, a filter that needs the context.
static bool folds(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name:
    case ExprKind::Call: return false;
    case ExprKind::Filter:
      return e.known && e.a && e.name != "map" && e.name != "select" && e.name != "reject" && e.name != "selectattr" &&
             e.name != "rejectattr";
    case ExprKind::Test: return e.known;
    default: return true;
  }
}

Value Interp::eval_inner(const Expr& e, const ScopePtr& scope) {
  if (folding_ && !folds(e)) throw NotConstant{};
  switch (e.kind) {
    case ExprKind::Const: return e.value;
    case ExprKind::Name: {
      if (const Value* v = scope->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(eval(*x, scope));
      return e.kind == ExprKind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::Dict: {
      Dict d;
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        Value key = eval(*e.items[k], scope);
        if ((key.is_list() && !key.is_tuple()) || key.is_dict()) raise("unhashable type: '%s'", type_name(key));
        d.set(std::move(key), eval(*e.items[k + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::Unary: return unop(e.op, eval(*e.a, scope));
    case ExprKind::Binary: {
      const Value a = eval(*e.a, scope);
      const Value b = eval(*e.b, scope);
      charge((a.is_string() ? a.s().size() : 0) / 64 + (b.is_string() ? b.s().size() : 0) / 64);
      return binop(e.op, a, b, limits_.max_bytes, limits_.max_items);
    }
    case ExprKind::And: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? eval(*e.b, scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? a : eval(*e.b, scope);
    }
    case ExprKind::Compare: {
      Value left = eval(*e.a, scope);
      for (const auto& [op, x] : e.ops) {
        Value right = eval(*x, scope);
        if (!compare(op, left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::Cond:
      if (truthy(eval(*e.b, scope))) return eval(*e.a, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined(strfmt(
          "the inline if-expression on line %d evaluated to false and no else section was defined.", e.pos.line));
    case ExprKind::GetAttr: return get_attr(eval(*e.a, scope), e.name);
    case ExprKind::GetItem: {
      const Value obj = eval(*e.a, scope);
      return get_item(obj, eval(*e.b, scope));
    }
    case ExprKind::Slice: {
      const Value obj = eval(*e.a, scope);
      Value parts[3];
      for (int k = 0; k < 3; ++k) parts[k] = e.items[k] ? eval(*e.items[k], scope) : Value::none();
      if (folding_) {  // jinja2 folds constants through the sandbox's getitem, which turns
                       // a TypeError into Undefined (a zero step's ValueError still raises)
        if ((obj.is_string() || obj.is_list()) && (parts[2].is_int() || parts[2].is_bool()) && parts[2].i() == 0)
          raise("slice step cannot be zero");
        try {
          return slice(obj, parts[0], parts[1], parts[2]);
        } catch (const EvalError&) {
          return Value::undefined(cat("'", type_name(obj), " object' has no element slice"));
        }
      }
      if (parts[0].is_undefined() || parts[1].is_undefined() || parts[2].is_undefined())
        raise("slice indices must be integers or None or have an __index__ method");
      return slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::Call: {
      const Value callee = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return call(callee, args);
    }
    case ExprKind::Filter: return run_filter(e, eval(*e.a, scope), scope);
    case ExprKind::Test: {
      if (!e.known) raise("No test named '%s'.", e.name.c_str());
      const Value v = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      const bool r = apply_test(*this, e.name, v, args);
      return Value::boolean(e.negated ? !r : r);
    }
  }
  return {};
}

Value Interp::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is_object() && callee.o().callable()) return callee.o().call(*this, args);
  raise("'%s' object is not callable", type_name(callee));
}

Value Interp::call_macro(const Stmt& def, const ScopePtr& closure, const std::string& name, CallArgs& args) {
  DepthGuard guard(call_depth_, limits_.max_call_depth);
  const size_t n = def.params.size();
  std::vector<const Value*> given(n, nullptr);
  auto kw = args.kw;
  const size_t npos = std::min(args.pos.size(), n);
  for (size_t k = 0; k < npos; ++k) given[k] = &args.pos[k];
  std::vector<Value> from_kw(n);
  for (size_t k = npos; k < n; ++k) {
    for (size_t j = 0; j < kw.size(); ++j) {
      if (kw[j].first == def.params[k].name) {
        from_kw[k] = std::move(kw[j].second);
        given[k] = &from_kw[k];
        kw.erase(kw.begin() + static_cast<std::ptrdiff_t>(j));
        break;
      }
    }
  }
  auto scope = std::make_shared<Scope>(closure);
  init_fresh(*scope, def.fresh);
  bool explicit_caller = false;
  for (const auto& p : def.params) explicit_caller = explicit_caller || p.name == "caller";
  if (def.uses_caller && !explicit_caller) {
    Value caller = Value::undefined("No caller defined");
    for (size_t j = 0; j < kw.size(); ++j) {
      if (kw[j].first == "caller") {
        caller = std::move(kw[j].second);
        kw.erase(kw.begin() + static_cast<std::ptrdiff_t>(j));
        break;
      }
    }
    scope->set("caller", std::move(caller));
  }
  if (def.uses_kwargs) {
    Dict d;
    for (auto& [k, v] : kw) d.set(Value::string(k), std::move(v));
    scope->set("kwargs", Value::dict(std::move(d)));
  } else if (!kw.empty()) {
    raise("macro '%s' takes no keyword argument '%s'", name.c_str(), kw[0].first.c_str());
  }
  if (def.uses_varargs) {
    std::vector<Value> rest;
    for (size_t k = n; k < args.pos.size(); ++k) rest.push_back(args.pos[k]);
    scope->set("varargs", Value::tuple(std::move(rest)));
  } else if (args.pos.size() > n) {
    raise("macro '%s' takes not more than %zu argument(s)", name.c_str(), n);
  }
  // Defaults are evaluated when the macro runs, in its own scope (they may use earlier args).
  for (size_t k = 0; k < n; ++k) {
    const Param& p = def.params[k];
    if (given[k]) scope->set(p.name, *given[k]);
    else if (p.value) scope->set(p.name, eval(*p.value, scope));
    else scope->set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
  }
  std::string text;
  capture(def.body, scope, &text);
  return Value::string(std::move(text));
}

}  // namespace sluice::jinja
