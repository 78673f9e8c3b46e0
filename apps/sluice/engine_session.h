// The one assembly of the serving stack, for every command that runs the model: EngineStack
// loads the file, the thread pool, the model, the KV cache (sized by KvBudget), the drafter of
// --spec, the host's tuning, the prefix cache's event log (--kv-events), and the
// engine::EngineConfig over them; `sluice serve` runs an api::Engine on it, the single-user
// commands (run, chat, logits, perplexity, bench, tune) an EngineSession: one
// engine::EngineCore they step themselves — the same decode path either way (scheduling, KV
// blocks, prefix reuse, sampling, stop ids). Whatever joins the stack (encoders, event sinks,
// drain hooks) is added here once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/sluice/tuner.h"
#include "base/process_memory.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine_core.h"
#include "engine/kv_budget.h"
#include "gguf/reader.h"
#include "kv/kv_cache.h"
#include "kv/kv_events.h"
#include "models/model.h"
#include "threading/thread_pool.h"

namespace sluice::app {

class AssistantParts;
class ImageTower;

struct SessionOptions {
  std::string model_path;
  int threads = 0;                 // 0: ThreadPool::default_threads()
  int ctx_size = 4096;             // positions one sequence may use
  std::string kv_type = "f16";     // half of f32's memory and bandwidth; llama.cpp's default too
  std::string lm_head = "packed";  // packed | int8 | q4_0 (models::LmHeadFormat)
  int block_tokens = 16;
  int n_seqs = 1;          // sequences decoded together (sluice bench --batch, serve --parallel)
  int token_budget = 0;    // tokens per engine step; 0: ctx_size × n_seqs (a prompt in one forward)
  uint64_t kv_memory = 0;  // KV cache bytes (serve --kv-memory); 0: ctx_size × n_seqs positions
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
  engine::DraftHook draft_hook;
  // Kernel tuning (tuner.h): the host's cached parameters, calibrated at first use; no_tune:
  // the defaults; retune: calibrate even when cached (`sluice tune`).
  bool no_tune = false;
  bool retune = false;
  // Record the prefix cache's events (serve --kv-events): the stack holds the log the engine
  // fills and a publisher drains (kv/kv_events.h).
  bool kv_events = false;
  // --mmproj FILE: the vision tower joins the stack (image_tower.h), checked against the model.
  std::string mmproj;
};

// --spec draft: the draft model's file, weights, KV cache and engine hook, loaded next to a
// target. Must outlive the EngineCore that uses `proposer`.
struct DraftParts {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<engine::DraftModelProposer> proposer;
};
// One line on the draft model (stderr), when there is one.
void print_draft_summary(const DraftParts& draft);

// Everything below the engine, built in dependency order and destroyed in reverse (the
// drafters before the KV and model they read).
class EngineStack {
 public:
  explicit EngineStack(const SessionOptions& opt);
  ~EngineStack();
  EngineStack(const EngineStack&) = delete;
  EngineStack& operator=(const EngineStack&) = delete;

  const models::ModelSpec& spec() const { return model_->spec(); }
  models::Model& model() { return *model_; }
  KvCache& kv() { return *kv_; }
  ThreadPool& pool() { return *pool_; }
  const gguf::GgufFile& file() const { return *file_; }
  const DraftParts& draft() const { return draft_; }
  KvEventLog* kv_events() { return kv_events_.get(); }  // null unless SessionOptions::kv_events
  ImageTower* image_tower() { return images_.get(); }   // null unless SessionOptions::mmproj
  // The engine's configuration over this stack (scheduler shape, prefix caching, speculation
  // and its proposer, the sampling pool), for an EngineCore or an api::Engine.
  const engine::EngineConfig& config() const { return config_; }
  int ctx_size() const { return ctx_size_; }
  int threads() const { return pool_->size(); }
  const TuneOutcome& tuning() const { return tuning_; }
  double load_ms() const { return load_ms_; }
  // The process's resident memory when the stack was ready (weights, KV cache, tuning done).
  const ProcessMemory& memory_after_load() const { return loaded_memory_; }
  void print_summary() const;  // memory and threads, to stderr

 private:
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<KvEventLog> kv_events_;      // filled by the engine built over config_
  DraftParts draft_;                           // outlives the engine built over config_
  std::unique_ptr<AssistantParts> assistant_;  // --spec assistant; outlives the engine
  std::unique_ptr<ImageTower> images_;         // --mmproj
  engine::EngineConfig config_;
  int ctx_size_;
  TuneOutcome tuning_;
  double load_ms_ = 0;
  ProcessMemory loaded_memory_;
};

class EngineSession {
 public:
  explicit EngineSession(const SessionOptions& opt);
  ~EngineSession();

  const models::ModelSpec& spec() const { return stack_.spec(); }
  models::Model& model() { return stack_.model(); }
  ThreadPool& pool() { return stack_.pool(); }
  const gguf::GgufFile& file() const { return stack_.file(); }
  engine::EngineCore& core() { return *core_; }
  const DraftParts& draft() const { return stack_.draft(); }
  ImageTower* image_tower() { return stack_.image_tower(); }
  int ctx_size() const { return stack_.ctx_size(); }
  int threads() const { return stack_.threads(); }
  engine::RequestId next_id() { return ++last_id_; }
  void print_summary() const { stack_.print_summary(); }
  const TuneOutcome& tuning() const { return stack_.tuning(); }
  const ProcessMemory& memory_after_load() const { return stack_.memory_after_load(); }
  // Adds a scoring request: greedy, returning the logits of every prompt position (with
  // `soft`: image rows at some positions). Returns its id.
  engine::RequestId add_scoring(std::vector<int32_t> prompt, std::shared_ptr<const engine::SoftTokens> soft = nullptr);

  // Steps the engine until request `id` finishes, handing each of its outputs to `on`. When
  // `interrupt` becomes true the request is aborted (its kAbort output still comes).
  void drive(engine::RequestId id, const std::function<void(engine::TokenOutput&)>& on,
             const std::atomic<bool>* interrupt = nullptr);

 private:
  EngineStack stack_;
  std::unique_ptr<engine::EngineCore> core_;
  engine::RequestId last_id_ = 0;
};

}  // namespace sluice::app
