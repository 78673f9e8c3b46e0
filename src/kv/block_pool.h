// A pool of fixed-size KV blocks with reference counts. Block ids index the storage of one
// layer group (kv_cache.h). A block is free when its count is 0. Free blocks sit in a
// doubly-linked list in eviction order: a released block goes to the back, allocate()
// takes the front, so the blocks used most recently are reused last. The prefix cache
// (block_manager.h) keeps the contents of free blocks findable until they are reused, and
// takes such a block back out of the middle of the list with reuse() on a cache hit.
#pragma once

#include <cstdint>
#include <vector>

namespace sluice {

using BlockId = int32_t;
inline constexpr BlockId kNoBlock = -1;  // a block-table entry with no block (left the window)

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  BlockId allocate();       // kNoBlock when exhausted; the new block has count 1
  void add_ref(BlockId b);  // b must be in use
  void reuse(BlockId b);    // b must be free: out of the free list, count 1
  void release(BlockId b);  // count--, to the back of the free list at 0
  int32_t ref_count(BlockId b) const { return refs_[b]; }
  bool is_free(BlockId b) const { return refs_[b] == 0; }
  int32_t n_total() const { return static_cast<int32_t>(refs_.size()); }
  int32_t n_free() const { return n_free_; }
  int32_t n_used() const { return n_total() - n_free(); }
  // The block allocate() would return next, or kNoBlock (for the cache's eviction hook).
  BlockId next_free() const { return n_free_ > 0 ? next_[head()] : kNoBlock; }

 private:
  int32_t head() const { return n_total(); }  // sentinel index of the circular list
  void unlink(BlockId b);
  void push_back(BlockId b);

  std::vector<int32_t> refs_;
  std::vector<int32_t> prev_, next_;  // [n_total + 1]: the free list, sentinel last
  int32_t n_free_ = 0;
};

}  // namespace sluice
