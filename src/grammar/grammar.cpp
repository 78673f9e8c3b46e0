// Expression constructors, lowering of Expr trees into flat rules, and validation.
#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

#include "base/error.h"

namespace sluice::grammar {

Expr empty() { return Expr{}; }

Expr lit(std::string_view s) {
  Expr e;
  for (unsigned char c : s) e.kids.push_back(bytes(ByteSet::of(c)));
  return e;
}

Expr bytes(const ByteSet& s) {
  Expr e;
  e.kind = Expr::kBytes;
  e.bytes = s;
  return e;
}

Expr ref(uint32_t rule) {
  Expr e;
  e.kind = Expr::kRule;
  e.id = rule;
  return e;
}

Expr token(int32_t id) {
  Expr e;
  e.kind = Expr::kToken;
  e.id = static_cast<uint32_t>(id);
  return e;
}

Expr seq(std::vector<Expr> parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  Expr e;
  e.kids = std::move(parts);
  return e;
}

Expr alt(std::vector<Expr> parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  Expr e;
  e.kind = Expr::kAlt;
  e.kids = std::move(parts);
  return e;
}

Expr repeat(Expr x, uint32_t min, uint32_t max) {
  if (min == 1 && max == 1) return x;
  Expr e;
  e.kind = Expr::kRepeat;
  e.kids.push_back(std::move(x));
  e.min = min;
  e.max = max;
  return e;
}

uint32_t GrammarBuilder::declare(std::string name) {
  g_.rules.push_back(Rule{std::move(name), {}});
  defined_.push_back(false);
  check_size();
  return static_cast<uint32_t>(g_.rules.size() - 1);
}

void GrammarBuilder::check_size() const {
  if (g_.rules.size() > limits_.max_rules) fail("grammar: more than %zu rules (limit max_rules)", limits_.max_rules);
  if (g_.elems.size() > limits_.max_positions)
    fail("grammar: more than %zu grammar positions (limit max_positions)", limits_.max_positions);
}

uint32_t GrammarBuilder::set_index(const ByteSet& s) {
  for (const auto& [set, id] : set_ids_)
    if (set == s) return id;
  g_.sets.push_back(s);
  const auto id = static_cast<uint32_t>(g_.sets.size() - 1);
  set_ids_.emplace_back(s, id);
  return id;
}

void GrammarBuilder::define(uint32_t rule, const Expr& e) {
  if (rule >= g_.rules.size()) fail("grammar: rule %u was never declared", rule);
  if (defined_[rule]) fail("grammar: rule '%s' defined twice", g_.rules[rule].name.c_str());
  defined_[rule] = true;
  std::vector<uint32_t> alts;
  const std::string base = g_.rules[rule].name;  // a copy: helper rules grow g_.rules
  lower_alt(e, alts, base);
  g_.rules[rule].alts = std::move(alts);
}

void GrammarBuilder::lower_alt(const Expr& e, std::vector<uint32_t>& alts, const std::string& base) {
  if (e.kind == Expr::kAlt) {
    for (const Expr& k : e.kids) lower_alt(k, alts, base);
    return;
  }
  // Lower into a private buffer first: helper rules created on the way append their own
  // alternatives to `elems`, and an alternative must stay contiguous.
  std::vector<Elem> run;
  lower_seq(e, run, base);
  alts.push_back(static_cast<uint32_t>(g_.elems.size()));
  g_.elems.insert(g_.elems.end(), run.begin(), run.end());
  g_.elems.push_back(Elem{Elem::kEnd, 0});
  check_size();
}

void GrammarBuilder::lower_seq(const Expr& e, std::vector<Elem>& out, const std::string& base) {
  switch (e.kind) {
    case Expr::kSeq:
      for (const Expr& k : e.kids) lower_seq(k, out, base);
      return;
    case Expr::kBytes: out.push_back(Elem{Elem::kBytes, set_index(e.bytes)}); return;
    case Expr::kRule:
      if (e.id >= g_.rules.size()) fail("grammar: reference to undeclared rule %u", e.id);
      out.push_back(Elem{Elem::kRule, e.id});
      return;
    case Expr::kToken: out.push_back(Elem{Elem::kToken, e.id}); return;
    case Expr::kAlt: out.push_back(Elem{Elem::kRule, helper(base, e)}); return;
    case Expr::kRepeat: out.push_back(Elem{Elem::kRule, repeat_rule(e, base)}); return;
  }
}

uint32_t GrammarBuilder::helper(const std::string& base, const Expr& e) {
  return add(base + "-" + std::to_string(g_.rules.size()), e);
}

namespace {

// x's alternatives, each followed by `next`: (a | b) next -> a next | b next. Inlining the
// alternatives keeps every byte position of a loop inside the loop's own rule, which has
// one caller (the mask analysis then sees through it; see CompiledGrammar).
Expr each_then(const Expr& x, const Expr& next) {
  std::vector<Expr> alts;
  if (x.kind == Expr::kAlt) {
    for (const Expr& a : x.kids) alts.push_back(seq({a, next}));
  } else {
    alts.push_back(seq({x, next}));
  }
  return alt(std::move(alts));
}

}  // namespace

// x{min,max}: min copies of x, then a chain of optional copies (or one star rule).
uint32_t GrammarBuilder::repeat_rule(const Expr& e, const std::string& base) {
  if (e.max != kInf && e.max > limits_.max_repeat)
    fail("grammar: repetition bound %u over the limit %zu (limit max_repeat)", e.max, limits_.max_repeat);
  if (e.min > limits_.max_repeat)
    fail("grammar: repetition bound %u over the limit %zu (limit max_repeat)", e.min, limits_.max_repeat);
  if (e.max != kInf && e.min > e.max) fail("grammar: repetition {%u,%u} has min > max", e.min, e.max);
  Expr x = e.kids[0];
  if (x.kind == Expr::kRepeat) x = ref(helper(base, x));
  std::vector<Expr> parts(e.min, x);
  if (e.max == kInf) {
    const uint32_t s = declare(base + "-star" + std::to_string(g_.rules.size()));
    define(s, alt({each_then(x, ref(s)), empty()}));
    parts.push_back(ref(s));
  } else if (e.max > e.min) {
    uint32_t prev = declare(base + "-opt" + std::to_string(g_.rules.size()));
    define(prev, alt({x, empty()}));
    for (uint32_t k = e.min + 1; k < e.max; ++k) {
      const uint32_t r = declare(base + "-opt" + std::to_string(g_.rules.size()));
      define(r, alt({each_then(x, ref(prev)), empty()}));
      prev = r;
    }
    parts.push_back(ref(prev));
  }
  return helper(base, seq(std::move(parts)));
}

Grammar GrammarBuilder::finish(uint32_t root) {
  if (root >= g_.rules.size()) fail("grammar: root rule %u was never declared", root);
  for (size_t r = 0; r < g_.rules.size(); ++r)
    if (!defined_[r]) fail("grammar: rule '%s' is referenced but never defined", g_.rules[r].name.c_str());
  g_.root = root;
  for (uint32_t r : unique_rules_)
    for (uint32_t a : g_.rules[r].alts)
      for (uint32_t p = a; g_.elems[p].kind != Elem::kEnd; ++p) g_.unique_close.push_back(p);
  std::sort(g_.unique_close.begin(), g_.unique_close.end());
  for (auto& v : unique_value_rules_) {
    Grammar::UniqueValues u{std::move(v.canonical), {}, g_.rules[v.comma].alts.at(0)};
    for (uint32_t r : v.rules) u.first.push_back(g_.rules[r].alts.at(0));
    g_.unique_values.push_back(std::move(u));
  }
  validate(g_);
  return std::move(g_);
}

namespace {

// Fixed point over "every element of some alternative satisfies ok(elem)".
std::vector<bool> fixed_point(const Grammar& g, const std::function<bool(const Elem&, const std::vector<bool>&)>& ok) {
  std::vector<bool> in(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (in[r]) continue;
      for (uint32_t a : g.rules[r].alts) {
        bool all = true;
        for (uint32_t p = a; g.elems[p].kind != Elem::kEnd && all; ++p) all = ok(g.elems[p], in);
        if (all) {
          in[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return in;
}

}  // namespace

void validate(const Grammar& g) {
  const auto productive = fixed_point(g, [&](const Elem& e, const std::vector<bool>& in) {
    if (e.kind == Elem::kBytes) return !g.sets[e.arg].empty();
    if (e.kind == Elem::kRule) return bool(in[e.arg]);
    return true;
  });
  for (size_t r = 0; r < g.rules.size(); ++r)
    if (!productive[r]) fail("grammar: rule '%s' matches no finite string", g.rules[r].name.c_str());
  const auto nullable = fixed_point(
      g, [&](const Elem& e, const std::vector<bool>& in) { return e.kind == Elem::kRule && in[e.arg]; });
  // Left corners: r -> s when s can start r without r consuming input first.
  std::vector<std::vector<uint32_t>> corner(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (uint32_t a : g.rules[r].alts)
      for (uint32_t p = a; g.elems[p].kind == Elem::kRule; ++p) {
        corner[r].push_back(g.elems[p].arg);
        if (!nullable[g.elems[p].arg]) break;
      }
  std::vector<uint8_t> mark(g.rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::function<void(uint32_t)> visit = [&](uint32_t r) {
    mark[r] = 1;
    for (uint32_t s : corner[r]) {
      if (mark[s] == 1) fail("grammar: rule '%s' is left-recursive", g.rules[s].name.c_str());
      if (mark[s] == 0) visit(s);
    }
    mark[r] = 2;
  };
  for (uint32_t r = 0; r < g.rules.size(); ++r)
    if (mark[r] == 0) visit(r);
}

namespace {

std::string byte_text(uint8_t b) {
  if (b >= 0x20 && b < 0x7f && b != '\\' && b != ']' && b != '[' && b != '-' && b != '^' && b != '"')
    return std::string(1, static_cast<char>(b));
  return strfmt("\\x%02X", b);
}

std::string set_text(const ByteSet& s) {
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.has(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.has(static_cast<uint8_t>(e + 1))) ++e;
    out += byte_text(static_cast<uint8_t>(b));
    if (e > b) out += "-" + byte_text(static_cast<uint8_t>(e));
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < rules.size(); ++r) {
    out += rules[r].name + " ::=";
    for (size_t i = 0; i < rules[r].alts.size(); ++i) {
      if (i) out += " |";
      for (uint32_t p = rules[r].alts[i]; elems[p].kind != Elem::kEnd; ++p) {
        const Elem& e = elems[p];
        if (e.kind == Elem::kBytes) out += " " + set_text(sets[e.arg]);
        if (e.kind == Elem::kRule) out += " " + rules[e.arg].name;
        if (e.kind == Elem::kToken) out += strfmt(" <[%u]>", e.arg);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace sluice::grammar
