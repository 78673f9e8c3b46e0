// The engine's hook for drafters that run batched model forwards inside an engine step (a
// draft model, Gemma 4's assistant). The n-gram drafter needs no hook: it proposes from the
// tokens alone. A model drafter proposes for every decoding sequence at once, so its forward
// passes are batched across sequences like the target's.
//
// Lifecycle, per engine step (EngineCore::step):
//   1. draft(candidates)  before Scheduler::schedule(). Candidates are the running sequences
//      about to decode — exactly one uncomputed token (the last sampled one), not all_logits,
//      with a drafter of this hook — each with k_max = min(draft_max, token_budget − 1,
//      ctx_size − n_tokens − 1, max_tokens − n_generated − 1) >= 1. The hook runs its batched
//      passes and leaves up to k_max tokens in each sequence's own spec::Drafter, whose
//      propose() the scheduler calls next. The scheduler may take fewer (budget, KV blocks) or
//      none; a proposal not taken in this step is dropped.
//   2. schedule → ModelRunner::execute → on_verified(batch, sampled) → Scheduler::update.
//      on_verified sees each slice with its verified tokens (sampled[i] for the i-th slice with
//      sample = true: accepted drafts + the target's token) while every Sequence* is still
//      valid (update may finish and destroy sequences). A drafter that needs the target's
//      state of the last accepted row (the assistant: post-norm hidden row, the block tables
//      in seq->blocks) reads it here.
//   3. Rollback, finish, preemption, abort reach the per-sequence spec::Drafter: the scheduler
//      truncate()s/observe()s it to the sequence's final tokens before propose(), reset()s it
//      on preemption (free the drafter's own KV blocks there) and destroys it with the
//      sequence on finish or abort (free them in the destructor). The hook must outlive the
//      EngineCore that uses it.
// A sequence's tokens during draft(): seq->tokens, final (no drafts appended), the last one
// not computed by the target; seq->n_tokens() == seq->n_computed + 1.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "spec/drafter.h"

namespace sluice::engine {

// The target's post-final-norm hidden rows of a step, for drafters that want them
// (wants_hidden()): logits row r of the step at data + r·width; slice i's rows start at
// first_row[i] (a verification slice has a row per position, a plain sampling slice one).
struct HiddenRows {
  const float* data = nullptr;
  int64_t width = 0;
  std::span<const int64_t> first_row;
};

struct DraftCandidate {
  Sequence* seq = nullptr;
  int32_t k_max = 0;  // >= 1: the most drafts the scheduler may take this step
};

class BatchDrafter {
 public:
  virtual ~BatchDrafter() = default;
  // The per-sequence state for a new sequence (EngineCore::add), or null: it never drafts.
  virtual std::unique_ptr<spec::Drafter> make_drafter(const Sequence& s) = 0;
  // Step 1 above: batched passes for every candidate (each seq->drafter is one of ours).
  virtual void draft(std::span<const DraftCandidate> candidates) = 0;
  // Step 2 above; sampled has one entry per slice with sample = true, in slice order;
  // hidden is empty unless wants_hidden().
  virtual void on_verified(const ScheduledBatch& batch, std::span<const SliceSample> sampled,
                           const HiddenRows& hidden) {
    (void)batch;
    (void)sampled;
    (void)hidden;
  }
  // Whether the target must export its hidden rows (ModelRunner::set_export_hidden).
  virtual bool wants_hidden() const { return false; }
  // Positions below the target's sliding window the drafter still reads
  // (BlockManager::set_window_margin).
  virtual int32_t window_margin() const { return 0; }
};

}  // namespace sluice::engine
