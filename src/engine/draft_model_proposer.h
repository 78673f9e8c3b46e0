// `--spec draft`: a smaller model with the target's vocabulary drafts greedily, batched over
// every decoding sequence, with its own paged KV (its own KvCache and BlockManager, no prefix
// cache). One proposal round (BatchProposer::propose, after a target step) is:
//   1. catch-up: one batched forward per chunk computes, for every slot, the tokens the
//      draft has no K/V for yet (the whole prompt the first time, then the target's accepted
//      run and its own token); the last row's argmax is d1;
//   2. K − 1 batched single-token forwards: d_i at its position gives d_{i+1}.
// Each sequence's draft K/V covers the tokens in its `kv_tokens` list, drafts included. At the
// next round that list is cut to its longest common prefix with the sequence's final tokens
// (BlockManager::truncate): what the target rejected is rolled back, what it accepted is
// kept, and nothing of the verification step itself is recomputed. A sequence the draft's
// pool cannot hold this round gets no drafts (the target decodes it plainly); the target's
// preemption, finish and abort free the draft's blocks with the per-sequence state.
//
// Greedy drafts are point masses, so verification is spec::accept_matching and the output is
// bitwise the plain output (docs/speculative.md). With p_min > 0 a sequence stops drafting at
// the first draft token whose probability under the draft (softmax of its raw logits) is
// below p_min; that token is not proposed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/proposer.h"
#include "kv/block_manager.h"
#include "models/model.h"

namespace sluice::engine {

struct DraftModelConfig {
  int32_t chunk = 256;  // most tokens of one sequence in one catch-up forward (the target's token budget)
  float p_min = 0.0f;   // in [0, 1]; 0: always draft the k_max tokens asked for
};

struct DraftModelStats {
  int64_t forwards = 0;         // draft forward() calls
  int64_t tokens_computed = 0;  // positions the draft computed (catch-up and drafts)
  int64_t proposed = 0;         // tokens proposed
  int64_t no_room = 0;          // times a sequence got no drafts for want of draft blocks
};

class DraftModelProposer final : public BatchProposer {
 public:
  // `draft` and `kv` (laid out for draft.spec().kv_groups) outlive this object; the target's
  // vocabulary size must be the draft's (the texts: tok::check_same_vocabulary, which the
  // caller runs on the two files).
  DraftModelProposer(models::Model& draft, KvCache& kv, int32_t target_n_vocab, const DraftModelConfig& cfg);
  ~DraftModelProposer() override;

  std::unique_ptr<ProposerState> make_state(const Sequence& s) override;
  void propose(std::span<const ProposeSlot> slots) override;

  BlockManager& blocks() { return blocks_; }
  const DraftModelStats& stats() const { return stats_; }

 private:
  class SeqKv;
  struct Active {
    Sequence* seq;
    SeqKv* st;
    int32_t k_max;
  };
  void sync(Active& a);         // rolls the draft's K/V back to what the sequence still has
  void catch_up();              // step 1 above, over active_
  void extend(int32_t k_step);  // one forward of step 2: drafts number k_step + 1
  void take(Active& a, const float* row);
  void run_forward();  // fb_ → logits_

  models::Model& model_;
  BlockManager blocks_;
  DraftModelConfig cfg_;
  DraftModelStats stats_;
  SeqStates<SeqKv> states_;
  std::vector<Active> active_;  // this round's slots still drafting
  std::vector<Active*> in_batch_;
  models::ForwardBatch fb_;
  std::vector<float> logits_;
};

}  // namespace sluice::engine
