// Expression grammar (see parser.h for the precedence ladder).
#include "jinja/parser.h"
#include "jinja/parser_impl.h"

namespace sluice::jinja {

ExprPtr Parser::finish(ExprPtr e) const {
  int d = 0;
  auto see = [&d](const ExprPtr& x) {
    if (x) d = std::max(d, x->depth);
  };
  see(e->a);
  see(e->b);
  see(e->c);
  see(e->dyn_args);
  see(e->dyn_kwargs);
  for (const auto& x : e->items) see(x);
  for (const auto& x : e->args) see(x.value);
  for (const auto& x : e->ops) see(x.second);
  e->depth = d + 1;
  if (e->depth > max_depth_) syntax_error(e->pos.line, e->pos.col, "expression nested too deeply");
  return e;
}

bool Parser::tuple_end(const char* extra) const {
  if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
  return extra && is_name(extra);
}

ExprPtr Parser::tuple_expr(bool with_cond, const char* extra_end, bool explicit_parens) {
  const Pos p = pos();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (tuple_end(extra_end)) break;
    items.push_back(expression(with_cond));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
  }
  auto e = node(ExprKind::Tuple, p);
  e->items = std::move(items);
  return finish(std::move(e));
}

ExprPtr Parser::cond_expr() {
  Guard g(*this);
  const Pos p = pos();
  ExprPtr e = or_expr();
  while (is_name("if")) {
    next();
    Scoped soft(soft_, true);
    auto c = node(ExprKind::Cond, p);
    c->a = std::move(e);
    c->b = or_expr();
    if (skip_name("else")) c->c = cond_expr();
    e = finish(std::move(c));
  }
  return e;
}

ExprPtr Parser::binary(ExprKind k, Op op, ExprPtr a, ExprPtr b, Pos p) {
  auto e = node(k, p);
  e->op = op;
  e->a = std::move(a);
  e->b = std::move(b);
  return finish(std::move(e));
}

ExprPtr Parser::or_expr() {
  ExprPtr e = and_expr();
  while (is_name("or")) {
    const Pos p = pos();
    next();
    e = binary(ExprKind::Or, Op::Add, std::move(e), and_expr(), p);
  }
  return e;
}

ExprPtr Parser::and_expr() {
  ExprPtr e = not_expr();
  while (is_name("and")) {
    const Pos p = pos();
    next();
    e = binary(ExprKind::And, Op::Add, std::move(e), not_expr(), p);
  }
  return e;
}

ExprPtr Parser::not_expr() {
  if (is_name("not")) {
    Guard g(*this);
    const Pos p = pos();
    next();
    auto e = node(ExprKind::Unary, p);
    e->op = Op::Not;
    e->a = not_expr();
    return finish(std::move(e));
  }
  return compare_expr();
}

ExprPtr Parser::compare_expr() {
  const Pos p = pos();
  ExprPtr e = math1();
  std::vector<std::pair<Op, ExprPtr>> ops;
  while (true) {
    Op op;
    if (skip_op("==")) op = Op::Eq;
    else if (skip_op("!=")) op = Op::Ne;
    else if (skip_op("<")) op = Op::Lt;
    else if (skip_op("<=")) op = Op::Le;
    else if (skip_op(">")) op = Op::Gt;
    else if (skip_op(">=")) op = Op::Ge;
    else if (skip_name("in")) op = Op::In;
    else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
      next();
      next();
      op = Op::NotIn;
    } else break;
    ops.emplace_back(op, math1());
  }
  if (ops.empty()) return e;
  auto c = node(ExprKind::Compare, p);
  c->a = std::move(e);
  c->ops = std::move(ops);
  return finish(std::move(c));
}

ExprPtr Parser::math1() {
  ExprPtr e = concat();
  while (is_op("+") || is_op("-")) {
    const Pos p = pos();
    const Op op = is_op("+") ? Op::Add : Op::Sub;
    next();
    e = binary(ExprKind::Binary, op, std::move(e), concat(), p);
  }
  return e;
}

ExprPtr Parser::concat() {
  ExprPtr e = math2();
  bool chained = false;
  while (is_op("~")) {
    const Pos p = pos();
    next();
    if (chained) e->chain_inner = true;
    e = binary(ExprKind::Binary, Op::Concat, std::move(e), math2(), p);
    chained = true;
  }
  return e;
}

ExprPtr Parser::math2() {
  ExprPtr e = power();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Pos p = pos();
    const std::string& o = cur().text;
    const Op op = o == "*" ? Op::Mul : o == "/" ? Op::Div : o == "//" ? Op::FloorDiv : Op::Mod;
    next();
    e = binary(ExprKind::Binary, op, std::move(e), power(), p);
  }
  return e;
}

ExprPtr Parser::power() {
  ExprPtr e = unary(true);
  while (is_op("**")) {
    const Pos p = pos();
    next();
    e = binary(ExprKind::Binary, Op::Pow, std::move(e), unary(true), p);
  }
  return e;
}

ExprPtr Parser::unary(bool with_filter) {
  Guard g(*this);
  const Pos p = pos();
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Op op = is_op("-") ? Op::Neg : Op::Plus;
    next();
    e = node(ExprKind::Unary, p);
    e->op = op;
    e->a = unary(false);
    e = finish(std::move(e));
  } else {
    e = primary();
  }
  e = postfix(std::move(e));
  if (with_filter) e = filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::primary() {
  Guard g(*this);
  const Token& t = cur();
  const Pos p = pos();
  if (t.type == Tok::Name) {
    auto e = node(ExprKind::Const, p);
    if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
    else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
    else if (t.text == "none" || t.text == "None") e->value = Value::none();
    else {
      e->kind = ExprKind::Name;
      e->name = t.text;
    }
    next();
    return e;
  }
  if (t.type == Tok::String) {
    std::string s;
    while (cur().type == Tok::String) {
      s += cur().text;
      next();
    }  // 'a' 'b' == 'ab'
    auto e = node(ExprKind::Const, p);
    e->value = Value::string(std::move(s));
    return e;
  }
  if (t.type == Tok::Int || t.type == Tok::Float) {
    auto e = node(ExprKind::Const, p);
    e->value = t.type == Tok::Int ? Value::integer(t.ival) : Value::number(t.fval);
    next();
    return e;
  }
  if (skip_op("(")) {
    ExprPtr e = tuple_expr(true, {}, true);
    expect_op(")");
    return e;
  }
  if (skip_op("[")) {
    auto e = node(ExprKind::List, p);
    while (!is_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("]")) break;
      e->items.push_back(expression(true));
    }
    expect_op("]");
    return finish(std::move(e));
  }
  if (skip_op("{")) {
    auto e = node(ExprKind::Dict, p);
    while (!is_op("}")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("}")) break;
      e->items.push_back(expression(true));
      expect_op(":");
      e->items.push_back(expression(true));
    }
    expect_op("}");
    return finish(std::move(e));
  }
  fail("unexpected '" + describe(t) + "'");
}

ExprPtr Parser::postfix(ExprPtr e) {
  while (true) {
    const Pos p = pos();
    if (skip_op(".")) {
      if (cur().type == Tok::Name) {
        auto g = node(ExprKind::GetAttr, p);
        g->a = std::move(e);
        g->name = cur().text;
        next();
        e = finish(std::move(g));
      } else if (cur().type == Tok::Int) {  // foo.0 is foo[0]
        auto g = node(ExprKind::GetItem, p);
        g->a = std::move(e);
        g->b = node(ExprKind::Const, pos());
        g->b->value = Value::integer(cur().ival);
        next();
        e = finish(std::move(g));
      } else {
        fail("expected name or number");
      }
    } else if (skip_op("[")) {
      std::vector<ExprPtr> subs;
      while (!is_op("]")) {
        if (!subs.empty()) expect_op(",");
        subs.push_back(subscript());
      }
      expect_op("]");
      if (subs.empty()) fail("expected subscript expression");
      if (subs.size() == 1 && subs[0]->kind == ExprKind::Slice) {
        subs[0]->a = std::move(e);
        e = finish(std::move(subs[0]));
        continue;
      }
      auto g = node(ExprKind::GetItem, p);
      g->a = std::move(e);
      if (subs.size() == 1) {
        g->b = std::move(subs[0]);
      } else {
        g->b = node(ExprKind::Tuple, p);
        g->b->items = std::move(subs);
        g->b = finish(std::move(g->b));
      }
      e = finish(std::move(g));
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::subscript() {
  const Pos p = pos();
  ExprPtr first;
  if (!is_op(":")) {
    first = expression(true);
    if (!is_op(":")) return first;
  }
  next();
  auto s = node(ExprKind::Slice, p);
  s->items.push_back(std::move(first));
  s->items.push_back(is_op(":") || is_op("]") || is_op(",") ? nullptr : expression(true));
  if (skip_op(":")) s->items.push_back(is_op("]") || is_op(",") ? nullptr : expression(true));
  else s->items.push_back(nullptr);
  return finish(std::move(s));
}

void Parser::call_args(Expr& e) {
  expect_op("(");
  bool need_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) fail("invalid syntax for function call expression");
  };
  while (!is_op(")")) {
    if (need_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (skip_op("*")) {
      ensure(!e.dyn_args && !e.dyn_kwargs);
      e.dyn_args = expression(true);
    } else if (skip_op("**")) {
      ensure(!e.dyn_kwargs);
      e.dyn_kwargs = expression(true);
    } else if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
      ensure(!e.dyn_kwargs);
      Arg a;
      a.name = cur().text;
      next();
      next();
      a.value = expression(true);
      e.args.push_back(std::move(a));
    } else {
      bool has_kw = false;
      for (const auto& a : e.args) has_kw = has_kw || !a.name.empty();
      ensure(!e.dyn_args && !e.dyn_kwargs && !has_kw);
      e.args.push_back({"", expression(true)});
    }
    need_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::call(ExprPtr callee) {
  auto e = node(ExprKind::Call, pos());
  e->a = std::move(callee);
  call_args(*e);
  return finish(std::move(e));
}

ExprPtr Parser::filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) e = filter_chain(std::move(e));
    else if (is_name("is")) e = test(std::move(e));
    else if (is_op("(")) e = call(std::move(e));
    else return e;
  }
}

std::string Parser::dotted_name() {
  std::string name = expect_ident();
  while (skip_op(".")) {
    name += '.';
    name += expect_ident();
  }
  return name;
}

void Parser::check_known(Expr& e, bool filter) {
  e.known = filter ? has_filter(e.name) : has_test(e.name);
  if (!e.known && !soft_)
    syntax_error(e.pos.line, e.pos.col, std::string("No ") + (filter ? "filter" : "test") + " named '" + e.name + "'.");
}

ExprPtr Parser::filter_chain(ExprPtr e, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    auto f = node(ExprKind::Filter, pos());
    f->name = dotted_name();
    check_known(*f, true);
    f->a = std::move(e);
    if (is_op("(")) call_args(*f);
    e = finish(std::move(f));
  }
  return e;
}

ExprPtr Parser::test(ExprPtr e) {
  auto t = node(ExprKind::Test, pos());
  next();  // 'is'
  if (skip_name("not")) t->negated = true;
  t->name = dotted_name();
  check_known(*t, false);
  t->a = std::move(e);
  const Token& c = cur();
  if (is_op("(")) {
    call_args(*t);
  } else if ((c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int || c.type == Tok::Float ||
              is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    t->args.push_back({"", postfix(primary())});
  }
  return finish(std::move(t));
}

}  // namespace sluice::jinja
