// Continuous batching. Each step gives every running sequence a number of tokens to compute
// under one token budget — a decode is 1, a prefill chunk is up to the budget left — then
// admits waiting sequences with what remains (style.md §5.3: no prefill or decode phase,
// only "tokens still to compute").
//
//   schedule():  running sequences, oldest first: min(pending, budget left) tokens each.
//                If a sequence's blocks cannot be reserved, the newest running sequence is
//                preempted (its blocks freed, its tokens kept, recomputed later) until they
//                can; a sequence that cannot grow even alone ends with kLength.
//                Then waiting sequences, FIFO (preempted ones first), while fewer than
//                max_running run: prefix-cache lookup, then a reservation for their chunk.
//   update():    advances n_computed, publishes full blocks to the prefix cache, appends
//                sampled tokens and finishes sequences on a stop id, max_tokens or the end
//                of the context. A finished keep_kv sequence parks its blocks (take_parked).
// The scheduler owns the sequences and their blocks; it never touches logits or text.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/request.h"
#include "engine/sequence.h"
#include "kv/block_manager.h"

namespace sluice::engine {

struct SchedulerConfig {
  int32_t max_running = 4;      // sequences in one batch (--parallel)
  int32_t token_budget = 256;   // tokens computed per step, decodes and prefill chunks together
  int32_t ctx_size = 4096;      // positions one sequence may use (prompt + generated)
};

struct ScheduledSlice {
  Sequence* seq = nullptr;
  int32_t pos0 = 0;             // first position computed (= seq->n_computed)
  int32_t n_tokens = 0;
  bool sample = false;          // the slice reaches the sequence's last token: sample the next
};

struct ScheduledBatch {
  std::vector<ScheduledSlice> slices;
  int32_t n_tokens = 0;
  bool empty() const { return slices.empty(); }
};

// The runner's answer for one sampling slice (in slice order).
struct SampledToken {
  int32_t token = 0;
  std::optional<TokenLogprob> logprob;
  std::vector<TokenLogprob> top;
};

struct SchedulerCounters {
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t prompt_tokens_computed = 0;   // prefill work actually done (cache hits excluded)
  int64_t generated_tokens = 0;
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
  void update(const ScheduledBatch& batch, std::span<const SampledToken> sampled, std::vector<TokenOutput>& out);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  const SchedulerCounters& counters() const { return counters_; }
  const Sequence* find(RequestId id) const;

  // The K/V a keep_kv request left behind: its tokens with K/V and their blocks (moved out;
  // the caller owns them now). False when there are none under that id.
  bool take_parked(RequestId id, std::vector<int32_t>& tokens, SeqBlocks& blocks);
  void release_parked(RequestId id);   // frees them; unknown ids are ignored
  int32_t n_parked() const { return static_cast<int32_t>(parked_.size()); }

 private:
  void preempt(Sequence* s);
  void finish(Sequence* s, FinishReason why, std::vector<TokenOutput>& out, TokenOutput* last = nullptr);
  void remove_running(Sequence* s);
  void insert_running(Sequence* s);
  bool try_admit(Sequence* s, int32_t budget, ScheduledBatch& batch);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> running_;   // ascending arrival: the back is the newest
  std::deque<Sequence*> waiting_;
  struct Parked {
    std::vector<int32_t> tokens;   // those with K/V: [0, n_computed) of the finished sequence
    SeqBlocks blocks;
  };
  std::unordered_map<RequestId, Parked> parked_;
  SchedulerCounters counters_;
};

}  // namespace sluice::engine
