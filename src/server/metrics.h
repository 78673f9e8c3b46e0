// Prometheus text exposition (/metrics): HTTP request counts by endpoint and status, token
// totals, and the engine's gauges, counters and latency histograms from api::Engine; with
// set_vllm_info, the same values again under vLLM's names (vllm_metrics.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "api/engine.h"
#include "server/vllm_metrics.h"

namespace sluice::server {

class Metrics {
 public:
  void count_request(const std::string& endpoint, int status);
  void add_tokens(int64_t prompt, int64_t completion);
  std::string render(const api::EngineSnapshot& s, int32_t parallel) const;
  // Adds the vLLM-named series (vllm_metrics.h) to render(); set once, before serving.
  void set_vllm_info(VllmCacheInfo info) { vllm_ = std::move(info); }
  // /tokenize, /detokenize, /apply-template and the render routes admitted (from their headers to
  // their reply): the HTTP layer admits them against this count (sluice_side_requests_running).
  std::atomic<int>& side_running() { return side_running_; }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::atomic<int64_t> prompt_tokens_{0}, completion_tokens_{0};
  std::optional<VllmCacheInfo> vllm_;
  std::atomic<int> side_running_{0};
};

}  // namespace sluice::server
