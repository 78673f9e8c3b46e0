// `--spec assistant`: Gemma 4's assistant (models/gemma4/assistant.h) as the engine's
// BatchProposer. No KV and no state of its own: it reads the target's cache, and drafts from
// the target's post-norm hidden state h of each sequence's last computed position, which the
// step that just computed it hands over (ProposeSlot::hidden).
//
// Per round, for every slot with h: step 1 drafts from (last sampled token t, h), steps
// 2..k_max from (previous draft, h'), all at the constant position n_computed, batched across
// sequences; drafts are argmax (the centroid head's by default). With p_min > 0 a sequence
// stops at the first draft its head gives a probability below p_min
// (DraftStepOut::argmax_probability); that draft is not proposed. A slot without h proposes
// nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/proposer.h"
#include "models/gemma4/assistant.h"

namespace sluice::engine {

// Cached positions below the target's window the assistant reads: its query at n sees
// n − window − 1 .. n − 1, the target's next one n − window + 1 .. n.
inline constexpr int32_t kAssistantWindowMargin = 2;

struct AssistantProposerStats {
  int64_t rounds = 0;       // propose() calls with at least one drafting sequence
  int64_t steps = 0;        // assistant passes
  int64_t rows = 0;         // Σ rows over the passes
  int64_t stale_skips = 0;  // slots without a hidden row
  int64_t p_min_stops = 0;  // drafts withheld below p_min (each ends its sequence's round)
};

class AssistantProposer final : public BatchProposer {
 public:
  // `target_kv` is the target's cache (the assistant reads it); `head` the draft head;
  // `p_min` in [0, 1] (sluice::Error otherwise).
  AssistantProposer(models::Gemma4Assistant& assistant, KvCache& target_kv, models::DraftHead head, float p_min = 0.0f);
  ~AssistantProposer() override;

  std::unique_ptr<ProposerState> make_state(const Sequence& s) override;
  void propose(std::span<const ProposeSlot> slots) override;
  bool wants_hidden() const override { return true; }
  int32_t window_margin() const override { return kAssistantWindowMargin; }
  const AssistantProposerStats& stats() const { return stats_; }

 private:
  models::Gemma4Assistant& asst_;
  KvCache& kv_;
  models::DraftHead head_;
  float p_min_;
  AssistantProposerStats stats_;
  // Round state, reused.
  std::vector<models::DraftRow> rows_;
  std::vector<Sequence*> row_seq_;
  std::vector<int32_t> row_kmax_;
  std::vector<float> h_;
  models::DraftStepOut out_;
};

}  // namespace sluice::engine
