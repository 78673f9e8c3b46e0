// Continuous batching. Each step gives every running sequence a number of tokens to compute
// under one token budget — a decode is 1, a prefill chunk is up to the budget left — then
// admits waiting sequences with what remains (docs/conventions.md §3: no prefill or decode phase,
// only "tokens still to compute").
//
//   schedule():  running sequences, oldest first: min(pending, budget left) tokens each.
//                If a sequence's blocks cannot be reserved, the newest running sequence is
//                preempted (its blocks freed, its tokens kept, recomputed later) until they
//                can; a sequence that cannot grow even alone ends with kLength.
//                Then waiting sequences, FIFO (preempted ones first), while fewer than
//                max_running run: prefix-cache lookup, then a reservation for their chunk.
//                A decoding sequence may carry drafts, a prefix of its Sequence::proposal
//                (written after the previous step, EngineCore::propose): its slice is
//                [last sampled, d1..dK], K+1 tokens of the budget, with blocks reserved for
//                all of them (or, if they do not fit, a plain 1-token slice).
//   update():    advances n_computed, appends sampled tokens and finishes sequences on a stop
//                id, max_tokens or the end of the context. With drafts: keeps the accepted
//                ones, drops the rest and truncates the KV to the accepted positions (blocks
//                past them freed, the cut block unpublished), then publishes only full
//                blocks of accepted tokens. A stop inside an accepted run ends the output,
//                the KV and the counts at that token. Sliding-window release happens only at
//                schedule time, below the first query, so a rollback never needs a released
//                block. A finished keep_kv sequence parks its blocks (take_parked).
// The scheduler owns the sequences and their blocks; it never touches logits or text. A
// finished sequence's blocks and proposer state are freed at once; the Sequence itself lives
// until release_finished(), so a step's batch stays readable until the step ends.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/sequence.h"
#include "kv/block_manager.h"
#include "spec/policy.h"

namespace sluice::engine {

// A proposer outside the engine (tests, `sluice bench --spec-verify`, the tuner): given a
// decoding sequence's tokens (prompt + generated, the last one sampled but not yet computed),
// write at most k_max guesses of the tokens that follow it to `drafts` (fewer or none is fine).
// A shorter k_max must give a prefix of a longer one's guesses (the scheduler trims).
using DraftHook =
    std::function<void(RequestId id, std::span<const int32_t> tokens, int32_t k_max, std::vector<int32_t>& drafts)>;

struct SchedulerConfig {
  int32_t max_running = 4;     // sequences in one batch (--parallel)
  int32_t token_budget = 256;  // tokens computed per step, decodes and prefill chunks together
  int32_t ctx_size = 4096;     // positions one sequence may use (prompt + generated)
  // Speculative steps: a decoding sequence (not all_logits) may carry up to draft_max drafted
  // tokens after its last sampled one; they cost budget like any token. Drafts come from the
  // sequence's proposal (EngineConfig::spec), else from `draft_hook`.
  int32_t draft_max = 0;
  DraftHook draft_hook;
  // policy.adaptive: each step, each sequence's draft length is chosen by spec::StepPlanner
  // from its recent acceptance and the step's cost curve (src/spec/policy.h); otherwise it
  // drafts up to draft_max (or its request's own cap).
  spec::DraftPolicy policy;
};

struct ScheduledSlice {
  Sequence* seq = nullptr;
  int32_t pos0 = 0;  // first position computed (= seq->n_computed)
  int32_t n_tokens = 0;
  bool sample = false;  // the slice reaches the sequence's last token: sample the next
  int32_t n_draft = 0;  // its last n_draft tokens are drafts (appended to seq->tokens) to verify
  DraftOrigin draft_origin = DraftOrigin::kOther;  // the proposal's
};

struct ScheduledBatch {
  std::vector<ScheduledSlice> slices;
  int32_t n_tokens = 0;
  bool empty() const { return slices.empty(); }
};

struct SchedulerCounters {
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t prompt_tokens_computed = 0;  // prefill work actually done (cache hits excluded)
  int64_t generated_tokens = 0;
  int64_t drafted_tokens = 0;   // drafts verified
  int64_t accepted_tokens = 0;  // of which the target agreed with
  // The same for the drafts a copying proposer took from the prompt, and from the output.
  int64_t drafted_prompt = 0, accepted_prompt = 0, drafted_output = 0, accepted_output = 0;
  // Per draft position i = 1 .. draft_max (index i − 1): how often a draft stood there, and
  // how often it was accepted.
  std::vector<int64_t> drafted_at, accepted_at;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, BlockManager& blocks);
  ~Scheduler();

  const SchedulerConfig& config() const { return cfg_; }
  void add(std::unique_ptr<Sequence> seq);
  // Removes a request wherever it is and frees its blocks; emits its kAbort output.
  // Unknown ids (already finished) are ignored.
  void abort(RequestId id, std::vector<TokenOutput>& out);
  void abort_all(FinishReason why, std::vector<TokenOutput>& out);

  ScheduledBatch schedule(std::vector<TokenOutput>& out);
  void update(const ScheduledBatch& batch, std::span<const SliceSample> sampled, std::vector<TokenOutput>& out);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  std::span<Sequence* const> running() const { return running_; }  // ascending arrival
  const SchedulerCounters& counters() const { return counters_; }
  const Sequence* find(RequestId id) const;
  // Most drafts a decoding sequence may carry in a step with `budget` tokens left: room for
  // them and the target's token after them in the budget, the context and the request's
  // token limit, under the request's own cap and draft_max (the policy may take fewer).
  int32_t draft_room(const Sequence& s, int32_t budget) const;

  // The K/V a keep_kv request left behind: its tokens with K/V and their blocks (moved out;
  // the caller owns them now). False when there are none under that id.
  bool take_parked(RequestId id, std::vector<int32_t>& tokens, SeqBlocks& blocks);
  void release_parked(RequestId id);  // frees them; unknown ids are ignored
  // Destroys the sequences finished since the last call (their batch's pointers dangle after).
  void release_finished() { finished_.clear(); }

 private:
  void preempt(Sequence* s);
  void finish(Sequence* s, FinishReason why, std::vector<TokenOutput>& out, TokenOutput* last = nullptr);
  void remove_running(Sequence* s);
  void insert_running(Sequence* s);
  bool try_admit(Sequence* s, int32_t budget, ScheduledBatch& batch);
  int32_t fit_soft_blocks(const Sequence* s, int32_t n) const;
  // Whether s takes from and adds to the prefix cache, and the ids its blocks are hashed over:
  // its tokens, with a keyed prompt (Sequence::keyed_prompt) in front when it has images.
  static bool cacheable(const Sequence* s) { return !s->req.soft || !s->keyed_prompt.empty(); }
  std::span<const int32_t> cache_ids(const Sequence* s);
  // A cache hit that ends inside a bidirectional image (soft->blocks) is cut back to the
  // image's start, so the image is computed whole in one chunk. Returns the positions kept.
  int32_t whole_images(Sequence* s);
  int32_t add_drafts(Sequence* s, int32_t budget, spec::StepPlanner* plan);
  spec::StepPlanner plan_step() const;  // the step before drafts: the tokens it will compute
  double batch_pace() const;            // StepPlanner's pace: the lowest yield rate, when nothing waits
  // With no drafts this step and a cheap proposal: score up to k of its tokens unverified.
  void start_shadow(Sequence* s, int32_t k);
  void drop_drafts(Sequence* s, int32_t n_draft);
  // Applies one slice's verified tokens; false when the sequence finished.
  bool accept(const ScheduledSlice& sl, const SliceSample& ss, std::vector<TokenOutput>& out);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  std::vector<std::unique_ptr<Sequence>> finished_;  // until release_finished()
  std::vector<Sequence*> running_;                   // ascending arrival: the back is the newest
  std::deque<Sequence*> waiting_;
  struct Parked {
    std::vector<int32_t> tokens;  // those with K/V: [0, n_computed) of the finished sequence
    SeqBlocks blocks;
  };
  std::unordered_map<RequestId, Parked> parked_;
  SchedulerCounters counters_;
  std::vector<int32_t> keyed_scratch_;  // cache_ids of a sequence with images
};

}  // namespace sluice::engine
