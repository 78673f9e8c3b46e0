#include "base/aligned_bytes.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace sluice {

namespace {
constexpr uint64_t kHugePage = uint64_t{1} << 21;
}  // namespace

void AlignedFree::operator()(uint8_t* p) const {
  if (borrowed) return;
  if (mapped) munmap(map_base, mapped);
  else std::free(p);
}

AlignedBytes AlignedBytes::borrowed(uint8_t* p, uint64_t bytes) {
  AlignedBytes a;
  AlignedFree f;
  f.borrowed = true;
  a.p = std::unique_ptr<uint8_t[], AlignedFree>(p, f);
  a.size = bytes;
  return a;
}

uint8_t* ByteArena::take(uint64_t bytes) {
  const uint64_t n = (bytes + 63) / 64 * 64;
  if (n > left_) {
    // A new chunk (or one of its own for a buffer larger than a chunk); the rest of the old
    // chunk stays unused and, never touched, costs no memory.
    chunks_.push_back(AlignedBytes::alloc(std::max(n, chunk_bytes_)));
    next_ = chunks_.back().data();
    left_ = chunks_.back().size;
    chunk_used_.push_back(0);
  }
  uint8_t* p = next_;
  next_ += n;
  left_ -= n;
  used_ += n;
  chunk_used_.back() += n;
  return p;
}

std::vector<std::span<const uint8_t>> ByteArena::spans() const {
  std::vector<std::span<const uint8_t>> out;
  for (size_t i = 0; i < chunks_.size(); ++i) out.emplace_back(chunks_[i].data(), chunk_used_[i]);
  return out;
}

AlignedBytes AlignedBytes::alloc(uint64_t bytes) {
  AlignedBytes a;
  const uint64_t n = (bytes + 63) / 64 * 64;
  if (n == 0) return a;
  if (n >= kHugePage) {
    // Over-map by one huge page so a 2 MiB-aligned run of n bytes fits inside.
    const uint64_t len = (n + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
    void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) fail("out of memory: cannot map %llu bytes", static_cast<unsigned long long>(len));
    const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) & ~(kHugePage - 1);
    madvise(reinterpret_cast<void*>(aligned), n, MADV_HUGEPAGE);  // a hint: fine if the system says no
    a.p = std::unique_ptr<uint8_t[], AlignedFree>(reinterpret_cast<uint8_t*>(aligned), AlignedFree{len, base});
    a.size = n;
    return a;
  }
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, n));
  if (!p) fail("out of memory: cannot allocate %llu bytes", static_cast<unsigned long long>(n));
  std::memset(p, 0, n);
  a.p = std::unique_ptr<uint8_t[], AlignedFree>(p, AlignedFree{});
  a.size = n;
  return a;
}

}  // namespace sluice
