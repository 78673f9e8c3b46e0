#include "jinja/parser.h"

#include "jinja/parser_impl.h"

namespace sluice::jinja {

namespace {

bool mentions(const Expr* e, std::string_view name);
bool mentions(const Body& body, std::string_view name);

bool mentions(const Expr* e, std::string_view name) {
  if (!e) return false;
  if (e->kind == ExprKind::Name && e->name == name) return true;
  if (mentions(e->a.get(), name) || mentions(e->b.get(), name) || mentions(e->c.get(), name) ||
      mentions(e->dyn_args.get(), name) || mentions(e->dyn_kwargs.get(), name))
    return true;
  for (const auto& x : e->items)
    if (mentions(x.get(), name)) return true;
  for (const auto& x : e->args)
    if (mentions(x.value.get(), name)) return true;
  for (const auto& x : e->ops)
    if (mentions(x.second.get(), name)) return true;
  return false;
}

bool mentions(const Body& body, std::string_view name) {
  for (const auto& s : body) {
    if (mentions(s->expr.get(), name) || mentions(s->cond.get(), name) || mentions(s->filter.get(), name) ||
        mentions(s->body, name) || mentions(s->else_body, name))
      return true;
    for (const auto& [c, b] : s->branches)
      if (mentions(c.get(), name) || mentions(b, name)) return true;
    for (const auto& p : s->params)
      if (mentions(p.value.get(), name)) return true;
  }
  return false;
}

}  // namespace

Body Parser::subparse(std::initializer_list<const char*> ends, std::string* hit) {
  Guard g(*this);
  Body body;
  while (true) {
    const Token& t = cur();
    switch (t.type) {
      case Tok::Data: {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Data;
        s->pos = pos();
        s->text = t.text;
        body.push_back(std::move(s));
        next();
        break;
      }
      case Tok::VarBegin: {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->pos = pos();
        s->expr = tuple_expr(true, {});
        if (cur().type != Tok::VarEnd) fail("expected token 'end of print statement', got '" + describe(cur()) + "'");
        next();
        body.push_back(std::move(s));
        break;
      }
      case Tok::BlockBegin: {
        next();
        if (cur().type == Tok::Name)
          for (const char* e : ends)
            if (cur().text == e) {
              *hit = e;
              return body;
            }
        body.push_back(statement());
        expect_block_end();
        break;
      }
      case Tok::Eof: {
        if (ends.size()) {
          std::string want;
          for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
          fail("unexpected end of template, expected " + want);
        }
        return body;
      }
      default: fail("unexpected '" + describe(t) + "'");
    }
  }
}

Body Parser::block(std::initializer_list<const char*> ends, std::string* hit) {
  skip_op(":");  // jinja2 tolerates `{% if x: %}`
  expect_block_end();
  Body b = subparse(ends, hit);
  next();
  return b;
}

StmtPtr Parser::statement() {
  if (cur().type != Tok::Name) fail("tag name expected");
  const std::string tag = cur().text;
  auto s = std::make_unique<Stmt>();
  s->pos = pos();
  next();
  std::string hit;
  if (tag == "if") {
    s->kind = StmtKind::If;
    Scoped soft(soft_, true);
    while (true) {
      ExprPtr c = tuple_expr(false, {});
      Body b = block({"elif", "else", "endif"}, &hit);
      s->branches.emplace_back(std::move(c), std::move(b));
      if (hit == "elif") continue;
      if (hit == "else") s->else_body = block({"endif"}, &hit);
      break;
    }
  } else if (tag == "for") {
    s->kind = StmtKind::For;
    s->target = assign_target(false, "in");
    if (s->target.kind == Target::Name && s->target.name == "loop")
      fail("Can't assign to special loop variable in for-loop target");
    expect_name("in");
    s->expr = tuple_expr(false, "recursive");
    Scoped soft(soft_, false);
    if (skip_name("if")) s->cond = expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    ++loop_depth_;
    s->body = block({"endfor", "else"}, &hit);
    --loop_depth_;
    if (hit == "else") s->else_body = block({"endfor"}, &hit);
  } else if (tag == "set") {
    s->target = assign_target(true, nullptr);
    if (skip_op("=")) {
      s->kind = StmtKind::Set;
      s->expr = tuple_expr(true, {});
    } else {
      s->kind = StmtKind::SetBlock;
      Scoped soft(soft_, false);
      if (is_op("|")) s->filter = filter_chain(nullptr);
      s->body = block({"endset"}, &hit);
    }
  } else if (tag == "macro" || tag == "call") {
    s->kind = tag == "macro" ? StmtKind::Macro : StmtKind::CallBlock;
    if (tag == "macro") s->text = expect_ident();
    if (tag == "macro" || is_op("(")) signature(s->params);
    if (tag == "call") {
      s->expr = expression(true);
      if (s->expr->kind != ExprKind::Call) fail("expected call");
    }
    Scoped soft(soft_, false);
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro body
    s->body = block({tag == "macro" ? "endmacro" : "endcall"}, &hit);
    loop_depth_ = saved_loops;
    s->uses_varargs = mentions(s->body, "varargs");
    s->uses_kwargs = mentions(s->body, "kwargs");
    s->uses_caller = mentions(s->body, "caller");
  } else if (tag == "filter") {
    s->kind = StmtKind::FilterBlock;
    Scoped soft(soft_, false);
    s->filter = filter_chain(nullptr, true);
    s->body = block({"endfilter"}, &hit);
  } else if (tag == "with") {
    s->kind = StmtKind::With;
    while (cur().type != Tok::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      s->with_targets.push_back(assign_target(false, nullptr, false));
      expect_op("=");
      s->params.push_back({"", expression(true)});
    }
    Scoped soft(soft_, false);
    s->body = block({"endwith"}, &hit);
  } else if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) syntax_error(s->pos.line, s->pos.col, "'" + tag + "' outside loop");
    s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
  } else if (tag == "generation") {
    // transformers' AssistantTracker tag: renders its body unchanged.
    s->kind = StmtKind::Block;
    s->body = block({"endgeneration"}, &hit);
  } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "block" ||
             tag == "autoescape" || tag == "do" || tag == "trans") {
    syntax_error(s->pos.line, s->pos.col, "tag '" + tag + "' is not supported in chat templates");
  } else {
    syntax_error(s->pos.line, s->pos.col, "Encountered unknown tag '" + tag + "'.");
  }
  return s;
}

void Parser::signature(std::vector<Param>& params) {
  expect_op("(");
  bool defaults = false;
  while (!is_op(")")) {
    if (!params.empty()) expect_op(",");
    if (is_op(")")) break;
    Param p;
    p.name = expect_ident();
    if (skip_op("=")) {
      p.value = expression(true);
      defaults = true;
    } else if (defaults) {
      fail("non-default argument follows default argument");
    }
    params.push_back(std::move(p));
  }
  expect_op(")");
}

Target Parser::assign_target(bool with_namespace, const char* end_name, bool with_tuple) {
  Guard g(*this);
  std::vector<Target> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (cur().type == Tok::BlockEnd || (end_name && is_name(end_name)) || is_op(")") || is_op("=")) break;
    items.push_back(target_primary(with_namespace));
    if (!with_tuple || !is_op(",")) break;
    is_tuple = true;
  }
  if (items.empty()) fail("expected an assignment target, got '" + describe(cur()) + "'");
  if (!is_tuple) return std::move(items[0]);
  Target t;
  t.kind = Target::Tuple;
  t.items = std::move(items);
  return t;
}

Target Parser::target_primary(bool with_namespace) {
  if (skip_op("(")) {
    Target t = assign_target(false, nullptr);
    expect_op(")");
    return t;
  }
  if (cur().type != Tok::Name) fail("can't assign to '" + describe(cur()) + "'");
  Target t;
  t.name = cur().text;
  if (t.name == "true" || t.name == "false" || t.name == "none" || t.name == "True" || t.name == "False" ||
      t.name == "None")
    fail("can't assign to 'const'");
  next();
  if (with_namespace && is_op(".")) {
    next();
    t.kind = Target::Attr;
    t.attr = expect_ident();
  }
  return t;
}

Program parse(std::string_view source, int max_depth) { return Parser(tokenize(source), max_depth).run(); }

}  // namespace sluice::jinja
