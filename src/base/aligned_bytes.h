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
#include <span>
#include <vector>

namespace sluice {

// The deleter (a namespace-scope class: a nested one with default member initializers is not
// default-constructible inside its enclosing class).
struct AlignedFree {
  uint64_t mapped = 0;  // bytes of the mapping to release (0: heap)
  void* map_base = nullptr;
  bool borrowed = false;  // memory owned elsewhere (a ByteArena): nothing to release
  void operator()(uint8_t* p) const;
};

struct AlignedBytes {
  std::unique_ptr<uint8_t[], AlignedFree> p;
  uint64_t size = 0;
  // Zero-filled; throws sluice::Error when the memory cannot be had.
  static AlignedBytes alloc(uint64_t bytes);
  // A view of memory someone else owns and outlives it (released with the owner).
  static AlignedBytes borrowed(uint8_t* p, uint64_t bytes);
  uint8_t* data() const { return p.get(); }
};

// Many buffers carved, 64-byte aligned, from a few large AlignedBytes mappings: a model's
// repacked weights, most of them far smaller than a 2 MiB huge page. On their own, those
// below 2 MiB would sit in 4 KiB pages, where every page boundary stops the hardware
// prefetchers and costs a TLB miss while a decode step streams them. Chunks are reserved
// `chunk_bytes` at a time and only touched pages become resident. Not thread-safe.
class ByteArena {
 public:
  explicit ByteArena(uint64_t chunk_bytes = uint64_t{256} << 20) : chunk_bytes_(chunk_bytes) {}
  // `bytes` zeroed bytes that live as long as the arena.
  uint8_t* take(uint64_t bytes);
  uint64_t used() const { return used_; }
  // The bytes handed out so far, one span per chunk (its front part: the rest was never touched).
  std::vector<std::span<const uint8_t>> spans() const;

 private:
  uint64_t chunk_bytes_, used_ = 0, left_ = 0;
  uint8_t* next_ = nullptr;
  std::vector<AlignedBytes> chunks_;
  std::vector<uint64_t> chunk_used_;  // bytes handed out of each chunk
};

}  // namespace sluice
