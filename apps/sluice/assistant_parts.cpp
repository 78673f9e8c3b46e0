#include "apps/sluice/assistant_parts.h"

#include <cstdio>

#include "base/error.h"

namespace sluice::app {

AssistantParts::AssistantParts(const SessionOptions& opt, ThreadPool& pool, const gguf::GgufFile& target_file,
                               const models::Model& target, KvCache& target_kv) {
  if (opt.draft_path.empty()) fail("--spec assistant needs --draft FILE (a gemma4-assistant GGUF)");
  models::DraftHead head = models::DraftHead::kCentroid;
  if (opt.draft_head == "full") head = models::DraftHead::kFull;
  else if (opt.draft_head != "centroid") fail("--draft-head '%s': expected centroid or full", opt.draft_head.c_str());
  std::fprintf(stderr, "loading assistant %s ...\n", opt.draft_path.c_str());
  file_ = models::open_gemma4_assistant_file(opt.draft_path);
  models::LoadOptions lo;
  lo.pool = &pool;
  // The centroid head's step is a few MB of small matmuls: on the calling thread alone it
  // costs less than a pool hand-off per matmul (E2B-shaped, docs/speculative.md: 6.3 ms
  // against 14.9 ms on two threads of a loaded host). The full head streams the whole
  // embedding and keeps the session's pool.
  // A file without the centroid head (no use_ordered_embeddings) drafts with the full one.
  if (!file_->find_tensor("masked_embd_centroids.weight") && !file_->find_tensor("mtp.centroids.weight"))
    head = models::DraftHead::kFull;
  if (head == models::DraftHead::kCentroid) {
    own_pool_ = std::make_unique<ThreadPool>(1);
    lo.pool = own_pool_.get();
  }
  asst_ = models::load_gemma4_assistant(*file_, lo);
  asst_->bind_target(target_file, target.spec());
  proposer_ = std::make_unique<engine::AssistantProposer>(*asst_, target_kv, head, opt.draft_p_min);
}

AssistantParts::~AssistantParts() = default;

int32_t spec_window_margin(const SessionOptions& opt) {
  return opt.spec == "assistant" ? engine::kAssistantWindowMargin : 0;
}

std::unique_ptr<AssistantParts> make_assistant(const SessionOptions& opt, ThreadPool& pool,
                                               const gguf::GgufFile& target_file, const models::Model& target,
                                               KvCache& target_kv, engine::EngineConfig& cfg) {
  if (opt.spec != "assistant") return nullptr;
  auto d = std::make_unique<AssistantParts>(opt, pool, target_file, target, target_kv);
  cfg.model_proposer = &d->proposer();
  return d;
}

}  // namespace sluice::app
