// Zeroed, 64-byte aligned byte buffers for the engine's large working memory: repacked weights,
// the KV cache, activation scratch, the bandwidth probe.
//
// Buffers of 2 MiB or more are mapped directly from the kernel (its pages come zeroed, so no
// memset) at a 2 MiB-aligned address and advised for transparent huge pages: a decode step
// streams gigabytes through them, and 4 KiB pages would cost a TLB miss (often a page walk
// that itself misses the caches) every 4 KiB. Smaller ones come from the heap.
#pragma once

#include <cstdint>
#include <memory>

namespace sluice {

// The deleter (a namespace-scope class: a nested one with default member initializers is not
// default-constructible inside its enclosing class).
struct AlignedFree {
  uint64_t mapped = 0;   // bytes of the mapping to release (0: heap)
  void* map_base = nullptr;
  void operator()(uint8_t* p) const;
};

struct AlignedBytes {
  std::unique_ptr<uint8_t[], AlignedFree> p;
  uint64_t size = 0;
  // Zero-filled; throws sluice::Error when the memory cannot be had.
  static AlignedBytes alloc(uint64_t bytes);
  uint8_t* data() const { return p.get(); }
};

}  // namespace sluice
