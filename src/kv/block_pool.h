// A pool of fixed-size KV blocks with reference counts. Block ids index the storage of one
// layer group (kv_cache.h). A block is free when its count is 0; freed blocks go to the back
// of the free list so recently used ones are reused last (prefix caching builds on this).
#pragma once

#include <cstdint>
#include <vector>

namespace sluice {

using BlockId = int32_t;
inline constexpr BlockId kNoBlock = -1;   // a block-table entry with no block (left the window)

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  BlockId allocate();                     // kNoBlock when exhausted; the new block has count 1
  void add_ref(BlockId b);
  void release(BlockId b);                // count--, back to the free list at 0
  int32_t ref_count(BlockId b) const { return refs_[b]; }
  int32_t n_total() const { return static_cast<int32_t>(refs_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()) - free_head_; }
  int32_t n_used() const { return n_total() - n_free(); }

 private:
  std::vector<int32_t> refs_;
  std::vector<BlockId> free_;   // FIFO: [free_head_, end) are free
  int32_t free_head_ = 0;
};

}  // namespace sluice
