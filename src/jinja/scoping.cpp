#include "jinja/scoping.h"

#include <set>
#include <string>

namespace sluice::jinja {

namespace {

struct Frame {
  const Frame* parent = nullptr;
  std::set<std::string> refs;            // names referenced at this frame's level
  std::vector<std::string> store_first;  // first referenced by an unconditional store
  bool has_ref(const std::string& n) const {
    for (const Frame* f = this; f; f = f->parent)
      if (f->refs.count(n)) return true;
    return false;
  }
};

struct Child {  // a nested frame, analysed once its parent is complete (as jinja2 does)
  Body* body;
  std::vector<std::string>* fresh;
  std::vector<std::string> params;
};

void target_names(const Target& t, std::vector<std::string>* out) {
  if (t.kind == Target::Name) out->push_back(t.name);
  for (const auto& x : t.items) target_names(x, out);
}

class Analyzer {
 public:
  void frame(Body& body, const std::vector<std::string>& params, const Frame* parent, std::vector<std::string>* fresh) {
    Frame f;
    f.parent = parent;
    for (const auto& p : params) f.refs.insert(p);
    std::vector<Child> children;
    level(body, f, children);
    for (const auto& n : f.store_first)
      if (!parent || !parent->has_ref(n)) fresh->push_back(n);
    for (auto& c : children) frame(*c.body, c.params, &f, c.fresh);
  }

 private:
  static void loads(const Expr* e, Frame& f) {
    if (!e) return;
    if (e->kind == ExprKind::Name) f.refs.insert(e->name);
    loads(e->a.get(), f);
    loads(e->b.get(), f);
    loads(e->c.get(), f);
    loads(e->dyn_args.get(), f);
    loads(e->dyn_kwargs.get(), f);
    for (const auto& x : e->items) loads(x.get(), f);
    for (const auto& x : e->args) loads(x.value.get(), f);
    for (const auto& x : e->ops) loads(x.second.get(), f);
  }

  static void store(const std::string& n, Frame& f) {
    if (f.refs.insert(n).second) f.store_first.push_back(n);
  }

  static void store_target(const Target& t, Frame& f) {
    if (t.kind == Target::Name) store(t.name, f);
    else if (t.kind == Target::Attr) f.refs.insert(t.name);  // ns.attr = ... loads ns
    for (const auto& x : t.items) store_target(x, f);
  }

  // An if's branches each start from the state before it. Names stored first in the if
  // branch, in the elif branches and in the else branch stay store-first; names stored in
  // only some branches resolve from outside (jinja2's Symbols.branch_update).
  void if_stmt(Stmt& s, Frame& f, std::vector<Child>& children) {
    loads(s.branches[0].first.get(), f);
    std::vector<Frame> groups(3, f);
    for (auto& g : groups) g.store_first.clear();
    level(s.branches[0].second, groups[0], children);
    for (size_t k = 1; k < s.branches.size(); ++k) {
      loads(s.branches[k].first.get(), groups[1]);
      level(s.branches[k].second, groups[1], children);
    }
    level(s.else_body, groups[2], children);
    for (const auto& g : groups) f.refs.insert(g.refs.begin(), g.refs.end());
    for (const auto& n : groups[0].store_first) {
      bool everywhere = true;
      for (int k = 1; k < 3; ++k) {
        bool found = false;
        for (const auto& x : groups[k].store_first) found = found || x == n;
        everywhere = everywhere && found;
      }
      if (everywhere) f.store_first.push_back(n);
    }
  }

  void level(Body& body, Frame& f, std::vector<Child>& children) {
    for (auto& sp : body) {
      Stmt& s = *sp;
      switch (s.kind) {
        case StmtKind::Output: loads(s.expr.get(), f); break;
        case StmtKind::If: if_stmt(s, f, children); break;
        case StmtKind::For: {
          loads(s.expr.get(), f);
          Child c{&s.body, &s.fresh, {"loop"}};
          target_names(s.target, &c.params);
          children.push_back(std::move(c));
          break;
        }
        case StmtKind::Set:
          loads(s.expr.get(), f);
          store_target(s.target, f);
          break;
        case StmtKind::SetBlock:
          store_target(s.target, f);
          children.push_back({&s.body, &s.fresh, {}});
          break;
        case StmtKind::Macro:
        case StmtKind::CallBlock: {
          if (s.kind == StmtKind::Macro) store(s.text, f);
          else loads(s.expr.get(), f);
          Child c{&s.body, &s.fresh, {"varargs", "kwargs", "caller"}};
          for (const auto& p : s.params) c.params.push_back(p.name);
          children.push_back(std::move(c));
          break;
        }
        case StmtKind::FilterBlock:
          loads(s.filter.get(), f);
          children.push_back({&s.body, &s.fresh, {}});
          break;
        case StmtKind::With: {
          for (const auto& p : s.params) loads(p.value.get(), f);
          Child c{&s.body, &s.fresh, {}};
          for (const auto& t : s.with_targets) target_names(t, &c.params);
          children.push_back(std::move(c));
          break;
        }
        case StmtKind::Block: children.push_back({&s.body, &s.fresh, {}}); break;
        case StmtKind::Data:
        case StmtKind::Break:
        case StmtKind::Continue: break;
      }
    }
  }
};

}  // namespace

void analyze_scopes(Program& program) { Analyzer().frame(program.body, {}, nullptr, &program.fresh); }

}  // namespace sluice::jinja
