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
  if (!g_->grammar().unique_close.empty()) {
    unique_close_.assign(g_->grammar().elems.size(), 0);
    for (uint32_t p : g_->grammar().unique_close) unique_close_[p] = 1;
    text_len_.push_back(0);
  }
}

bool Matcher::is_complete() const { return history_.back() != kTerminated && pda_.has_empty_stack(history_.back()); }

bool Matcher::only_end() const { return is_complete() && pda_.stacks(history_.back()).size() == 1; }

// track: where the tracker after the token goes (advance); nullptr for a check.
uint32_t Matcher::next_state(int32_t token, ItemTracker* track) {
  const uint32_t cur = history_.back();
  if (cur == kTerminated || token < 0 || token >= g_->vocab().n_vocab()) return Pda::kDead;
  if (g_->vocab().is_eog(token)) return pda_.has_empty_stack(cur) ? kTerminated : Pda::kDead;
  const std::string_view piece = g_->vocab().piece(token);
  uint32_t by_bytes = Pda::kDead;
  if (!piece.empty()) by_bytes = unique_close_.empty() ? pda_.step_bytes(cur, piece) : step_checked(cur, piece, track);
  return pda_.merge(by_bytes, pda_.step_token(cur, token));
}

// Steps the bytes of a piece, dropping the parses that would close a duplicate item.
uint32_t Matcher::step_checked(uint32_t state, std::string_view piece, ItemTracker* track) {
  // An item can end in this piece only at a ',', ']', '}' or '"' inside an array.
  const bool may_end = piece.find_first_of(kItemEndBytes) != std::string_view::npos &&
                       (track_.in_array() || piece.find('[') != std::string_view::npos);
  // ... or become an integer that can only end as a duplicate.
  const bool integer = track_.in_array() && piece.find_first_of(kIntegerBytes) != std::string_view::npos;
  if (!track && !may_end && !integer) return pda_.step_bytes(state, piece);
  ItemTracker t = track_;
  for (unsigned char c : piece) {
    if (t.closes_duplicate(c)) state = pda_.without_tops(state, unique_close_);  // a number item
    if (state != Pda::kDead) state = pda_.step(state, c);
    if (state == Pda::kDead) return state;
    t.feed(c);
    if (t.dead_integer_prefix()) return Pda::kDead;
    if (t.completed_duplicate()) state = pda_.without_tops(state, unique_close_);
    if (state == Pda::kDead) return state;
  }
  if (track) *track = std::move(t);
  return state;
}

bool Matcher::accepts(int32_t token) { return next_state(token) != Pda::kDead; }

bool Matcher::advance(int32_t token) {
  ItemTracker t;
  const uint32_t next = next_state(token, unique_close_.empty() ? nullptr : &t);
  if (next == Pda::kDead) return false;
  history_.push_back(next);
  if (!unique_close_.empty()) {
    if (next != kTerminated) {
      track_ = std::move(t);
      text_ += g_->vocab().piece(token);
    }
    text_len_.push_back(text_.size());
  }
  return true;
}

void Matcher::rollback(size_t n) {
  if (n > n_tokens()) fail("grammar matcher: cannot roll back %zu tokens, only %zu accepted", n, n_tokens());
  history_.resize(history_.size() - n);
  if (!unique_close_.empty() && n > 0) {  // the tracker is rebuilt from the text
    text_len_.resize(history_.size());
    text_.resize(text_len_.back());
    track_.reset();
    for (unsigned char c : text_) track_.feed(c);
  }
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
  if (!unique_close_.empty()) drop_duplicates(mask);
}

// The position tables know nothing of earlier items: tokens that may close one are checked
// against the tracker.
void Matcher::drop_duplicates(std::span<uint64_t> mask) {
  for (int32_t id : g_->delimiter_tokens())
    if (((mask[id >> 6] >> (id & 63)) & 1) && !accepts(id)) mask[id >> 6] &= ~(uint64_t{1} << (id & 63));
  if (!track_.in_number_context()) return;
  for (int32_t id : g_->integer_tokens())
    if (((mask[id >> 6] >> (id & 63)) & 1) && !accepts(id)) mask[id >> 6] &= ~(uint64_t{1} << (id & 63));
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
