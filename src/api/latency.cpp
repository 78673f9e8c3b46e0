#include "api/latency.h"

#include <algorithm>

namespace sluice::api {

LatencyHistogram::LatencyHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {
  std::sort(bounds_.begin(), bounds_.end());
  for (auto& c : counts_) c.store(0);
}

void LatencyHistogram::observe(double seconds) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e6), std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

LatencySnapshot LatencyHistogram::snapshot() const {
  LatencySnapshot s;
  s.bounds = bounds_;
  for (const auto& c : counts_) s.counts.push_back(c.load(std::memory_order_relaxed));
  s.sum = sum_micros_.load(std::memory_order_relaxed) / 1e6;
  for (uint64_t c : s.counts) s.count += c;  // consistent with the buckets
  return s;
}

}  // namespace sluice::api
