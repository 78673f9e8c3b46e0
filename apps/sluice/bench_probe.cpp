#include "apps/sluice/bench_probe.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "kernels/cpu_kernels.h"

namespace sluice::app {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double HandoffProbe::measure() {
  if (pool_.size() < 2) return 0;
  constexpr int kTrips = 1000;
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    flag_.store(0, std::memory_order_relaxed);
    double ns = 0;
    pool_.run([&](int ith, int) {
      if (ith > 1) return;
      const auto t0 = clock_type::now();
      for (int i = 0; i < kTrips; ++i) {
        if (ith == 0) {
          flag_.store(2 * i + 1, std::memory_order_release);
          while (flag_.load(std::memory_order_acquire) != 2 * i + 2) {
          }
        } else {
          while (flag_.load(std::memory_order_acquire) != 2 * i + 1) {
          }
          flag_.store(2 * i + 2, std::memory_order_release);
        }
      }
      if (ith == 0) ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() / kTrips;
    });
    runs.push_back(ns);
  }
  return median(runs);
}

double placement_round_trip(const std::vector<double>& samples_ns) {
  return samples_ns.empty() ? 0.0 : *std::min_element(samples_ns.begin(), samples_ns.end());
}

const char* placement_class(double rt_ns) { return rt_ns < kCloseRoundTripNs ? "close" : "far"; }

const char* placement_of(int threads, const std::vector<double>& samples_ns) {
  return threads < 2 || samples_ns.empty() ? "one thread" : placement_class(placement_round_trip(samples_ns));
}

const char* placement_words(double rt_ns) {
  return rt_ns < kCloseRoundTripNs ? "the cores share a cache" : "the cores are far apart (hand-offs cost more)";
}

BandwidthProbe::BandwidthProbe(ThreadPool& pool, uint64_t bytes, const std::vector<std::span<const uint8_t>>& over)
    : pool_(pool), bytes_(bytes / (256 * 64) * (256 * 64)) {
  uint64_t have = 0;
  for (const auto& s : over) have += s.size() / 256 * 256;
  if (have >= bytes_ && bytes_ > 0) {
    for (uint64_t left = bytes_; const auto& s : over) {
      const uint64_t n = std::min<uint64_t>(left, s.size() / 256 * 256);
      if (n > 0) spans_.emplace_back(s.data(), n);
      left -= n;
      if (left == 0) break;
    }
  } else {
    buf_ = AlignedBytes::alloc(bytes_);
    pool_.run([&](int ith, int nth) {
      int64_t a, b;
      split_range(static_cast<int64_t>(bytes_ / 8), ith, nth, &a, &b);
      auto* w = reinterpret_cast<uint64_t*>(buf_.data());
      for (int64_t i = a; i < b; ++i) w[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    });
    spans_.emplace_back(buf_.data(), bytes_);
  }
  first_chunk_.push_back(0);
  for (const auto& s : spans_) first_chunk_.push_back(first_chunk_.back() + static_cast<int64_t>(s.size() / 256));
}

uint64_t BandwidthProbe::sum_chunks(const kernels::CpuKernels& k, int64_t c0, int64_t c1) const {
  uint64_t sum = 0;
  size_t i = static_cast<size_t>(std::upper_bound(first_chunk_.begin(), first_chunk_.end(), c0) -
                                 first_chunk_.begin()) -
             1;
  for (; c0 < c1 && i < spans_.size(); ++i) {
    const int64_t e = std::min(c1, first_chunk_[i + 1]);
    if (e > c0)
      sum += kernels::cpu_stream_sum(k, spans_[i].data() + (c0 - first_chunk_[i]) * 256,
                                     static_cast<uint64_t>(e - c0) * 256);
    c0 = std::max(c0, e);
  }
  return sum;
}

double BandwidthProbe::measure(int streams) {
  const kernels::CpuKernels& k = kernels::cpu_kernels();
  std::vector<uint64_t> sums(static_cast<size_t>(pool_.size()), 0);
  const uint64_t chunks = bytes_ / 256;
  constexpr int64_t kRun = 64;  // 256-byte chunks (16 KiB) read from one stream before the next
  const auto t0 = clock_type::now();
  pool_.run([&](int ith, int nth) {
    int64_t a, b;
    split_range(static_cast<int64_t>(chunks), ith, nth, &a, &b);
    if (streams <= 1) {
      sums[static_cast<size_t>(ith)] = sum_chunks(k, a, b);
      return;
    }
    // `streams` contiguous parts of the thread's share, read kRun chunks of each in turn.
    uint64_t sum = 0;
    const int64_t n = b - a, part = (n + streams - 1) / streams;
    for (int64_t off = 0; off < part; off += kRun)
      for (int j = 0; j < streams; ++j) {
        const int64_t c0 = a + j * part + off, c1 = std::min({c0 + kRun, a + (j + 1) * part, b});
        if (c1 > c0) sum += sum_chunks(k, c0, c1);
      }
    sums[static_cast<size_t>(ith)] = sum;
  });
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  sink_ += sums[0];
  return static_cast<double>(bytes_) / s / 1e9;
}

int run_machine_probe(int threads, double bandwidth_gib, bool json) {
  ThreadPool pool(threads > 0 ? threads : ThreadPool::default_threads());
  BandwidthProbe probe(pool, static_cast<uint64_t>(bandwidth_gib * (1ull << 30)));
  HandoffProbe handoff(pool);
  probe.measure();  // warm-up
  std::vector<double> bw, rt;
  for (int i = 0; i < 5; ++i) bw.push_back(probe.measure());
  for (int i = 0; i < 3; ++i) rt.push_back(handoff.measure());
  // Other access patterns: several streams per thread (kernels/tuning.h), interleaved rounds.
  std::vector<double> pattern[3];
  for (int i = 0; i < 3; ++i)
    for (int s = 0; s < 3; ++s) pattern[s].push_back(probe.measure(1 << s));
  double best = median(bw);
  for (const auto& v : pattern) best = std::max(best, median(v));
  if (json) {
    nlohmann::json j;
    j["threads"] = pool.size();
    j["isa"] = kernels::cpu_kernels().isa;
    j["bandwidth_gbs"] = median(bw);
    j["bandwidth_samples_gbs"] = bw;
    j["bandwidth_probe_bytes"] = probe.bytes();
    j["core_round_trip_ns"] = median(rt);
    j["core_round_trip_samples_ns"] = rt;
    j["placement"] = placement_of(pool.size(), rt);
    for (int s = 0; s < 3; ++s) j["bandwidth_streams_gbs"][std::to_string(1 << s)] = median(pattern[s]);
    j["bandwidth_best_gbs"] = best;
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("bandwidth %.1f GB/s (median of %zu reads of %.2f GiB, %d threads) | isa %s\n", median(bw), bw.size(),
              probe.bytes() / double(1ull << 30), pool.size(), kernels::cpu_kernels().isa);
  std::printf("streams per thread 1 / 2 / 4: %.1f / %.1f / %.1f GB/s (interleaved); best of all patterns %.1f GB/s\n",
              median(pattern[0]), median(pattern[1]), median(pattern[2]), best);
  if (pool.size() > 1)
    std::printf("core-to-core round trip %.0f ns (fastest of %zu probes): %s\n", placement_round_trip(rt), rt.size(),
                placement_words(placement_round_trip(rt)));
  return 0;
}

}  // namespace sluice::app
