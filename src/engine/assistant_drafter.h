// `--spec assistant`: Gemma 4's assistant (models/gemma4/assistant.h) behind the engine's
// BatchDrafter hook. No KV of its own: it reads the target's cache, so a sequence's whole
// drafting state is the target's post-norm hidden state h of its last accepted position
// (kept from the verification step that produced it, ModelRunner's hidden rows) and the
// number of target positions it belongs to.
//
// Per round, for every decoding sequence whose h is current (its position == n_computed):
// step 1 drafts from (last sampled token t, h), steps 2..k_max from (previous draft, h'),
// all at the constant position n_computed, batched across sequences; drafts are argmax
// (the centroid head's by default). With p_min > 0 a sequence stops at the first draft its
// head gives a probability below p_min (DraftStepOut::argmax_probability); that draft is not
// proposed. A sequence whose h is stale (just resumed after a
// preemption, a prefix-cache resume) proposes nothing this step; its next verified row
// brings h back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/batch_drafter.h"
#include "models/gemma4/assistant.h"

namespace sluice::engine {

// Cached positions below the target's window the assistant reads: its query at n sees
// n − window − 1 .. n − 1, the target's next one n − window + 1 .. n.
inline constexpr int32_t kAssistantWindowMargin = 2;

struct AssistantDrafterStats {
  int64_t rounds = 0;       // draft() calls with at least one drafting sequence
  int64_t steps = 0;        // assistant passes
  int64_t rows = 0;         // Σ rows over the passes
  int64_t stale_skips = 0;  // candidates without a current hidden state
  int64_t p_min_stops = 0;  // drafts withheld below p_min (each ends its sequence's round)
};

class AssistantDrafter final : public BatchDrafter {
 public:
  // `target_kv` is the target's cache (the assistant reads it); `head` the draft head;
  // `p_min` in [0, 1] (sluice::Error otherwise).
  AssistantDrafter(models::Gemma4Assistant& assistant, KvCache& target_kv, models::DraftHead head, float p_min = 0.0f);
  ~AssistantDrafter() override;

  std::unique_ptr<spec::Drafter> make_drafter(const Sequence& s) override;
  void draft(std::span<const DraftCandidate> candidates) override;
  void on_verified(const ScheduledBatch& batch, std::span<const SliceSample> sampled,
                   const HiddenRows& hidden) override;
  bool wants_hidden() const override { return true; }
  int32_t window_margin() const override { return kAssistantWindowMargin; }
  const AssistantDrafterStats& stats() const { return stats_; }
  // Called with each sequence's proposal of a round (for tests and tracing): its final
  // tokens, the target positions computed (the draft position) and the drafts.
  using ProposalHook = std::function<void(const Sequence&, std::span<const int32_t>)>;
  void set_on_proposal(ProposalHook hook) { on_proposal_ = std::move(hook); }

 private:
  class SeqState;
  models::Gemma4Assistant& asst_;
  KvCache& kv_;
  models::DraftHead head_;
  float p_min_;
  AssistantDrafterStats stats_;
  ProposalHook on_proposal_;
  std::vector<const Sequence*> row_owner_;  // per first-step row, for on_proposal_
  // Step state, reused.
  std::vector<models::DraftRow> rows_;
  std::vector<SeqState*> row_seq_;
  std::vector<int32_t> row_kmax_;
  std::vector<float> h_;
  models::DraftStepOut out_;
};

}  // namespace sluice::engine
