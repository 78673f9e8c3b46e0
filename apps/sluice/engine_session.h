// One loaded model for the single-user commands (run, chat, logits, perplexity, bench): the
// file, a thread pool, the model, a KV cache and one engine::EngineCore over them — the same
// decode path `sluice serve` runs (scheduling, KV blocks, prefix reuse, sampling, stop ids).
// The commands only submit requests and step the engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/sluice/tuner.h"
#include "base/process_memory.h"
#include "engine/draft_model_drafter.h"
#include "engine/engine_core.h"
#include "engine/kv_budget.h"
#include "gguf/reader.h"
#include "kv/kv_cache.h"
#include "models/model.h"
#include "threading/thread_pool.h"

namespace sluice::app {

class ModelDrafter;

struct SessionOptions {
  std::string model_path;
  int threads = 0;                 // 0: ThreadPool::default_threads()
  int ctx_size = 4096;             // positions one sequence may use
  std::string kv_type = "f16";     // half of f32's memory and bandwidth; llama.cpp's default too
  std::string lm_head = "packed";  // packed | int8 | q4_0 (models::LmHeadFormat)
  int block_tokens = 16;
  int n_seqs = 1;        // sequences decoded together (sluice bench --batch)
  int token_budget = 0;  // tokens per engine step; 0: ctx_size × n_seqs (a prompt in one forward)
  bool prefix_caching = true;
  // Speculative decoding (docs/speculative.md): "none", "ngram" (prompt lookup), "draft"
  // (the model in draft_path drafts greedily) or "assistant" (Gemma 4's assistant in
  // draft_path, a gemma4-assistant GGUF; its centroid head unless draft_head is "full"), up
  // to draft_max drafted tokens verified per step. Lossless: the same tokens as without.
  std::string spec = "none";
  int draft_max = 4;
  std::string draft_path;    // --draft FILE (--spec draft / assistant)
  float draft_p_min = 0.0f;  // --draft-p-min: stop drafting below this draft probability
  std::string draft_head = "centroid";
  // adaptive: each sequence's draft length follows its acceptance and the step's cost
  // (spec::DraftPolicy); fixed: always up to draft_max. spec_cost: "T:cost,..." points of
  // the step-cost curve (empty: the host's measured one, else the built-in one);
  // spec_margin: the policy's m (drafts' extra cost counts 1 + m times).
  std::string spec_policy = "adaptive";
  std::string spec_cost;
  double spec_margin = spec::DraftPolicy::kDefaultMargin;
  // A proposer outside the engine (sluice bench --spec-verify): when set, every decoding
  // sequence drafts through it, up to draft_max tokens a step, at a fixed length.
  engine::Drafter drafter;
  // Kernel tuning (tuner.h): the host's cached parameters, calibrated at first use; no_tune:
  // the defaults; retune: calibrate even when cached (`sluice tune`).
  bool no_tune = false;
  bool retune = false;
};

// --spec draft: the draft model's file, weights, KV cache and engine hook, loaded next to a
// target. Must outlive the EngineCore that uses `drafter`.
struct DraftParts {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<engine::DraftModelDrafter> drafter;
};
// Loads --draft when opt.spec is "draft" (else returns empty parts). Checks the vocabulary
// against the target's (same token texts, else an Error naming the first differing id). The
// draft's blocks are sized like the target's from `budget`; with a memory budget the two
// share it by bytes per token (engine::draft_kv_share), and budget.memory_bytes becomes the
// target's part.
DraftParts load_draft(const SessionOptions& opt, const gguf::GgufFile& target_file, const models::ModelSpec& target,
                      ThreadPool& pool, engine::KvBudget& budget);

// Sets cfg's proposer and draft length from --spec / --draft-max (and the draft model's hook
// for --spec draft), and the policy's step-cost curve (--spec-cost, else `measured` when the
// tuning cache has one); a bad value is an Error.
void apply_spec_options(const SessionOptions& opt, engine::EngineConfig& cfg, const DraftParts& draft = {},
                        const tune::StepCostCurve* measured = nullptr);
// One line on the draft model (stderr), when there is one.
void print_draft_summary(const DraftParts& draft);

class EngineSession {
 public:
  explicit EngineSession(const SessionOptions& opt);
  ~EngineSession();

  const models::ModelSpec& spec() const { return model_->spec(); }
  models::Model& model() { return *model_; }
  ThreadPool& pool() { return *pool_; }
  const gguf::GgufFile& file() const { return *file_; }
  engine::EngineCore& core() { return *core_; }
  const DraftParts& draft() const { return draft_; }
  int ctx_size() const { return ctx_size_; }
  int threads() const { return pool_->size(); }
  engine::RequestId next_id() { return ++last_id_; }
  void print_summary() const;  // memory and threads, to stderr
  const TuneOutcome& tuning() const { return tuning_; }
  // The process's resident memory when the session was ready (weights, KV cache, tuning done).
  const ProcessMemory& memory_after_load() const { return loaded_memory_; }
  // Adds a scoring request: greedy, returning the logits of every prompt position. Returns its id.
  engine::RequestId add_scoring(std::vector<int32_t> prompt);

  // Steps the engine until request `id` finishes, handing each of its outputs to `on`. When
  // `interrupt` becomes true the request is aborted (its kAbort output still comes).
  void drive(engine::RequestId id, const std::function<void(engine::TokenOutput&)>& on,
             const std::atomic<bool>* interrupt = nullptr);

 private:
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<KvCache> kv_;
  DraftParts draft_;                         // before core_: outlives it
  std::unique_ptr<ModelDrafter> assistant_;  // --spec assistant; outlives core_
  std::unique_ptr<engine::EngineCore> core_;
  int ctx_size_;
  TuneOutcome tuning_;
  double load_ms_ = 0;
  ProcessMemory loaded_memory_;
  engine::RequestId last_id_ = 0;
};

}  // namespace sluice::app
