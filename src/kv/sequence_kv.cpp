#include "kv/sequence_kv.h"

#include <algorithm>

namespace sluice {

SequenceKv::SequenceKv(KvCache& kv) : mgr_(kv, /*prefix_caching=*/false) { s_.tables.resize(kv.n_groups()); }

SequenceKv::~SequenceKv() { clear(); }

bool SequenceKv::reserve(int32_t n_positions) {
  if (n_positions <= end_) return true;
  // The first new position is the first query: blocks its window no longer sees stay released.
  if (!mgr_.reserve(s_, end_, n_positions)) return false;
  end_ = n_positions;
  return true;
}

void SequenceKv::release_outside_window(int32_t first_query_pos) { mgr_.release_outside_window(s_, first_query_pos); }

void SequenceKv::clear() {
  mgr_.free(s_);
  s_.tables.resize(mgr_.n_groups());
  end_ = 0;
}

}  // namespace sluice
