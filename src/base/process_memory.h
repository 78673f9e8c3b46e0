// This process's resident memory as the kernel counts it (/proc/self/status): what `sluice
// bench` and `inspect --load` report, and what the one-copy test checks.
#pragma once

#include <cstdint>

namespace sluice {

struct ProcessMemory {
  uint64_t rss = 0;       // VmRSS: resident now (anonymous + mapped file pages), bytes
  uint64_t peak_rss = 0;  // VmHWM: the most that was ever resident at once, bytes
  bool known = false;     // false where /proc/self/status has no such lines (not Linux)
};

ProcessMemory process_memory();

}  // namespace sluice
