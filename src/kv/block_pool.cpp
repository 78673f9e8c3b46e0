#include "kv/block_pool.h"

#include "base/error.h"

namespace sluice {

BlockPool::BlockPool(int32_t n_blocks) : refs_(static_cast<size_t>(n_blocks), 0) {
  if (n_blocks < 0) fail("negative block count %d", n_blocks);
  free_.reserve(static_cast<size_t>(n_blocks) * 2);
  for (BlockId b = 0; b < n_blocks; ++b) free_.push_back(b);
}

BlockId BlockPool::allocate() {
  if (n_free() == 0) return kNoBlock;
  const BlockId b = free_[free_head_++];
  // Compact the FIFO once its dead prefix is as large as the live part (amortized O(1)).
  if (free_head_ > n_total()) {
    free_.erase(free_.begin(), free_.begin() + free_head_);
    free_head_ = 0;
  }
  refs_[b] = 1;
  return b;
}

void BlockPool::add_ref(BlockId b) {
  if (b < 0 || b >= n_total() || refs_[b] <= 0) fail("add_ref on block %d that is not in use", b);
  ++refs_[b];
}

void BlockPool::release(BlockId b) {
  if (b < 0 || b >= n_total() || refs_[b] <= 0) fail("release of block %d that is not in use", b);
  if (--refs_[b] == 0) free_.push_back(b);
}

}  // namespace sluice
