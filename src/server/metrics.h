// Prometheus text exposition (/metrics): HTTP request counts by endpoint and status, token
// totals, and the engine's gauges, counters and latency histograms from api::Engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "api/engine.h"

namespace sluice::server {

class Metrics {
 public:
  void count_request(const std::string& endpoint, int status);
  void add_tokens(int64_t prompt, int64_t completion);
  std::string render(const api::EngineSnapshot& s, int32_t parallel) const;
  // /tokenize, /detokenize and /apply-template at work: the HTTP layer admits them against
  // this count (sluice_side_requests_running).
  std::atomic<int>& side_running() { return side_running_; }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::atomic<int64_t> prompt_tokens_{0}, completion_tokens_{0};
  std::atomic<int> side_running_{0};
};

}  // namespace sluice::server
