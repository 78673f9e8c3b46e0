#include "engine/assistant_proposer.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace sluice::engine {

AssistantProposer::AssistantProposer(models::Gemma4Assistant& assistant, KvCache& target_kv, models::DraftHead head,
                                     float p_min)
    : asst_(assistant), kv_(target_kv), head_(head), p_min_(p_min) {
  if (!(p_min >= 0.0f && p_min <= 1.0f)) fail("--draft-p-min must be in [0, 1], got %g", p_min);
}

AssistantProposer::~AssistantProposer() = default;

std::unique_ptr<ProposerState> AssistantProposer::make_state(const Sequence& s) {
  (void)s;
  return nullptr;  // h comes with every round; the K/V is the target's
}

void AssistantProposer::propose(std::span<const ProposeSlot> slots) {
  const int64_t dt = asst_.spec().n_embd_target;
  rows_.clear();
  row_seq_.clear();
  row_kmax_.clear();
  h_.resize(slots.size() * static_cast<size_t>(dt));  // never reallocated below: rows point in
  for (const ProposeSlot& slot : slots) {
    Sequence& s = *slot.seq;
    s.proposal.clear();
    s.proposal.for_n_tokens = s.n_tokens();
    if (slot.hidden == nullptr) {
      ++stats_.stale_skips;
      continue;
    }
    models::DraftRow r;
    r.token = s.tokens.back();
    std::memcpy(&h_[rows_.size() * dt], slot.hidden, 4 * static_cast<size_t>(dt));
    r.hidden = &h_[rows_.size() * dt];
    r.pos = s.n_computed;
    for (int32_t g = 0; g < kv_.n_groups(); ++g) r.block_tables[g] = s.blocks.tables[g];
    rows_.push_back(r);
    row_seq_.push_back(&s);
    row_kmax_.push_back(slot.k_max);
  }
  if (rows_.empty()) return;
  ++stats_.rounds;
  for (int32_t k = 0; !rows_.empty(); ++k) {
    asst_.step(rows_, kv_, head_, out_);
    ++stats_.steps;
    stats_.rows += static_cast<int64_t>(rows_.size());
    // Keep the rows that want more drafts, in order, with (draft, h') as their next input.
    size_t n = 0;
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (p_min_ > 0.0f && !(out_.argmax_probability(static_cast<int64_t>(i), asst_.spec().n_vocab) >= p_min_)) {
        ++stats_.p_min_stops;
        continue;
      }
      row_seq_[i]->proposal.tokens.push_back(out_.argmax[i]);
      if (k + 1 >= row_kmax_[i]) continue;
      rows_[n] = rows_[i];
      rows_[n].token = out_.argmax[i];
      std::memcpy(&h_[n * dt], &out_.next_hidden[i * dt], 4 * static_cast<size_t>(dt));
      rows_[n].hidden = &h_[n * dt];
      row_seq_[n] = row_seq_[i];
      row_kmax_[n] = row_kmax_[i];
      ++n;
    }
    rows_.resize(n);
    row_seq_.resize(n);
    row_kmax_.resize(n);
  }
}

}  // namespace sluice::engine
