#include "jinja/objects.h"

#include "jinja/pystr.h"

namespace sluice::jinja {

namespace {

class Macro : public Object {
 public:
  Macro(const Stmt* def, ScopePtr closure, std::string name)
      : def_(def), closure_(std::move(closure)), name_(std::move(name)) {}
  const char* type_name() const override { return "Macro"; }
  std::string repr(int) const override { return "<Macro " + py::repr(name_) + ">"; }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override { return in.call_macro(*def_, closure_, name_, args); }
  Value getattr(const std::string& name) const override {
    if (name == "name") return Value::string(name_);
    return Object::getattr(name);
  }

 private:
  const Stmt* def_;
  ScopePtr closure_;
  std::string name_;
};

class Loop : public Object {
 public:
  Loop(std::shared_ptr<LoopState> st, size_t index0) : st_(std::move(st)), i_(index0) {}
  const char* type_name() const override { return "LoopContext"; }
  std::string repr(int) const override {
    return "<LoopContext " + std::to_string(i_ + 1) + "/" + std::to_string(st_->items.size()) + ">";
  }
  int depth() const override { return 1; }
  Value getattr(const std::string& name) const override {
    const auto n = static_cast<int64_t>(st_->items.size());
    const auto k = static_cast<int64_t>(i_);
    if (name == "index") return Value::integer(k + 1);
    if (name == "index0") return Value::integer(k);
    if (name == "revindex") return Value::integer(n - k);
    if (name == "revindex0") return Value::integer(n - k - 1);
    if (name == "first") return Value::boolean(k == 0);
    if (name == "last") return Value::boolean(k == n - 1);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(1);
    if (name == "depth0") return Value::integer(0);
    if (name == "previtem") return k > 0 ? st_->items[i_ - 1] : Value::undefined("there is no previous item");
    if (name == "nextitem") return k + 1 < n ? st_->items[i_ + 1] : Value::undefined("there is no next item");
    if (name == "cycle" || name == "changed")
      return Value::object(std::make_shared<LoopMethod>(st_, i_, name == "cycle"));
    return Object::getattr(name);
  }

 private:
  class LoopMethod : public Object {
   public:
    LoopMethod(std::shared_ptr<LoopState> st, size_t i, bool cycle) : st_(std::move(st)), i_(i), cycle_(cycle) {}
    const char* type_name() const override { return "method"; }
    bool callable() const override { return true; }
    Value call(Interp&, CallArgs& args) override {
      if (!args.kw.empty()) raise("loop.%s() takes no keyword arguments", cycle_ ? "cycle" : "changed");
      if (cycle_) {
        if (args.pos.empty()) raise("no items for cycling given");
        return args.pos[i_ % args.pos.size()];
      }
      Value now = Value::tuple(args.pos);
      if (st_->changed_called && py_eq(now, st_->last_changed)) return Value::boolean(false);
      st_->changed_called = true;
      st_->last_changed = std::move(now);
      return Value::boolean(true);
    }

   private:
    std::shared_ptr<LoopState> st_;
    size_t i_;
    bool cycle_;
  };

  std::shared_ptr<LoopState> st_;
  size_t i_;
};

}  // namespace

Value make_loop(std::shared_ptr<LoopState> state, size_t index0) {
  return Value::object(std::make_shared<Loop>(std::move(state), index0));
}

Value make_macro(const Stmt* def, ScopePtr closure, std::string name) {
  return Value::object(std::make_shared<Macro>(def, std::move(closure), std::move(name)));
}

}  // namespace sluice::jinja
