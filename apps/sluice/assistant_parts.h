// What `--spec assistant --draft FILE` loads (Gemma 4's assistant, engine::AssistantProposer):
// its file, weights and proposer, owned next to the engine that uses them.
#pragma once

#include <memory>

#include "apps/sluice/engine_session.h"
#include "engine/assistant_proposer.h"

namespace sluice::app {

class AssistantParts {
 public:
  // Loads opt.draft_path and binds it to the target (its file must outlive this); errors
  // name the file and the mismatch (vocabulary, width, attention shape).
  AssistantParts(const SessionOptions& opt, ThreadPool& pool, const gguf::GgufFile& target_file,
                 const models::Model& target, KvCache& target_kv);
  ~AssistantParts();
  engine::BatchProposer& proposer() { return *proposer_; }
  const engine::AssistantProposerStats& stats() const { return proposer_->stats(); }

 private:
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ThreadPool> own_pool_;  // the centroid head's one-thread pool
  std::unique_ptr<models::Gemma4Assistant> asst_;
  std::unique_ptr<engine::AssistantProposer> proposer_;
};

// Positions below the sliding window the KV budget must keep for opt.spec's proposer.
int32_t spec_window_margin(const SessionOptions& opt);

// AssistantParts when opt.spec needs them (cfg.model_proposer then points at their proposer), else null.
std::unique_ptr<AssistantParts> make_assistant(const SessionOptions& opt, ThreadPool& pool,
                                               const gguf::GgufFile& target_file, const models::Model& target,
                                               KvCache& target_kv, engine::EngineConfig& cfg);

}  // namespace sluice::app
