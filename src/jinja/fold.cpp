#include "jinja/fold.h"

namespace sluice::jinja {

namespace {

// jinja2's has_safe_repr.
bool safe(const Value& v) {
  switch (v.kind()) {
    case Kind::None:
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
    case Kind::String: return true;
    case Kind::List:
      for (const auto& x : v.l().items)
        if (!safe(x)) return false;
      return true;
    case Kind::Dict:
      for (const auto& [k, x] : v.d().items)
        if (!safe(k) || !safe(x)) return false;
      return true;
    default: return false;
  }
}

class Folder {
 public:
  explicit Folder(const Limits& limits) : limits_(limits) {}

  void body(Body& b) {
    for (auto& s : b) stmt(*s);
  }

 private:
  const Limits& limits_;

  void stmt(Stmt& s) {
    // `{{ expr }}` with a constant expr is printed at compile time as str(value), whatever
    // the value is (Undefined prints as ''), so the slice leniency applies here too.
    if (s.kind == StmtKind::Output && s.expr->kind != ExprKind::Const) {
      Value v;
      if (eval_const(*s.expr, &v)) {
        try {
          s.text = to_str(v);
          s.kind = StmtKind::Data;
          s.expr.reset();
          return;
        } catch (const sluice::Error&) {
        }
      }
    }
    expr(s.expr);
    expr(s.cond);
    expr(s.filter);
    for (auto& [c, b] : s.branches) {
      expr(c);
      body(b);
    }
    for (auto& p : s.params) expr(p.value);
    body(s.body);
    body(s.else_body);
  }

  // as_const(): evaluates like jinja2's optimizer, short-circuits included (`x if false
  // else 2` folds even though x is a name).
  bool eval_const(const Expr& e, Value* out) {
    Interp in(limits_, Clock{});
    in.set_folding(true);
    try {
      *out = in.eval(e, std::make_shared<Scope>());
      return true;
    } catch (const Interp::NotConstant&) {
      return false;
    } catch (const sluice::Error&) {
      return false;  // evaluated (and fails) at run time, as in jinja2
    }
  }

  void expr(ExprPtr& e) {
    if (!e) return;
    Value v;
    if (e->kind != ExprKind::Const && !e->chain_inner && eval_const(*e, &v) && safe(v)) {
      auto c = std::make_unique<Expr>();
      c->kind = ExprKind::Const;
      c->pos = e->pos;
      c->value = std::move(v);
      e = std::move(c);
      return;
    }
    expr(e->a);
    expr(e->b);
    expr(e->c);
    expr(e->dyn_args);
    expr(e->dyn_kwargs);
    for (auto& x : e->items) expr(x);
    for (auto& x : e->args) expr(x.value);
    for (auto& x : e->ops) expr(x.second);
  }
};

}  // namespace

void fold_constants(Program& program, const Limits& limits) { Folder(limits).body(program.body); }

}  // namespace sluice::jinja
