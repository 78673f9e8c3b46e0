#include "grammar/compiled.h"

#include <algorithm>

#include "base/error.h"
#include "grammar/background.h"
#include "grammar/pda.h"

namespace sluice::grammar {

namespace {
constexpr size_t kAnalysisStacks = 256;
}  // namespace

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocab> vocab, Limits limits)
    : g_(std::move(g)), vocab_(std::move(vocab)), limits_(limits), mask_index_(g_.elems.size(), -1) {
  // Thread CPU time: on the low-priority worker the wall clock would count the engine's turns.
  const double t0 = thread_cpu_ms();
  for (const Elem& e : g_.elems)
    if (e.kind == Elem::kToken && static_cast<int64_t>(e.arg) >= vocab_->n_vocab())
      fail("grammar: token terminal %u is outside the vocabulary (%d tokens)", e.arg, vocab_->n_vocab());
  byte_tokens_.assign(vocab_->mask_words(), 0);
  for (int32_t id : vocab_->trie_tokens()) byte_tokens_[id >> 6] |= uint64_t{1} << (id & 63);
  // The analysis gives up on a token sooner than the matcher would (see analyse): a state of
  // hundreds of wildcard continuations costs more to build than checking the few tokens
  // that reach it from the real stack.
  Limits analysis = limits_;
  analysis.max_stacks_per_state = std::min<size_t>(limits_.max_stacks_per_state, kAnalysisStacks);
  pda_ = std::make_unique<Pda>(g_, analysis, /*dense=*/true);
  flag_.assign(static_cast<size_t>(vocab_->n_vocab()), 0);
  // Only rules reachable from the root can be on a stack (front ends add shared helpers
  // that a given schema may never use).
  std::vector<uint8_t> reach(g_.rules.size(), 0);
  std::vector<uint32_t> todo{g_.root};
  reach[g_.root] = 1;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (uint32_t a : g_.rules[r].alts)
      for (uint32_t p = a; g_.elems[p].kind != Elem::kEnd; ++p)
        if (g_.elems[p].kind == Elem::kRule && !reach[g_.elems[p].arg]) {
          reach[g_.elems[p].arg] = 1;
          todo.push_back(g_.elems[p].arg);
        }
  }
  std::vector<uint8_t> live(g_.elems.size(), 0);
  for (uint32_t r = 0; r < g_.rules.size(); ++r)
    if (reach[r])
      for (uint32_t a : g_.rules[r].alts)
        for (uint32_t p = a; g_.elems[p].kind != Elem::kEnd; ++p) live[p] = 1;
  for (uint32_t pos = 0; pos < g_.elems.size(); ++pos) {
    if (g_.elems[pos].kind != Elem::kBytes || !live[pos]) continue;
    mask_index_[pos] = static_cast<int32_t>(mask_pos_.size());
    mask_pos_.push_back(pos);
  }
  masks_.resize(mask_pos_.size());
  ready_ = std::make_unique<std::atomic<bool>[]>(mask_pos_.size());
  pending_ = mask_pos_.size();
  for (size_t i = 0; i < mask_pos_.size(); ++i) {
    const double ms = thread_cpu_ms() - t0;
    if (ms + g_.build_ms >= limits_.eager_compile_ms) break;
    analyse(*pda_, mask_pos_[i], masks_[i], flag_);
    ready_[i].store(true, std::memory_order_relaxed);
    --pending_;
    const double after = thread_cpu_ms() - t0;
    if (after > limits_.max_compile_ms)
      fail("grammar: compiling took over %.0f ms (limit max_compile_ms)", limits_.max_compile_ms);
  }
  for (const PositionMask& m : masks_) stats_.dependent_total += m.dependent.size();
  stats_.positions = masks_.size();
  stats_.deferred = pending_;
  stats_.states = pda_->n_states();
  if (pending_ == 0) release_workspace();
  stats_.ms = thread_cpu_ms() - t0;
}

CompiledGrammar::~CompiledGrammar() = default;

void CompiledGrammar::release_workspace() const {
  pda_.reset();
  flag_ = {};
}

// First use of a position the compile left for later. The workspace's memoized transitions
// carry over from earlier analyses, so later positions get cheaper.
void CompiledGrammar::analyse_deferred(size_t index) const {
  std::lock_guard lock(mu_);
  if (ready_[index].load(std::memory_order_relaxed)) return;
  PositionMask m;  // filled aside: a limit error mid-walk leaves the entry deferred
  analyse(*pda_, mask_pos_[index], m, flag_);
  masks_[index] = std::move(m);
  ready_[index].store(true, std::memory_order_release);
  if (--pending_ == 0) release_workspace();
}

bool CompiledGrammar::warm(double budget_ms) const {
  const double t0 = thread_cpu_ms();
  for (size_t i = 0; i < mask_pos_.size(); ++i) {
    if (ready_[i].load(std::memory_order_acquire)) continue;
    if (thread_cpu_ms() - t0 >= budget_ms) return false;
    analyse_deferred(i);
  }
  return true;
}

bool CompiledGrammar::fully_analysed() const {
  std::lock_guard lock(mu_);
  return pending_ == 0;
}

size_t CompiledGrammar::analysed() const {
  std::lock_guard lock(mu_);
  return masks_.size() - pending_;
}

// One depth-first walk of the vocabulary trie from the stack [pos] (see the header).
void CompiledGrammar::analyse(Pda& pda, uint32_t pos, PositionMask& out, std::vector<uint8_t>& flag) const {
  const auto& nodes = vocab_->nodes();
  const auto& toks = vocab_->trie_tokens();
  std::vector<uint32_t> state(2, pda.start_local(pos));
  std::vector<int32_t> accepted;
  for (uint32_t i = 1; i < nodes.size();) {
    const auto& nd = nodes[i];
    const uint32_t s = pda.try_step(state[nd.depth - 1], nd.byte);
    if (s == Pda::kOverflow) {
      // Under the wildcard the walk follows every caller of a rule at once; past the limits
      // (many call sites of a shared rule, a long token crossing several of them) the
      // subtree's tokens are left to the run-time check from the real stack instead.
      for (uint32_t j = i; j < nd.end; ++j)
        out.dependent.insert(out.dependent.end(), toks.begin() + nodes[j].tok_begin, toks.begin() + nodes[j].tok_end);
      i = nd.end;
      continue;
    }
    if (s == Pda::kDead) {  // dead in every context, with everything below it
      i = nd.end;
      continue;
    }
    if (state.size() <= nd.depth + 1u) state.resize(nd.depth + 2);
    state[nd.depth] = s;
    auto& list = pda.has_internal(s) ? accepted : out.dependent;
    list.insert(list.end(), toks.begin() + nd.tok_begin, toks.begin() + nd.tok_end);
    ++i;
  }
  constexpr size_t kListMax = 8192;
  const size_t rejected = toks.size() - accepted.size();
  if (accepted.size() <= kListMax) {
    std::sort(accepted.begin(), accepted.end());
    out.ids = std::move(accepted);
  } else if (rejected <= kListMax) {
    out.complement = true;
    for (int32_t id : accepted) flag[id] = 1;
    for (int32_t id : toks)
      if (!flag[id]) out.ids.push_back(id);
    for (int32_t id : accepted) flag[id] = 0;
    std::sort(out.ids.begin(), out.ids.end());
  } else {
    out.bits.assign(vocab_->mask_words(), 0);
    for (int32_t id : accepted) out.bits[id >> 6] |= uint64_t{1} << (id & 63);
  }
  out.dep_lcp.resize(out.dependent.size());
  for (size_t k = 0; k < out.dependent.size(); ++k) {
    if (k == 0) continue;
    const std::string_view a = vocab_->piece(out.dependent[k - 1]), b = vocab_->piece(out.dependent[k]);
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    out.dep_lcp[k] = static_cast<uint16_t>(l);
  }
}

std::shared_ptr<const CompiledGrammar> GrammarCache::get(const std::string& key,
                                                         const std::function<Grammar()>& build) {
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
  }
  // Compiled outside the lock, on the low-priority worker (the caller waits): two requests racing
  // on one new key both compile; one wins.
  auto compiled = worker_.run([&] {
    auto g = std::make_shared<const CompiledGrammar>(build(), vocab_, limits_);
    if (warm_ms_ > 0) g->warm(warm_ms_);
    return std::shared_ptr<const CompiledGrammar>(std::move(g));
  });
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

bool GrammarCache::warm(const std::shared_ptr<const CompiledGrammar>& g, double budget_ms) {
  if (!g || g->fully_analysed()) return true;
  return worker_.run([&] { return g->warm(budget_ms); });
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace sluice::grammar
