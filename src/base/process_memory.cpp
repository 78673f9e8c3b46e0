#include "base/process_memory.h"

#include <cstdio>

namespace sluice {

ProcessMemory process_memory() {
  ProcessMemory m;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  int found = 0;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kib = 0;
    // The kernel prints these two in kB: "VmHWM:	  123456 kB".
    if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1) {
      m.rss = kib * 1024;
      ++found;
    } else if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
      m.peak_rss = kib * 1024;
      ++found;
    }
  }
  std::fclose(f);
  m.known = found == 2;
  return m;
}

}  // namespace sluice
