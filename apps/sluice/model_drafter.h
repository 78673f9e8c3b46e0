// The model drafter behind `--spec assistant --draft FILE` (Gemma 4's assistant, engine::
// AssistantDrafter): its file, weights and engine hook, owned next to the engine that uses it.
#pragma once

#include <memory>

#include "apps/sluice/engine_session.h"
#include "engine/assistant_drafter.h"

namespace sluice::app {

class ModelDrafter {
 public:
  // Loads opt.draft_path and binds it to the target (its file must outlive this); errors
  // name the file and the mismatch (vocabulary, width, attention shape).
  ModelDrafter(const SessionOptions& opt, ThreadPool& pool, const gguf::GgufFile& target_file,
               const models::Model& target, KvCache& target_kv);
  ~ModelDrafter();
  engine::BatchDrafter& hook() { return *drafter_; }
  const engine::AssistantDrafterStats& stats() const { return drafter_->stats(); }

 private:
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ThreadPool> own_pool_;  // the centroid head's one-thread pool
  std::unique_ptr<models::Gemma4Assistant> asst_;
  std::unique_ptr<engine::AssistantDrafter> drafter_;
};

// Positions below the sliding window the KV budget must keep for opt.spec's drafter.
int32_t spec_window_margin(const SessionOptions& opt);

// A ModelDrafter when opt.spec needs one (cfg.model_drafter then points at it), else null.
std::unique_ptr<ModelDrafter> make_model_drafter(const SessionOptions& opt, ThreadPool& pool,
                                                 const gguf::GgufFile& target_file, const models::Model& target,
                                                 KvCache& target_kv, engine::EngineConfig& cfg);

}  // namespace sluice::app
