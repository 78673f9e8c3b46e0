// The machine probes of `sluice bench`: the bus bandwidth a streaming read gets and the
// round trip of a cache line between two cores, measured on the pool a model runs on. bench
// takes them around its decode bursts; `sluice bench --machine` runs them alone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned_bytes.h"
#include "threading/thread_pool.h"

namespace sluice::kernels {
struct CpuKernels;
}

namespace sluice::app {

double median(std::vector<double> v);

// The round trip of one cache line between threads 0 and 1 of the pool, in ns (median of
// 5 runs of 1000 round trips): the price of every hand-off in a step — a job's start and end,
// a barrier, a row one core writes and the other reads. Our VMs move between two placements
// of their two cores: one where they share a cache (a short round trip, a slower bus) and one
// where they do not (most likely two dies with a memory link each: a round trip several times
// longer, a faster bus). The placement explains much of a run's attention + other share
// (docs/performance.md §4). 0 with one thread.
class HandoffProbe {
 public:
  explicit HandoffProbe(ThreadPool& pool) : pool_(pool) {}
  double measure();

 private:
  ThreadPool& pool_;
  alignas(64) std::atomic<int> flag_{0};
};

// Where the pool's cores sit, as bench's line and the tuning cache's key (tuner.cpp) both say
// it: the fastest of a few round trips (a loaded host's preempted threads only ever lengthen
// one, so the class must not flip with the load) against one line, between the slowest
// shared-cache pair (~90 ns) and the fastest split pair (~300 ns) our hosts show
// (docs/performance.md §4). python/loadgen.py's CLOSE_NS is the same line.
inline constexpr double kCloseRoundTripNs = 220;
double placement_round_trip(const std::vector<double>& samples_ns);  // the fastest; 0 when none
const char* placement_class(double rt_ns);                           // "close" | "far"
// The placement a pool of `threads` threads has: "one thread", else the class of the fastest
// of `samples_ns` (what the tuning cache's key holds and bench's JSON reports).
const char* placement_of(int threads, const std::vector<double>& samples_ns);
const char* placement_words(double rt_ns);  // the same, for people

// A plain streaming read of `bytes` bytes split over the pool's threads, each summing its
// contiguous share with the ISA set's widest loads (kernels::cpu_stream_sum); returns GB/s
// (1e9 bytes per second). It reads the first `bytes` of `over` (a model's repacked weights,
// Model::weight_memory) when they hold that many, so the probe costs no memory beside the
// weights; otherwise a buffer of its own, 2 MiB aligned (transparent huge pages where the
// system allows them, as for the repacked weights) and written once so every page is resident.
class BandwidthProbe {
 public:
  BandwidthProbe(ThreadPool& pool, uint64_t bytes, const std::vector<std::span<const uint8_t>>& over = {});
  // streams > 1: each thread reads its share as that many contiguous parts, 16 KiB of each in
  // turn (the access pattern of kernels::Tuning::streams), to find what the bus gives best.
  double measure(int streams = 1);
  uint64_t bytes() const { return bytes_; }
  bool reads_weights() const { return buf_.size == 0; }

 private:
  // Σ of 256-byte chunks [c0, c1) of the spans taken end to end.
  uint64_t sum_chunks(const kernels::CpuKernels& k, int64_t c0, int64_t c1) const;

  ThreadPool& pool_;
  uint64_t bytes_;
  AlignedBytes buf_;
  std::vector<std::span<const uint8_t>> spans_;  // each a multiple of 256 bytes, 64-byte aligned
  std::vector<int64_t> first_chunk_;             // [spans + 1]: chunk index where each span starts
  uint64_t sink_ = 0;
};

// `sluice bench --machine`: the probes alone, on a pool of `threads` (0: all cores); prints
// a line of text or one JSON object.
int run_machine_probe(int threads, double bandwidth_gib, bool json);

}  // namespace sluice::app
