#include "kv/block_pool.h"

#include "base/error.h"

namespace sluice {

BlockPool::BlockPool(int32_t n_blocks) {
  if (n_blocks < 0) fail("negative block count %d", n_blocks);
  refs_.assign(static_cast<size_t>(n_blocks), 0);
  prev_.assign(static_cast<size_t>(n_blocks) + 1, 0);
  next_.assign(static_cast<size_t>(n_blocks) + 1, 0);
  const int32_t h = head();
  prev_[h] = next_[h] = h;
  for (BlockId b = 0; b < n_blocks; ++b) push_back(b);
}

void BlockPool::unlink(BlockId b) {
  next_[prev_[b]] = next_[b];
  prev_[next_[b]] = prev_[b];
  --n_free_;
}

void BlockPool::push_back(BlockId b) {
  const int32_t h = head();
  prev_[b] = prev_[h];
  next_[b] = h;
  next_[prev_[h]] = b;
  prev_[h] = b;
  ++n_free_;
}

BlockId BlockPool::allocate() {
  if (n_free_ == 0) return kNoBlock;
  const BlockId b = next_[head()];
  unlink(b);
  refs_[b] = 1;
  return b;
}

void BlockPool::add_ref(BlockId b) {
  if (b < 0 || b >= n_total() || refs_[b] <= 0) fail("add_ref on block %d that is not in use", b);
  ++refs_[b];
}

void BlockPool::reuse(BlockId b) {
  if (b < 0 || b >= n_total() || refs_[b] != 0) fail("reuse of block %d that is not free", b);
  unlink(b);
  refs_[b] = 1;
}

void BlockPool::release(BlockId b) {
  if (b < 0 || b >= n_total() || refs_[b] <= 0) fail("release of block %d that is not in use", b);
  if (--refs_[b] == 0) push_back(b);
}

}  // namespace sluice
