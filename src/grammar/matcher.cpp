#include "grammar/matcher.h"

#include <algorithm>

#include "base/error.h"

namespace sluice::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> g)
    : g_(std::move(g)), pda_(g_->grammar(), g_->limits(), /*dense=*/true) {
  // The root rule is entered from a frame whose parent is the empty stack: when the root's
  // alternative ends, the empty stack (complete) appears in the state.
  uint32_t state = Pda::kDead;
  for (uint32_t a : g_->grammar().rules[g_->grammar().root].alts)
    state = pda_.merge(state, pda_.start(a, Pda::kEmptyStack));
  history_.push_back(state);
}

bool Matcher::is_complete() const { return history_.back() != kTerminated && pda_.has_empty_stack(history_.back()); }

bool Matcher::only_end() const { return is_complete() && pda_.stacks(history_.back()).size() == 1; }

uint32_t Matcher::next_state(int32_t token) {
  const uint32_t cur = history_.back();
  if (cur == kTerminated || token < 0 || token >= g_->vocab().n_vocab()) return Pda::kDead;
  if (g_->vocab().is_eog(token)) return pda_.has_empty_stack(cur) ? kTerminated : Pda::kDead;
  const std::string_view piece = g_->vocab().piece(token);
  const uint32_t by_bytes = piece.empty() ? Pda::kDead : pda_.step_bytes(cur, piece);
  return pda_.merge(by_bytes, pda_.step_token(cur, token));
}

bool Matcher::accepts(int32_t token) { return next_state(token) != Pda::kDead; }

bool Matcher::advance(int32_t token) {
  const uint32_t next = next_state(token);
  if (next == Pda::kDead) return false;
  history_.push_back(next);
  return true;
}

void Matcher::rollback(size_t n) {
  if (n > n_tokens()) fail("grammar matcher: cannot roll back %zu tokens, only %zu accepted", n, n_tokens());
  history_.resize(history_.size() - n);
}

void Matcher::fill_mask(std::span<uint64_t> mask) {
  const auto& vocab = g_->vocab();
  if (mask.size() != vocab.mask_words())
    fail("grammar matcher: mask has %zu words, the vocabulary needs %zu", mask.size(), vocab.mask_words());
  std::fill(mask.begin(), mask.end(), 0);
  const uint32_t cur = history_.back();
  if (cur == kTerminated) return;
  const auto& elems = g_->grammar().elems;
  done_.clear();
  // A copy: the dependent-token walks intern new states, which may move the stack pool.
  const auto span = pda_.stacks(cur);
  stacks_.assign(span.begin(), span.end());
  for (uint32_t stack : stacks_) {
    if (stack == Pda::kEmptyStack) {
      for (int32_t id : vocab.eog_ids()) mask[id >> 6] |= uint64_t{1} << (id & 63);
      continue;
    }
    const uint32_t pos = pda_.frame(stack).pos;
    if (elems[pos].kind == Elem::kToken) {
      const uint32_t id = elems[pos].arg;
      mask[id >> 6] |= uint64_t{1} << (id & 63);
      continue;
    }
    const PositionMask& m = *g_->position_mask(pos);
    // Several stacks may share a top position (different callers): its fixed part once.
    if (std::find(done_.begin(), done_.end(), pos) == done_.end()) {
      done_.push_back(pos);
      apply_fixed(m, mask);
    }
    add_dependent(stack, m, mask);
  }
}

void Matcher::apply_fixed(const PositionMask& m, std::span<uint64_t> mask) {
  if (!m.bits.empty()) {
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= m.bits[w];
  } else if (m.complement) {
    const auto& base = g_->byte_tokens();
    tmp_.assign(base.begin(), base.end());
    for (int32_t id : m.ids) tmp_[id >> 6] &= ~(uint64_t{1} << (id & 63));
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= tmp_[w];
  } else {
    for (int32_t id : m.ids) mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

// Walks the position's dependent tokens (trie order, shared prefixes computed once) from
// the full stack; a prefix that dies skips every later token that starts with it.
void Matcher::add_dependent(uint32_t stack, const PositionMask& m, std::span<uint64_t> mask) {
  if (m.dependent.empty()) return;
  const auto& vocab = g_->vocab();
  if (walk_.empty()) walk_.resize(64);
  walk_[0] = pda_.single(stack);
  size_t dead_len = SIZE_MAX;
  for (size_t k = 0; k < m.dependent.size(); ++k) {
    const size_t l = m.dep_lcp[k];
    if (l >= dead_len) continue;
    dead_len = SIZE_MAX;
    const std::string_view b = vocab.piece(m.dependent[k]);
    if (walk_.size() <= b.size()) walk_.resize(b.size() + 1);
    uint32_t s = walk_[l];
    for (size_t j = l; j < b.size(); ++j) {
      s = pda_.step(s, static_cast<uint8_t>(b[j]));
      if (s == Pda::kDead) {
        dead_len = j + 1;
        break;
      }
      walk_[j + 1] = s;
    }
    if (s != Pda::kDead) mask[m.dependent[k] >> 6] |= uint64_t{1} << (m.dependent[k] & 63);
  }
}

}  // namespace sluice::grammar
