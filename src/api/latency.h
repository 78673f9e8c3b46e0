// Latency histograms with fixed buckets (Prometheus style: cumulative counts per upper
// bound, plus sum and count). Thread-safe; observe() is a few atomic adds.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace sluice::api {

struct LatencySnapshot {
  std::vector<double> bounds;    // upper bounds in seconds, ascending; +Inf implied
  std::vector<uint64_t> counts;  // per bucket (not cumulative), bounds.size() + 1 entries
  double sum = 0;
  uint64_t count = 0;
};

class LatencyHistogram {
 public:
  explicit LatencyHistogram(std::vector<double> bounds);
  void observe(double seconds);
  LatencySnapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> counts_;
  std::atomic<uint64_t> sum_micros_{0}, count_{0};
};

}  // namespace sluice::api
