// The /metrics series under vLLM's names, next to sluice's own, so that routers with a built-in
// vLLM mapping read a sluice replica with no configuration (docs/deploy.md):
//   gateway-api-inference-extension / llm-d's endpoint picker: vllm:num_requests_waiting,
//     vllm:num_requests_running, vllm:kv_cache_usage_perc (a 0..1 fraction),
//     vllm:cache_config_info{block_size,num_gpu_blocks} (its prefix scorer's block size and
//     capacity);
//   dashboards and vLLM's production-stack router: the prefix-cache query/hit counters (tokens),
//     token counters, preemptions, and the TTFT / inter-token histograms.
// Every series carries model_name="<alias>" as vLLM's do. The values are the ones sluice's own
// series show: one engine snapshot feeds both.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "api/engine.h"

namespace sluice::server {

struct VllmCacheInfo {
  std::string model_name;
  int32_t block_size = 0;  // tokens per KV block
  int32_t num_blocks = 0;  // blocks of the prefix-cache group (a prompt's whole prefix lives there)
  bool prefix_caching = true;
  std::string cache_dtype;  // the KV type, as --kv-type names it
};

struct TokenTotals {
  int64_t prompt = 0, generation = 0;
};

void render_vllm_metrics(std::ostringstream& o, const api::EngineSnapshot& s, const VllmCacheInfo& info,
                         const TokenTotals& tokens);

}  // namespace sluice::server
