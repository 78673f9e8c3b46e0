// Syntax tree of a template. One fat node type per family keeps the evaluator a plain switch.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace sluice::jinja {

struct Pos {
  int line = 0, col = 0;
};

enum class Op : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  FloorDiv,
  Mod,
  Pow,
  Concat,  // binary
  Neg,
  Plus,
  Not,  // unary
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  In,
  NotIn  // comparison
};

enum class ExprKind : uint8_t {
  Const,
  Name,
  List,
  Tuple,
  Dict,
  Unary,
  Binary,
  And,
  Or,
  Compare,
  Cond,
  GetAttr,
  GetItem,
  Slice,
  Call,
  Filter,
  Test
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string name;  // empty for a positional argument
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::Const;
  Pos pos;
  Value value;               // Const
  std::string name;          // Name; GetAttr attribute; Filter / Test name
  Op op = Op::Add;           // Unary, Binary
  bool negated = false;      // Test: `is not`
  bool known = true;         // Filter / Test: the name exists (else fails when evaluated)
  int depth = 1;             // height of this subtree (bounded by the parser)
  bool chain_inner = false;  // a ~ b ~ c: jinja2 has one n-ary Concat node, so the inner
                             // pairs of the chain are never constant-folded on their own
  // Unary: a. Binary/And/Or: a, b. Compare: a + ops. Cond: a if b else c (c may be null).
  // GetAttr: a.name. GetItem: a[b]. Slice: a[items[0]:items[1]:items[2]] (entries may be
  // null). Call: a(args). Filter: a|name(args) (a null inside filter blocks). Test: a is name.
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;  // List/Tuple items; Dict keys and values interleaved; Slice
  std::vector<Arg> args;
  std::vector<std::pair<Op, ExprPtr>> ops;
  ExprPtr dyn_args, dyn_kwargs;  // f(*x, **y)
};

// Assignment target: a name, `ns.attr`, or a tuple of targets.
struct Target {
  enum Kind : uint8_t { Name, Attr, Tuple } kind = Name;
  std::string name, attr;
  std::vector<Target> items;
};

enum class StmtKind : uint8_t {
  Data,
  Output,
  If,
  For,
  Set,
  SetBlock,
  Macro,
  CallBlock,
  FilterBlock,
  With,
  Break,
  Continue,
  Block
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr value;  // default (macro) or bound value (with); may be null for macros
};

struct Stmt {
  StmtKind kind = StmtKind::Data;
  Pos pos;
  std::string text;                                // Data; Macro name
  ExprPtr expr;                                    // Output; For iterable; Set value; CallBlock call
  Target target;                                   // For / Set / SetBlock / With (one per param)
  ExprPtr cond;                                    // For `if` filter
  std::vector<std::pair<ExprPtr, Body>> branches;  // If / elif (then else_body)
  Body body, else_body;
  std::vector<Param> params;         // Macro / CallBlock signature; With bindings
  std::vector<Target> with_targets;  // With
  ExprPtr filter;                    // SetBlock / FilterBlock: chain on a null operand
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;  // Macro / CallBlock
  std::vector<std::string> fresh;  // names that start undefined in the scope this opens (scoping.cpp)
};

struct Program {
  Body body;
  std::vector<std::string> fresh;  // the same for the top level
};

}  // namespace sluice::jinja
