#include "grammar/pda.h"

#include <algorithm>

#include "base/error.h"

namespace sluice::grammar {

Pda::Pda(const Grammar& g, const Limits& limits, bool dense) : g_(g), limits_(limits), dense_(dense) {
  frames_.push_back(Frame{UINT32_MAX, UINT32_MAX});  // stack 0: the empty stack
  frames_.push_back(Frame{UINT32_MAX, UINT32_MAX});  // stack 1: unused (keeps ids stable)
  bottom_ = {0, 0};
  if (dense) {
    rule_of_.assign(g_.elems.size(), 0);
    return_sites_.resize(g_.rules.size());
    seen_.assign(g_.rules.size(), 0);
    for (uint32_t r = 0; r < g_.rules.size(); ++r)
      for (uint32_t a : g_.rules[r].alts)
        for (uint32_t p = a;; ++p) {
          rule_of_[p] = r;
          if (g_.elems[p].kind == Elem::kRule) return_sites_[g_.elems[p].arg].push_back(p + 1);
          if (g_.elems[p].kind == Elem::kEnd) break;
        }
    find_callers();
  }
  state_off_ = {0, 0};  // state 0: no stacks (dead)
  internal_ = {0};
  if (dense_) table_.assign(256, kDead);
  else memo_.reserve(1024);
}

uint32_t Pda::intern_frame(uint32_t pos, uint32_t parent) {
  const uint64_t key = uint64_t{pos} << 32 | parent;
  auto [it, fresh] = frame_ids_.try_emplace(key, static_cast<uint32_t>(frames_.size()));
  if (fresh) {
    frames_.push_back(Frame{pos, parent});
    bottom_.push_back(pos == kWild0 || pos == kEndedPos     ? 1
                      : pos == kWild1 || pos == kWildEndPos ? 2
                                                            : bottom_[parent]);
  }
  return it->second;
}

// Appends the normalised stacks that frame (pos, parent) stands for.
void Pda::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int depth) {
  if (out.size() > limits_.max_stacks_per_state || depth > 10000)
    fail("grammar: more than %zu parallel parses in one state (limit max_stacks_per_state)",
         limits_.max_stacks_per_state);
  const Elem& e = g_.elems[pos];
  switch (e.kind) {
    case Elem::kBytes:
    case Elem::kToken: out.push_back(intern_frame(pos, parent)); return;
    case Elem::kEnd:
      if (parent == kEmptyStack) {
        out.push_back(kEmptyStack);
      } else {
        const Frame f = frames_[parent];
        if (f.pos == kWild0) out.push_back(intern_frame(kEndedPos, f.parent));
        else if (f.pos == kWild1) wild_pop(f.parent, out, depth + 1);
        else expand(f.pos + 1, f.parent, out, depth + 1);
      }
      return;
    case Elem::kRule: {
      // A call in tail position pushes no frame: the callee returns straight to our caller.
      // Loops (R ::= x R | ...) then keep one stack depth, so their states repeat and the
      // memoized transitions hit.
      const uint32_t call = g_.elems[pos + 1].kind == Elem::kEnd ? parent : intern_frame(pos, parent);
      for (uint32_t a : g_.rules[e.arg].alts) expand(a, call, out, depth + 1);
      return;
    }
  }
}

uint32_t Pda::intern_state(std::vector<uint32_t>& s) {
  if (s.empty()) return kDead;
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint32_t x : s) h = (h ^ x) * 0x100000001B3ull + (h >> 29);
  auto& cands = state_ids_[h];
  for (uint32_t id : cands) {
    auto have = stacks(id);
    if (have.size() == s.size() && std::equal(have.begin(), have.end(), s.begin())) return id;
  }
  if (n_states() >= limits_.max_states)
    fail("grammar: more than %zu matcher states (limit max_states)", limits_.max_states);
  const auto id = static_cast<uint32_t>(n_states());
  stack_pool_.insert(stack_pool_.end(), s.begin(), s.end());
  internal_.push_back(std::any_of(s.begin(), s.end(), [&](uint32_t x) { return bottom_[x] != 2; }));
  state_off_.push_back(static_cast<uint32_t>(stack_pool_.size()));
  cands.push_back(id);
  if (dense_) table_.resize(table_.size() + 256, kUnknown);
  return id;
}

uint32_t Pda::start(uint32_t pos, uint32_t parent) {
  std::vector<uint32_t> out;
  expand(pos, parent, out, 0);
  return intern_state(out);
}

// Continues after rule `rule` ended under a wildcard: at every reference to it (each rule
// once per step: the continuations do not depend on the path that led here).
void Pda::wild_pop(uint32_t rule, std::vector<uint32_t>& out, int depth) {
  if (seen_[rule] == epoch_) return;
  seen_[rule] = epoch_;
  if (rule == g_.root) out.push_back(intern_frame(kWildEndPos, 0));  // the grammar may end here
  for (uint32_t q : return_sites_[rule]) expand(q, intern_frame(kWild1, rule_of_[q]), out, depth + 1);
}

uint32_t Pda::start_local(uint32_t pos) {
  ++epoch_;
  std::vector<uint32_t> chain;
  uint32_t r = rule_of_[pos], bottom = kNone;
  while (chain.size() < 16) {
    const uint32_t c = caller_[r];
    if (c == kRootCaller) bottom = kEmptyStack;
    if (c == kNone || c == kRootCaller) break;
    chain.push_back(c);
    r = rule_of_[c];
  }
  uint32_t parent = bottom == kEmptyStack ? kEmptyStack : intern_frame(kWild0, r);
  for (size_t i = chain.size(); i-- > 0;) parent = intern_frame(chain[i], parent);
  std::vector<uint32_t> out;
  expand(pos, parent, out, 0);
  return intern_state(out);
}

// caller_[R]: the one position whose frame sits below R's frames in every stack, if there
// is one. Tail calls push no frame, so a rule called in tail position inherits the callers
// of the rule that calls it. The root's caller is "outside" (the empty stack).
void Pda::find_callers() {
  const size_t n = g_.rules.size();
  std::vector<std::vector<uint32_t>> sets(n), tail_from(n);
  auto add = [](std::vector<uint32_t>& set, uint32_t c) {
    if (set.size() >= 2 || std::find(set.begin(), set.end(), c) != set.end()) return false;
    set.push_back(c);
    return true;
  };
  add(sets[g_.root], kRootCaller);
  for (uint32_t q = 0; q < g_.elems.size(); ++q) {
    if (g_.elems[q].kind != Elem::kRule) continue;
    if (g_.elems[q + 1].kind == Elem::kEnd) tail_from[g_.elems[q].arg].push_back(rule_of_[q]);
    else add(sets[g_.elems[q].arg], q);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r)
      for (uint32_t from : tail_from[r])
        for (size_t i = 0; i < sets[from].size(); ++i) changed |= add(sets[r], sets[from][i]);
  }
  caller_.assign(n, kNone);
  for (uint32_t r = 0; r < n; ++r)
    if (sets[r].size() == 1) caller_[r] = sets[r][0];
}

uint32_t Pda::compute_step(uint32_t state, uint8_t byte) {
  std::vector<uint32_t> out, ended;
  ++epoch_;
  auto span = stacks(state);
  std::vector<uint32_t> todo(span.begin(), span.end());
  for (uint32_t s : span)
    if (frames_[s].pos == kEndedPos) wild_pop(frames_[s].parent, ended, 0);  // continue in the callers
  todo.insert(todo.end(), ended.begin(), ended.end());
  ++epoch_;  // pops after this byte are a new phase: their continuations are not in `todo`
  for (uint32_t s : todo) {
    if (s == kEmptyStack || frames_[s].pos >= kWildEndPos) continue;
    const Frame f = frames_[s];
    const Elem& e = g_.elems[f.pos];
    if (e.kind == Elem::kBytes && g_.sets[e.arg].has(byte)) expand(f.pos + 1, f.parent, out, 0);
  }
  return intern_state(out);
}

uint32_t Pda::step_token(uint32_t state, int32_t token) {
  std::vector<uint32_t> out;
  for (uint32_t s : stacks(state)) {
    if (s == kEmptyStack) continue;
    const Frame f = frames_[s];
    const Elem& e = g_.elems[f.pos];
    if (e.kind == Elem::kToken && e.arg == static_cast<uint32_t>(token)) expand(f.pos + 1, f.parent, out, 0);
  }
  return intern_state(out);
}

uint32_t Pda::single(uint32_t stack) {
  std::vector<uint32_t> one{stack};
  return intern_state(one);
}

uint32_t Pda::without_tops(uint32_t state, const std::vector<uint8_t>& flag) {
  std::vector<uint32_t> keep;
  auto flagged = [&](uint32_t s) { return s != kEmptyStack && frames_[s].pos < flag.size() && flag[frames_[s].pos]; };
  for (uint32_t s : stacks(state))
    if (!flagged(s) && (s == kEmptyStack || !flagged(frames_[s].parent))) keep.push_back(s);
  if (keep.size() == stacks(state).size()) return state;
  return intern_state(keep);
}

uint32_t Pda::merge(uint32_t a, uint32_t b) {
  if (a == kDead || a == b) return b;
  if (b == kDead) return a;
  std::vector<uint32_t> both(stacks(a).begin(), stacks(a).end());
  both.insert(both.end(), stacks(b).begin(), stacks(b).end());
  return intern_state(both);
}

}  // namespace sluice::grammar
