#include "engine/assistant_drafter.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace sluice::engine {

// One sequence: its tokens count (the spec::Drafter bookkeeping), the target's hidden state
// of its last accepted position and that position + 1, and this step's proposal.
class AssistantDrafter::SeqState final : public spec::Drafter {
 public:
  explicit SeqState(int64_t width) : h(static_cast<size_t>(width)) {}
  void observe(std::span<const int32_t> tokens) override { n_ += static_cast<int64_t>(tokens.size()); }
  void propose(int32_t max_k, spec::Draft& out) override {
    out.clear();
    if (proposal_for == n_)
      for (int32_t i = 0; i < std::min<int32_t>(max_k, static_cast<int32_t>(proposal.size())); ++i)
        out.push(proposal[i]);
    proposal.clear();
  }
  void truncate(int64_t n_tokens) override {
    n_ = n_tokens;
    proposal.clear();
    if (hidden_pos >= n_tokens) hidden_pos = -1;  // h belongs to a position that is gone
  }
  void reset() override {
    n_ = 0;
    proposal.clear();
    hidden_pos = -1;
  }
  int64_t n_tokens() const override { return n_; }

  std::vector<float> h;
  int64_t hidden_pos = -1;    // target positions h drafts from (h is the row at hidden_pos − 1)
  int64_t proposal_for = -1;  // the token count the proposal continues
  std::vector<int32_t> proposal;

 private:
  int64_t n_ = 0;
};

AssistantDrafter::AssistantDrafter(models::Gemma4Assistant& assistant, KvCache& target_kv, models::DraftHead head,
                                   float p_min)
    : asst_(assistant), kv_(target_kv), head_(head), p_min_(p_min) {
  if (!(p_min >= 0.0f && p_min <= 1.0f)) fail("--draft-p-min must be in [0, 1], got %g", p_min);
}

AssistantDrafter::~AssistantDrafter() = default;

std::unique_ptr<spec::Drafter> AssistantDrafter::make_drafter(const Sequence& s) {
  (void)s;
  return std::make_unique<SeqState>(asst_.spec().n_embd_target);
}

void AssistantDrafter::draft(std::span<const DraftCandidate> candidates) {
  const int64_t dt = asst_.spec().n_embd_target;
  rows_.clear();
  row_owner_.clear();
  row_seq_.clear();
  row_kmax_.clear();
  h_.resize(candidates.size() * static_cast<size_t>(dt));  // never reallocated below: rows point in
  for (const DraftCandidate& c : candidates) {
    // An engine with this hook gives every drafting sequence a SeqState (make_drafter).
    auto* st = static_cast<SeqState*>(c.seq->drafter.get());
    st->proposal.clear();
    if (st->hidden_pos != c.seq->n_computed) {
      ++stats_.stale_skips;
      continue;
    }
    models::DraftRow r;
    r.token = c.seq->tokens.back();
    std::memcpy(&h_[rows_.size() * dt], st->h.data(), 4 * static_cast<size_t>(dt));
    r.hidden = &h_[rows_.size() * dt];
    r.pos = c.seq->n_computed;
    for (int32_t g = 0; g < kv_.n_groups(); ++g) r.block_tables[g] = c.seq->blocks.tables[g];
    st->proposal_for = c.seq->n_tokens();
    rows_.push_back(r);
    row_owner_.push_back(c.seq);
    row_seq_.push_back(st);
    row_kmax_.push_back(c.k_max);
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
      row_seq_[i]->proposal.push_back(out_.argmax[i]);
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
  if (on_proposal_)
    for (const Sequence* s : row_owner_) on_proposal_(*s, static_cast<const SeqState*>(s->drafter.get())->proposal);
}

void AssistantDrafter::on_verified(const ScheduledBatch& batch, std::span<const SliceSample> sampled,
                                   const HiddenRows& hidden) {
  const int64_t dt = asst_.spec().n_embd_target;
  if (hidden.data == nullptr || hidden.width != dt) return;
  size_t j = 0;
  for (size_t i = 0; i < batch.slices.size(); ++i) {
    const ScheduledSlice& sl = batch.slices[i];
    if (!sl.sample) continue;
    const SliceSample& ss = sampled[j++];
    if (!sl.seq->drafter || sl.seq->req.all_logits) continue;
    auto* st = static_cast<SeqState*>(sl.seq->drafter.get());
    // The last accepted position computed: before the drafts, then one per accepted draft.
    const int64_t accepted = static_cast<int64_t>(ss.tokens.size()) - 1;
    const int64_t next_pos = sl.pos0 + sl.n_tokens - sl.n_draft + accepted;
    const int64_t row = hidden.first_row[i] + (sl.n_draft > 0 ? next_pos - 1 - sl.pos0 : 0);
    std::memcpy(st->h.data(), hidden.data + row * dt, 4 * static_cast<size_t>(dt));
    st->hidden_pos = next_pos;
  }
}

}  // namespace sluice::engine
