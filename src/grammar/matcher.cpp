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
  const Grammar& gr = g_->grammar();
  tracked_ = !gr.unique_close.empty() || !gr.unique_values.empty();
  if (tracked_) text_len_.push_back(0);
  if (!gr.unique_close.empty()) {
    unique_close_.assign(gr.elems.size(), 0);
    for (uint32_t p : gr.unique_close) unique_close_[p] = 1;
  }
  if (!gr.unique_values.empty()) {
    value_first_.assign(gr.elems.size(), -1);
    value_comma_.assign(gr.elems.size(), -1);
    for (size_t k = 0; k < gr.unique_values.size(); ++k) {
      const auto& u = gr.unique_values[k];
      for (size_t i = 0; i < u.first.size(); ++i) value_first_[u.first[i]] = static_cast<int64_t>(k << 32 | i);
      value_comma_[u.comma] = static_cast<int32_t>(k);
    }
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
  if (!piece.empty()) by_bytes = !tracked_ ? pda_.step_bytes(cur, piece) : step_checked(cur, piece, track);
  return pda_.merge(by_bytes, pda_.step_token(cur, token));
}

// Steps the bytes of a piece, dropping the parses that would close a duplicate item.
uint32_t Matcher::step_checked(uint32_t state, std::string_view piece, ItemTracker* track) {
  // An item can end in this piece only at a ',', ']', '}' or '"' inside an array.
  const bool may_end = piece.find_first_of(kItemEndBytes) != std::string_view::npos &&
                       (track_.in_array() || piece.find('[') != std::string_view::npos);
  // ... or become an integer that can only end as a duplicate.
  const bool integer = track_.in_array() && piece.find_first_of(kIntegerBytes) != std::string_view::npos;
  // ... or reach an item of a unique array over a set of values.
  const bool values = !value_first_.empty() && (track_.in_array() || piece.find('[') != std::string_view::npos);
  if (!track && !may_end && !integer && !values) return pda_.step_bytes(state, piece);
  const bool items = !unique_close_.empty();
  ItemTracker t = track_;
  for (unsigned char c : piece) {
    if (items && t.closes_duplicate(c)) state = pda_.without_tops(state, unique_close_);  // a number item
    if (c == ',' && !value_comma_.empty()) state = drop_last_comma(state, t);
    const bool unique_comma = items && c == ',' && t.item_open() && pda_.any_top(state, unique_close_);
    if (state != Pda::kDead) state = pda_.step(state, c);
    if (state == Pda::kDead) return state;
    t.feed(c, unique_comma);
    if (items && t.dead_integer_prefix()) return Pda::kDead;
    if (items && t.completed_duplicate()) state = pda_.without_tops(state, unique_close_);
    if (!value_first_.empty()) state = drop_written_values(state, t);
    if (state == Pda::kDead) return state;
  }
  if (track) *track = std::move(t);
  return state;
}

// After a byte: the parses about to write the first byte of a value the innermost array
// already holds.
uint32_t Matcher::drop_written_values(uint32_t state, const ItemTracker& t) {
  if (!t.between_items()) return state;
  const auto& groups = g_->grammar().unique_values;
  const auto& items = t.items();
  return pda_.without_top_if(state, [&](uint32_t pos) {
    if (pos >= value_first_.size() || value_first_[pos] < 0) return false;
    const auto v = static_cast<uint64_t>(value_first_[pos]);
    const std::string& c = groups[v >> 32].canonical[v & 0xffffffffu];
    return std::find(items.begin(), items.end(), c) != items.end();
  });
}

// Before a ',' that would close the current item: the parses of an array over a set of values
// whose every value is written once this item is counted (items are distinct values of the
// set, so a count tells), which would be left with no next item.
uint32_t Matcher::drop_last_comma(uint32_t state, const ItemTracker& t) {
  if (!t.item_open()) return state;
  const auto& groups = g_->grammar().unique_values;
  const size_t written = t.items().size() + 1;
  return pda_.without_top_if(state, [&](uint32_t pos) {
    return pos < value_comma_.size() && value_comma_[pos] >= 0 && groups[value_comma_[pos]].canonical.size() <= written;
  });
}

bool Matcher::accepts(int32_t token) { return next_state(token) != Pda::kDead; }

bool Matcher::advance(int32_t token) {
  ItemTracker t;
  const uint32_t next = next_state(token, tracked_ ? &t : nullptr);
  if (next == Pda::kDead) return false;
  history_.push_back(next);
  if (tracked_) {
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
  if (tracked_ && n > 0) {  // the tracker is rebuilt from the text
    text_len_.resize(history_.size());
    text_.resize(text_len_.back());
    const std::vector<size_t> marks = track_.unique_commas();
    track_.reset();
    for (size_t i = 0; i < text_.size(); ++i)
      track_.feed(static_cast<uint8_t>(text_[i]), std::binary_search(marks.begin(), marks.end(), i));
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
  if (tracked_) drop_duplicates(mask);
}

// The position tables know nothing of earlier items: tokens that may close one are checked
// against the tracker.
void Matcher::drop_duplicates(std::span<uint64_t> mask) {
  // A token still allowed that the tracker refuses leaves the mask.
  const auto check = [&](int32_t id) {
    if (((mask[id >> 6] >> (id & 63)) & 1) && !accepts(id)) mask[id >> 6] &= ~(uint64_t{1} << (id & 63));
  };
  for (int32_t id : g_->vocab().delimiter_tokens()) check(id);
  // Between items, a token that starts with whitespace walks from the whitespace's parse to
  // item first bytes the position tables never dropped.
  if (!value_first_.empty() && track_.between_items()) {
    const auto& ws = g_->vocab().ws_led_tokens();
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint64_t bits = mask[w] & ws[w]; bits; bits &= bits - 1)
        check(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
  }
  if (!track_.in_number_context()) return;
  for (int32_t id : g_->vocab().integer_tokens()) check(id);
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
