// Speculation's proposers, in one direction (vLLM v1's shape). After a step's update, the
// engine hands the step's output to one BatchProposer::propose call (EngineCore::propose):
// every sequence that decodes next, its final tokens, the most drafts the next step could take
// and, for proposers that want it, the target's hidden row of its last computed position from
// this step. The call writes each one's Sequence::proposal (tokens and origin); the next
// schedule() takes a prefix of it — the budget, the KV blocks and the draft-length policy decide
// how much — or none. Nothing calls back into a proposer before or after verification.
//
// The proposers: NgramProposer (prompt lookup, each sequence's own spec::NgramDrafter),
// HookProposer (SchedulerConfig::draft_hook, a function outside the engine), and the model
// proposers, whose forward passes are batched across sequences like the target's:
// DraftModelProposer (--spec draft) and AssistantProposer (--spec assistant).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "spec/ngram_drafter.h"

namespace sluice::engine {

// One sequence the next step may draft for.
struct ProposeSlot {
  // Running, its tokens final with one not computed (the last sampled):
  // seq->n_tokens() == seq->n_computed + 1.
  Sequence* seq = nullptr;
  // >= 1: Scheduler::draft_room with the whole token budget, an upper bound on what the
  // scheduler will take (draft_max, the context, max_tokens and the request's own cap).
  int32_t k_max = 0;
  // With wants_hidden(): the target's post-final-norm row at position n_computed − 1, computed
  // by this step (ModelRunner::hidden_rows); null when the step did not compute that position.
  const float* hidden = nullptr;
};

class BatchProposer {
 public:
  virtual ~BatchProposer() = default;
  // Its memory of a new sequence (EngineCore::add), or null when it keeps none. The state must
  // not outlive this proposer.
  virtual std::unique_ptr<ProposerState> make_state(const Sequence& s) = 0;
  // Writes slot.seq->proposal for every slot: up to k_max tokens (none is fine), for_n_tokens =
  // seq->n_tokens().
  virtual void propose(std::span<const ProposeSlot> slots) = 0;
  // Whether the target must export its hidden rows (ModelRunner::set_export_hidden).
  virtual bool wants_hidden() const { return false; }
  // Positions below the target's sliding window the proposer still reads
  // (BlockManager::set_window_margin).
  virtual int32_t window_margin() const { return 0; }
};

// The per-sequence states a proposer handed out, found by their sequence: a state registers
// itself when made and leaves when its sequence drops it. No state is ever cast back from
// Sequence::proposer.
template <class State>
class SeqStates {
 public:
  State* find(const Sequence* s) const {
    auto it = map_.find(s);
    return it == map_.end() ? nullptr : it->second;
  }
  void add(const Sequence* s, State* st) { map_[s] = st; }
  void remove(const Sequence* s) { map_.erase(s); }

 private:
  std::unordered_map<const Sequence*, State*> map_;
};

// --spec ngram: each sequence's own prompt-lookup index, fed the sequence's final tokens as they
// appear (never drafts). Its proposals are cheap, so the scheduler may score them unverified.
class NgramProposer final : public BatchProposer {
 public:
  explicit NgramProposer(const spec::NgramConfig& cfg);  // sluice::Error on a bad n range
  ~NgramProposer() override;
  std::unique_ptr<ProposerState> make_state(const Sequence& s) override;
  void propose(std::span<const ProposeSlot> slots) override;

 private:
  class State;
  spec::NgramConfig cfg_;
  SeqStates<State> states_;
  spec::Draft draft_;  // reused
};

// A DraftHook: called for each slot, its guesses cut at k_max.
class HookProposer final : public BatchProposer {
 public:
  explicit HookProposer(DraftHook hook) : hook_(std::move(hook)) {}
  std::unique_ptr<ProposerState> make_state(const Sequence& s) override;
  void propose(std::span<const ProposeSlot> slots) override;

 private:
  DraftHook hook_;
  std::vector<int32_t> drafts_;  // reused
};

}  // namespace sluice::engine
