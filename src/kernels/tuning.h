// The streaming parameters of a decode step, read at run time (`sluice tune` picks them per
// host, docs/performance.md "Tuning"). Every value changes only the ORDER in which row groups
// are read and which lines are prefetched: each output is still a pure function of its weight
// rows and activation row, so results are bit-identical whatever the parameters
// (tests/unit/kernels/tuning_test.cpp). The defaults are the values the kernels were written
// with.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/packed.h"

namespace sluice::kernels {

inline constexpr int32_t kDefaultQ6KAhead = 8192;
static_assert(static_cast<int>(PackedFormat::kQ6_K) == 5, "Tuning::weight_ahead's initializer");

struct Tuning {
  // Decode kernels (one activation row): weight bytes prefetched ahead of the block being
  // read, per packed format; 0 = none (the hardware prefetchers alone). Honoured by the
  // Q4_0/Q5_0/Q8_0/Q6_K decode kernels of the x86 sets; the other
  // kernels (and ARM64's) ignore it. streams, interleave and split_div apply on every set.
  // Q6_K's default is 8 KiB: with the two cores on different CCDs (bus ~80 GB/s on the Zen 5
  // host) the Q6_K lm_head streamed at 0.45 of the bus without it and 0.92 with it, and with
  // them close (~45 GB/s) it is as fast either way (docs/perf-log.md, 2026-12-06 c); the
  // tuner's calibration of a big model often runs out of budget there and keeps the defaults.
  int32_t weight_ahead[kPackedFormatCount] = {0, 0, 0, 0, 0, kDefaultQ6KAhead};
  // Decode kernels of Q4_0/Q5_0/Q8_0 (x86): activation blocks of 32 fetched ahead.
  int32_t act_ahead = 4;
  // Decode: a thread's run of row groups is cut into `streams` parts read in turn,
  // `interleave` groups of one part before moving to the next (1 = one sequential stream).
  int32_t streams = 1;
  int32_t interleave = 1;
  // The work split (threading/work_split.h): one take claims 1/split_div of what is left.
  int32_t split_div = 4;

  bool operator==(const Tuning&) const = default;
};

// Allowed ranges (also what a cache file is checked against).
inline constexpr int32_t kMaxWeightAhead = 1 << 16, kMaxActAhead = 32, kMaxStreams = 4, kMaxInterleave = 64,
                         kMaxSplitDiv = 64;
// Empty when every value is in range, else what is wrong.
std::string tuning_error(const Tuning& t);
// One line, e.g. "streams 1x1, act_ahead 4, split 1/4, weight_ahead q4_0:0 q6_k:0".
std::string describe_tuning(const Tuning& t);

// The parameters every Linear call reads (the defaults until set). set_tuning must not race a
// running matmul: call it between steps. A value out of range is an Error.
const Tuning& tuning();
void set_tuning(const Tuning& t);

}  // namespace sluice::kernels
