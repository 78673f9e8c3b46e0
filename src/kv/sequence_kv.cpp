#include "kv/sequence_kv.h"

#include <algorithm>

namespace sluice {

SequenceKv::SequenceKv(KvCache& kv) : kv_(kv), tables_(kv.n_groups()) {}

SequenceKv::~SequenceKv() { clear(); }

bool SequenceKv::reserve(int32_t n_positions) {
  const int32_t bt = kv_.block_tokens();
  const size_t need = static_cast<size_t>((n_positions + bt - 1) / bt);
  // First check every pool can supply its share, so failure leaves nothing half-done.
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    const size_t have = tables_[g].size();
    if (need > have && static_cast<size_t>(kv_.pool(g).n_free()) < need - have) return false;
  }
  for (int32_t g = 0; g < kv_.n_groups(); ++g)
    while (tables_[g].size() < need) tables_[g].push_back(kv_.pool(g).allocate());
  return true;
}

void SequenceKv::release_outside_window(int32_t first_query_pos) {
  const int32_t bt = kv_.block_tokens();
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    const int32_t w = kv_.group(g).window;
    if (w <= 0) continue;
    const int32_t first_visible = first_query_pos - w + 1;   // lowest key position still visible
    for (size_t b = 0; b < tables_[g].size(); ++b) {
      if (static_cast<int32_t>((b + 1) * bt) > first_visible) break;   // block reaches the window
      if (tables_[g][b] != kNoBlock) {
        kv_.pool(g).release(tables_[g][b]);
        tables_[g][b] = kNoBlock;
      }
    }
  }
}

bool SequenceKv::can_resume_at(int32_t pos) const {
  const int32_t bt = kv_.block_tokens();
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    const int32_t w = kv_.group(g).window;
    const int32_t lo = w > 0 ? std::max(0, pos - w + 1) : 0;
    for (int32_t b = lo / bt; b * bt < pos; ++b)
      if (static_cast<size_t>(b) >= tables_[g].size() || tables_[g][b] == kNoBlock) return false;
  }
  return true;
}

void SequenceKv::clear() {
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    for (BlockId b : tables_[g])
      if (b != kNoBlock) kv_.pool(g).release(b);
    tables_[g].clear();
  }
}

}  // namespace sluice
