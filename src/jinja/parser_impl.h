// The parser's internals, shared by parser.cpp (statements) and parser_expr.cpp
// (expressions). Not part of the module's interface.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace sluice::jinja {

class Parser {
 public:
  Parser(std::vector<Token> toks, int max_depth) : t_(std::move(toks)), max_depth_(max_depth) {}

  Program run() {
    Program p;
    std::string hit;
    p.body = subparse({}, &hit);
    return p;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;
  bool soft_ = false;  // inside an if/elif/else or a conditional expression (see filter_expr)

  struct Guard {  // bounds recursion so hostile templates cannot exhaust the stack
    Parser& p;
    explicit Guard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_depth_) p.fail("template nested too deeply");
    }
    ~Guard() { --p.depth_; }
  };
  struct Scoped {  // saves and restores a parser flag around a nested construct
    bool& ref;
    bool saved;
    Scoped(bool& r, bool v) : ref(r), saved(r) { r = v; }
    ~Scoped() { ref = saved; }
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  Pos pos() const { return {cur().line, cur().col}; }
  [[noreturn]] void fail(const std::string& msg) const { syntax_error(cur().line, cur().col, msg); }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Data: return "template data";
      case Tok::VarBegin: return "begin of print statement";
      case Tok::VarEnd: return "end of print statement";
      case Tok::BlockBegin: return "begin of statement block";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::Name: return t.text;
      case Tok::String: return "string";
      case Tok::Int: return "integer";
      case Tok::Float: return "float";
      case Tok::Op: return t.text;
      case Tok::Eof: return "end of template";
    }
    return "?";
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected token '") + op + "', got '" + describe(cur()) + "'");
  }
  void expect_name(const char* n) {
    if (!skip_name(n)) fail(std::string("expected token '") + n + "', got '" + describe(cur()) + "'");
  }
  std::string expect_ident() {
    if (cur().type != Tok::Name) fail("expected name, got '" + describe(cur()) + "'");
    std::string s = cur().text;
    next();
    return s;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail("expected token 'end of statement block', got '" + describe(cur()) + "'");
    next();
  }
  // Sets e->depth from its children and rejects trees taller than the limit: long chains like
  // a+a+a+... are parsed by loops, but evaluated and destroyed recursively.
  ExprPtr finish(ExprPtr e) const;

  static ExprPtr node(ExprKind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // ---- statements (parser.cpp) -------------------------------------------------------------

  // Parses until a block whose tag is in `ends`; leaves the tag name current, stores it in *hit.
  Body subparse(std::initializer_list<const char*> ends, std::string* hit);

  // `{% tag ... %}` body up to one of `ends`; consumes the closing tag name.
  Body block(std::initializer_list<const char*> ends, std::string* hit);
  StmtPtr statement();

  void signature(std::vector<Param>& params);

  // for/set/with targets: names, `ns.attr` (set only), tuples of those.
  Target assign_target(bool with_namespace, const char* end_name, bool with_tuple = true);
  Target target_primary(bool with_namespace);

  // ---- expressions (parser_expr.cpp) --------------------------------------------------------
  bool tuple_end(const char* extra) const;

  ExprPtr tuple_expr(bool with_cond, const char* extra_end, bool explicit_parens = false);

  ExprPtr expression(bool with_cond) { return with_cond ? cond_expr() : or_expr(); }
  ExprPtr cond_expr();

  ExprPtr binary(ExprKind k, Op op, ExprPtr a, ExprPtr b, Pos p);
  ExprPtr or_expr();
  ExprPtr and_expr();
  ExprPtr not_expr();
  ExprPtr compare_expr();
  ExprPtr math1();
  ExprPtr concat();
  ExprPtr math2();
  ExprPtr power();
  ExprPtr unary(bool with_filter);
  ExprPtr primary();

  ExprPtr postfix(ExprPtr e);

  // One subscript: an expression or a slice a:b:c with any part omitted.
  ExprPtr subscript();
  void call_args(Expr& e);

  ExprPtr call(ExprPtr callee);
  ExprPtr filter_expr(ExprPtr e);

  std::string dotted_name();

  // jinja2 rejects unknown filters/tests when compiling, except inside if-blocks and
  // conditional expressions, where they fail only if evaluated.
  void check_known(Expr& e, bool filter);
  ExprPtr filter_chain(ExprPtr e, bool start_inline = false);

  ExprPtr test(ExprPtr e);
};

}  // namespace sluice::jinja
