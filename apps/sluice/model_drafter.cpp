#include "apps/sluice/model_drafter.h"

#include <cstdio>

#include "base/error.h"

namespace sluice::app {

ModelDrafter::ModelDrafter(const SessionOptions& opt, ThreadPool& pool, const gguf::GgufFile& target_file,
                           const models::Model& target, KvCache& target_kv) {
  if (opt.draft_path.empty()) fail("--spec assistant needs --draft FILE (a gemma4-assistant GGUF)");
  models::DraftHead head = models::DraftHead::kCentroid;
  if (opt.draft_head == "full") head = models::DraftHead::kFull;
  else if (opt.draft_head != "centroid") fail("--draft-head '%s': expected centroid or full", opt.draft_head.c_str());
  std::fprintf(stderr, "loading assistant %s ...\n", opt.draft_path.c_str());
  file_ = models::open_gemma4_assistant_file(opt.draft_path);
  models::LoadOptions lo;
  lo.pool = &pool;
  asst_ = models::load_gemma4_assistant(*file_, lo);
  asst_->bind_target(target_file, target.spec());
  if (head == models::DraftHead::kCentroid && asst_->spec().n_centroids == 0) head = models::DraftHead::kFull;
  drafter_ = std::make_unique<engine::AssistantDrafter>(*asst_, target_kv, head);
}

ModelDrafter::~ModelDrafter() = default;

std::unique_ptr<ModelDrafter> make_model_drafter(const SessionOptions& opt, ThreadPool& pool,
                                                 const gguf::GgufFile& target_file, const models::Model& target,
                                                 KvCache& target_kv, engine::EngineConfig& cfg) {
  if (opt.spec != "assistant") return nullptr;
  auto d = std::make_unique<ModelDrafter>(opt, pool, target_file, target, target_kv);
  cfg.model_drafter = &d->hook();
  return d;
}

}  // namespace sluice::app
