// The engine step on one thread, with no threads of its own (the api layer runs it in a
// loop): add/abort requests, then step() = schedule → execute → update → propose
// (docs/conventions.md §4): the step's output goes one way, into the proposals the next
// schedule() trims (engine/proposer.h).
// Synchronous and deterministic, so tests drive it step by step with a fake model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "engine/proposer.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/block_manager.h"
#include "models/model.h"
#include "spec/ngram_drafter.h"

namespace sluice::engine {

// Which proposer each sequence gets for speculative steps (with sched.draft_max > 0).
// kModel: a BatchProposer (a draft model, an assistant) proposes for every sequence.
enum class SpecMethod : uint8_t { kNone, kNgram, kModel };

struct EngineConfig {
  SchedulerConfig sched;
  bool prefix_caching = true;
  SpecMethod spec = SpecMethod::kNone;  // kNone: only sched.draft_hook, if set, drafts
  spec::NgramConfig ngram;
  BatchProposer* model_proposer = nullptr;  // kModel: not owned, outlives the EngineCore
  ThreadPool* sample_pool = nullptr;        // samples a step's sequences in parallel (ModelRunner); not owned
  KvEventLog* kv_events = nullptr;          // the prefix cache's events (kv/kv_events.h); not owned
};

// The scheduler's counters (steps, tokens, drafts: SchedulerCounters), the prefix cache's, and
// the gauges of the moment.
struct EngineStats : SchedulerCounters {
  int32_t n_running = 0, n_waiting = 0;
  int32_t kv_blocks_used = 0, kv_blocks_total = 0;  // all groups together
  PrefixCacheStats prefix;
  int32_t prefix_cached_blocks = 0;  // findable blocks of BlockManager::index_group()
};

class EngineCore {
 public:
  EngineCore(models::Model& model, KvCache& kv, const EngineConfig& cfg);
  ~EngineCore();

  // Why a request can never run (prompt empty or too long for the context or the pool), or
  // nullopt. Reads only constants, so the HTTP threads may call it.
  std::optional<std::string> check_admissible(int32_t n_prompt) const;

  // Throws sluice::Error on a request check_admissible rejects or with a token outside the
  // vocabulary. With resume_from, takes that request's parked K/V (see EngineRequest).
  void add(EngineRequest r);
  void release_kv(RequestId id);  // frees what a keep_kv request parked; unknown ids ignored
  void abort(RequestId id);       // its kAbort output comes with the next step()/take_outputs()
  bool has_work() const { return sched_.has_work(); }

  // One step; returns every output produced since the last call (aborts included).
  std::vector<TokenOutput> step();
  std::vector<TokenOutput> take_outputs();
  void abort_all(FinishReason why);  // shutdown: every request ends with `why`

  EngineStats stats() const;
  const EngineConfig& config() const { return cfg_; }
  const models::ModelSpec& spec() const { return model_.spec(); }
  BlockManager& blocks() { return blocks_; }
  const Scheduler& scheduler() const { return sched_; }

 private:
  models::Model& model_;
  EngineConfig cfg_;
  BlockManager blocks_;
  Scheduler sched_;
  ModelRunner runner_;
  std::unique_ptr<BatchProposer> own_proposer_;  // n-gram or hook; else cfg_.model_proposer
  BatchProposer* proposer_ = nullptr;            // null: no speculation
  std::vector<ProposeSlot> slots_;               // reused by propose

  void resume(Sequence& s, RequestId from);
  // The step's output to the proposer: every sequence of the batch that decodes next.
  void propose(const ScheduledBatch& batch, std::span<const SliceSample> sampled);

  std::vector<TokenOutput> pending_;
  uint64_t arrivals_ = 0;
};

}  // namespace sluice::engine
