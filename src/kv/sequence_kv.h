// The block tables of one sequence (one per layer group) and their lifetime, for tools and
// tests that run one sequence by hand: `reserve(n)` makes positions [0, n) writable;
// `release_outside_window(p)` returns blocks that no query at position >= p can see (sliding
// groups) to the pool. A thin owner of one SeqBlocks over a BlockManager of its own (no
// prefix cache), so the block-table rules exist once, in block_manager.cpp.
#pragma once

#include <span>
#include <vector>

#include "kv/block_manager.h"
#include "kv/kv_cache.h"

namespace sluice {

class SequenceKv {
 public:
  explicit SequenceKv(KvCache& kv);
  ~SequenceKv();
  SequenceKv(const SequenceKv&) = delete;
  SequenceKv& operator=(const SequenceKv&) = delete;

  // Allocates blocks so positions [0, n_positions) are backed in every group, appending to
  // what is held (blocks released below the window are not brought back). Returns false
  // (allocating nothing new) if a pool cannot supply them.
  bool reserve(int32_t n_positions);
  // Frees sliding-group blocks whose positions are all < first_query_pos - window + 1.
  void release_outside_window(int32_t first_query_pos);
  // True when a query at position `pos` could run now: every key position it can see
  // (per group: the window, or everything) below `pos` still has its block.
  bool can_resume_at(int32_t pos) const { return mgr_.can_resume(s_, pos); }
  // Frees everything (the sequence ends or restarts).
  void clear();

  std::span<const BlockId> table(int32_t g) const { return s_.tables[g]; }

 private:
  BlockManager mgr_;
  SeqBlocks s_;
  int32_t end_ = 0;  // positions reserved so far
};

}  // namespace sluice
