// Turns a ScheduledBatch into ONE Model::forward call — every running decode and every
// prefill chunk of the step together, so the weights are streamed once per step — and
// samples one token for each slice that reached its sequence's end. Slices of all_logits
// requests get every row; those rows go out as TokenOutputs before any sampling touches them.
// A slice ending in drafts gets a row per position; verify() samples them in order and stops
// at the first row whose token differs from the draft (greedy or sampled alike).
//
// Per sampled row: logprobs (when asked) are taken from the raw logits, before penalties,
// bans and temperature — the model's own distribution, as vLLM reports by default; then stop
// ids are banned while fewer than min_tokens were generated, and the request's banned ids
// always; then the sequence's Sampler.
//
// Grammar constraints (EngineRequest::constraint), per sequence inside the batched step:
// sample first from the row as above and ask the matcher whether it accepts the token; only
// when it does not, compute the full allowed-token mask and redraw, with the sampler's kGrammar
// number at the same position, from the row as it was before the penalties with every token
// outside the mask at -inf (few allowed ids: Sampler::distribution_over walks them only; many:
// the row is masked in place; the same distribution either way): greedy gets the masked argmax; sampling gets the
// masked distribution (exactly without truncation samplers; with top-k/top-p the first draw truncates the unmasked
// row). Where the grammar is complete (with stop_when_complete) a rejected draw instead ends the value with the first
// allowed end-of-generation stop id: every token outside the grammar counts as an end token, so a model that wants a
// newline after `42` stops rather than being pushed into more digits. Every choice is keyed by (seed, position), so
// batching, preemption and speculation do not change the tokens. The matcher advances on each token as it is sampled:
// in verification only the target's own tokens advance it, which are the drafts up to the first mismatch, so a rejected
// draft never enters it. A matcher error (no token allowed, a grammar limit hit by a deferred analysis) ends that
// request with kError; the step goes on.
//
// Sampling is per sequence and independent (each has its own sampler, matcher and keyed
// random numbers), so with a thread pool the step's sampling slices are shared out among the
// pool's workers, one slice at a time: a sampled 262,144-entry row costs about a millisecond,
// which eight streams would otherwise pay one after another on one core while the others
// wait. The tokens do not depend on which worker samples which slice.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <vector>

#include "engine/request.h"
#include "models/model.h"
#include "sampling/sampler.h"
#include "threading/thread_pool.h"

namespace sluice::engine {

struct ScheduledBatch;
struct ScheduledSlice;
struct Sequence;

// The runner's answer for one sampled token.
struct SampledToken {
  int32_t token = 0;
  // The request's grammar constraint is complete with this token (stop_when_complete): it
  // ends the request with kStop, the token kept as text.
  bool grammar_done = false;
  // The constraint failed at this step (no allowed token, a grammar limit): the request ends
  // with kError before this token, which is not output; `why` says what failed.
  bool error = false;
  std::string why;
  std::optional<TokenLogprob> logprob;
  std::vector<TokenLogprob> top;
};

// The runner's answer for one sampling slice (in slice order): 1 + the number of drafts
// accepted tokens, in order — the accepted drafts, then the target's own next token.
struct SliceSample {
  std::vector<SampledToken> tokens;
};

// The target's post-final-norm hidden rows of a step, for proposers that want them
// (set_export_hidden): logits row r of the step at data + r·width; slice i's rows start at
// first_row[i] (a verification slice has a row per position, a plain sampling slice one).
struct HiddenRows {
  const float* data = nullptr;
  int64_t width = 0;
  std::span<const int64_t> first_row;
};

class ModelRunner {
 public:
  // `pool` (optional, outlives this): samples a step's slices in parallel.
  ModelRunner(models::Model& model, KvCache& kv, ThreadPool* pool = nullptr);

  // One SliceSample per sampling slice, in slice order; all_logits rows are appended to `out`.
  std::vector<SliceSample> execute(const ScheduledBatch& batch, std::vector<TokenOutput>& out);

  // With `on`, execute() also keeps the target's post-final-norm hidden state of every
  // logits row (models::ForwardBatch::hidden), readable through hidden_rows() until the next.
  void set_export_hidden(bool on) { export_hidden_ = on; }
  HiddenRows hidden_rows() const;

  // Log-softmax bits of one row: the chosen token's logprob and the k best (ties: lower id).
  static void logprobs_of(const float* row, int32_t n_vocab, int32_t token, int32_t k, SampledToken& out);

 private:
  // One worker's reused memory for sampling.
  struct Scratch {
    std::vector<float> raw;         // one row before sampling touched it
    std::vector<int32_t> verified;  // verify()'s token list
    std::vector<TokenProb> saved;   // a constrained row's logits before the penalties: (id, logit)
    std::vector<int32_t> allowed;   // the grammar's allowed ids on a rejection, ascending
    std::vector<uint64_t> mask;     // the allowed-token bitset
  };
  // One sampling slice of a step: where its rows start, and what to do with them.
  struct SampleTask {
    const ScheduledSlice* sl;
    float* rows;
    bool verify;  // its drafts are verified, else its one row is sampled after the whole sequence
  };

  models::Model& model_;
  KvCache& kv_;
  ThreadPool* pool_;
  std::vector<float> logits_;                        // [rows, n_vocab], reused
  models::ForwardBatch fb_;                          // reused: a step allocates nothing for it
  std::vector<std::vector<const float*>> soft_pad_;  // soft-token rows of slices that pass the prompt's end
  std::vector<Scratch> scratch_;                     // one per pool worker
  std::vector<SampleTask> tasks_;
  std::vector<size_t> order_;  // tasks_ indices in the order the workers take them
  bool export_hidden_ = false;
  std::vector<float> hidden_;       // [rows, n_embd] when export_hidden_
  std::vector<int64_t> first_row_;  // per slice: its first logits row

  int32_t sample_constrained(Sequence& s, float* row, std::span<const int32_t> history, Scratch& sc);
  void track_constraint(Sequence& s, SampledToken& st);

  std::span<const float* const> soft_rows(const Sequence& s, int32_t pos0, int32_t n, size_t i);
  void report_rows(Sequence& s, const ScheduledSlice& sl, const float* rows, std::vector<TokenOutput>& out) const;
  // Samples one row given the sequence's first n_history tokens, n_before tokens after the
  // ones already generated (min_tokens counts them).
  SampledToken sample(Sequence& s, float* row, int32_t n_history, int32_t n_before, Scratch& w);
  SliceSample verify(Sequence& s, const ScheduledSlice& sl, float* rows, Scratch& w);
  // Runs tasks_ into `sampled` (one per task, in order): on the pool when there is one and
  // more than one task. An exception in a task reaches the caller after all have run.
  void sample_tasks(std::vector<SliceSample>& sampled);
};

}  // namespace sluice::engine
