#include "kv/block_manager.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/error.h"

namespace sluice {

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

uint64_t hash_bytes(uint64_t seed, const void* data, size_t n) { return XXH3_64bits_withSeed(data, n, seed); }

bool SeqBlocks::empty() const {
  for (const auto& t : tables)
    if (!t.empty()) return false;
  return true;
}

BlockManager::BlockManager(KvCache& kv, bool prefix_caching)
    : kv_(kv),
      prefix_caching_(prefix_caching),
      cached_(kv.n_groups()),
      block_hash_(kv.n_groups()),
      has_hash_(kv.n_groups()) {
  for (int32_t g = 0; g < kv.n_groups(); ++g) {
    block_hash_[g].assign(kv.pool(g).n_total(), 0);
    has_hash_[g].assign(kv.pool(g).n_total(), 0);
  }
}

int32_t BlockManager::n_used_all() const {
  int32_t n = 0;
  for (int32_t g = 0; g < kv_.n_groups(); ++g) n += kv_.pool(g).n_used();
  return n;
}

int32_t BlockManager::index_group() const {
  for (int32_t g = 0; g < kv_.n_groups(); ++g)
    if (kv_.group(g).window <= 0) return g;
  return 0;
}

void BlockManager::forget(int32_t g, BlockId b) {
  cached_[g].erase(block_hash_[g][b]);
  has_hash_[g][b] = 0;
  if (events_ && g == index_group()) events_->push({KvEvent::Kind::kRemoved, block_hash_[g][b], false, 0, {}});
}

BlockId BlockManager::take(int32_t g) {
  const BlockId b = kv_.pool(g).allocate();
  if (b != kNoBlock && has_hash_[g][b]) forget(g, b);  // evicting a cached block: its prefix is forgotten
  return b;
}

void BlockManager::hold(int32_t g, BlockId b) {
  BlockPool& p = kv_.pool(g);
  if (p.is_free(b)) p.reuse(b);
  else p.add_ref(b);
}

int32_t BlockManager::first_needed_block(int32_t g, int32_t first_query) const {
  const int32_t w = kv_.group(g).window;
  if (w <= 0) return 0;
  return std::max(0, first_query - w + 1 - margin_) / kv_.block_tokens();
}

int32_t BlockManager::match_prefix(SeqBlocks& s, std::span<const int32_t> tokens) {
  const int32_t bt = kv_.block_tokens();
  s.tables.resize(kv_.n_groups());
  if (!s.empty()) fail("match_prefix on a sequence that already holds blocks");
  s.hashes.clear();
  ++stats_.queries;
  stats_.query_tokens += static_cast<int64_t>(tokens.size());
  if (!prefix_caching_ || tokens.empty()) return 0;
  const int32_t limit = static_cast<int32_t>((tokens.size() - 1) / bt);  // leave >= 1 token
  std::vector<BlockHash> h;
  h.reserve(limit);
  BlockHash parent = kRootHash;
  for (int32_t k = 0; k < limit; ++k) {
    parent = hash_block(parent, tokens.subspan(static_cast<size_t>(k) * bt, bt));
    h.push_back(parent);
  }
  auto cached = [&](int32_t g, int32_t k) { return cached_[g].count(h[k]) > 0; };
  // Global groups need the whole prefix: the longest run of hits from block 0 bounds k.
  int32_t k_max = limit;
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    if (kv_.group(g).window > 0) continue;
    int32_t k = 0;
    while (k < k_max && cached(g, k)) ++k;
    k_max = k;
  }
  // Sliding groups need only the blocks visible from the resume position k·bt.
  int32_t k = k_max;
  for (; k > 0; --k) {
    bool ok = true;
    for (int32_t g = 0; g < kv_.n_groups() && ok; ++g) {
      if (kv_.group(g).window <= 0) continue;
      for (int32_t j = first_needed_block(g, k * bt); j < k && ok; ++j) ok = cached(g, j);
    }
    if (ok) break;
  }
  if (k == 0) return 0;
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    const int32_t lo = first_needed_block(g, k * bt);
    for (int32_t j = 0; j < k; ++j) {
      if (j < lo) {
        s.tables[g].push_back(kNoBlock);
        continue;
      }
      const BlockId b = cached_[g].at(h[j]);
      hold(g, b);
      s.tables[g].push_back(b);
    }
  }
  s.hashes.assign(h.begin(), h.begin() + k);
  stats_.hit_tokens += static_cast<int64_t>(k) * bt;
  return k * bt;
}

bool BlockManager::reserve(SeqBlocks& s, int32_t first_query, int32_t end) {
  const int32_t bt = kv_.block_tokens();
  s.tables.resize(kv_.n_groups());
  const int32_t need = (end + bt - 1) / bt;
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    const auto& t = s.tables[g];
    const int32_t lo = first_needed_block(g, first_query);
    int32_t missing = 0;
    for (int32_t b = lo; b < need; ++b)
      if (b >= static_cast<int32_t>(t.size()) || t[b] == kNoBlock) ++missing;
    if (missing > kv_.pool(g).n_free()) return false;
  }
  for (int32_t g = 0; g < kv_.n_groups(); ++g) {
    auto& t = s.tables[g];
    const int32_t lo = first_needed_block(g, first_query);
    while (static_cast<int32_t>(t.size()) < need) t.push_back(kNoBlock);
    for (int32_t b = lo; b < need; ++b)
      if (t[b] == kNoBlock) t[b] = take(g);
  }
  return true;
}

void BlockManager::release_outside_window(SeqBlocks& s, int32_t first_query) {
  for (int32_t g = 0; g < static_cast<int32_t>(s.tables.size()); ++g) {
    if (kv_.group(g).window <= 0) continue;
    const int32_t lo = std::min<int32_t>(first_needed_block(g, first_query), static_cast<int32_t>(s.tables[g].size()));
    for (int32_t b = 0; b < lo; ++b) {
      if (s.tables[g][b] == kNoBlock) continue;
      kv_.pool(g).release(s.tables[g][b]);
      s.tables[g][b] = kNoBlock;
    }
  }
}

void BlockManager::publish_full_blocks(SeqBlocks& s, std::span<const int32_t> tokens, int32_t n_computed) {
  if (!prefix_caching_) return;
  const int32_t bt = kv_.block_tokens();
  const int32_t n_full = std::min<int32_t>(n_computed, static_cast<int32_t>(tokens.size())) / bt;
  while (static_cast<int32_t>(s.hashes.size()) < n_full) {
    const int32_t k = static_cast<int32_t>(s.hashes.size());
    const BlockHash parent = k == 0 ? kRootHash : s.hashes.back();
    const BlockHash h = hash_block(parent, tokens.subspan(static_cast<size_t>(k) * bt, bt));
    s.hashes.push_back(h);
    for (int32_t g = 0; g < static_cast<int32_t>(s.tables.size()); ++g) {
      if (k >= static_cast<int32_t>(s.tables[g].size())) continue;
      const BlockId b = s.tables[g][k];
      if (b == kNoBlock || has_hash_[g][b]) continue;
      // Blocks stay append-only: an equal block already cached is not replaced (the first
      // copy keeps serving hits; this one is simply not published).
      if (!cached_[g].emplace(h, b).second) continue;
      block_hash_[g][b] = h;
      has_hash_[g][b] = 1;
      const auto block = tokens.subspan(static_cast<size_t>(k) * bt, bt);
      // A block keyed by media (negative ids, engine/media_keys.h) is not announced: a router
      // hashes the request's placeholder ids and could never match it.
      const bool media = std::any_of(block.begin(), block.end(), [](int32_t t) { return t < 0; });
      if (events_ && g == index_group() && !media) {
        events_->push({KvEvent::Kind::kStored, h, k > 0, parent, std::vector<int32_t>(block.begin(), block.end())});
      }
    }
  }
}

void BlockManager::free(SeqBlocks& s) {
  for (int32_t g = 0; g < static_cast<int32_t>(s.tables.size()); ++g) {
    // Release the tail first: the end of a sequence is the least likely prefix to be shared,
    // so it should be evicted before the blocks in front of it.
    for (auto it = s.tables[g].rbegin(); it != s.tables[g].rend(); ++it)
      if (*it != kNoBlock) kv_.pool(g).release(*it);
    s.tables[g].clear();
  }
  s.hashes.clear();
}

bool BlockManager::can_resume(const SeqBlocks& s, int32_t pos) const {
  const int32_t bt = kv_.block_tokens();
  if (static_cast<int32_t>(s.tables.size()) != kv_.n_groups()) return pos == 0;
  for (int32_t g = 0; g < kv_.n_groups(); ++g)
    for (int32_t b = first_needed_block(g, pos); b * bt < pos; ++b)
      if (b >= static_cast<int32_t>(s.tables[g].size()) || s.tables[g][b] == kNoBlock) return false;
  return true;
}

int32_t BlockManager::truncate(SeqBlocks& s, int32_t n_keep) {
  const int32_t bt = kv_.block_tokens();
  const int32_t partial = n_keep % bt ? n_keep / bt : -1;  // the block positions >= n_keep would be written into
  for (int32_t g = 0; g < static_cast<int32_t>(s.tables.size()) && partial >= 0; ++g)
    if (partial < static_cast<int32_t>(s.tables[g].size()) && s.tables[g][partial] != kNoBlock &&
        kv_.pool(g).ref_count(s.tables[g][partial]) > 1)
      n_keep = partial * bt;  // shared: cannot be rewritten
  const int32_t n_blocks = (n_keep + bt - 1) / bt;
  for (int32_t g = 0; g < static_cast<int32_t>(s.tables.size()); ++g) {
    auto& t = s.tables[g];
    while (static_cast<int32_t>(t.size()) > n_blocks) {
      if (t.back() != kNoBlock) kv_.pool(g).release(t.back());
      t.pop_back();
    }
    if (n_keep % bt == 0 || t.empty() || t.back() == kNoBlock || !has_hash_[g][t.back()]) continue;
    forget(g, t.back());  // its tail will change: no longer that prefix
  }
  if (static_cast<int32_t>(s.hashes.size()) > n_keep / bt) s.hashes.resize(static_cast<size_t>(n_keep / bt));
  return n_keep;
}

int32_t BlockManager::peak_blocks(int32_t g, int32_t n_positions, int32_t chunk) const {
  const int32_t bt = kv_.block_tokens();
  const int32_t all = (n_positions + bt - 1) / bt;
  const int32_t w = kv_.group(g).window;
  if (w <= 0) return all;
  // Keys [q0 - w + 1 - margin, q0 + chunk) for a chunk starting at q0: at most
  // w - 1 + margin + chunk positions, spread over at most one block more than they fill.
  return std::min(all, (w - 1 + margin_ + chunk + bt - 1) / bt + 1);
}

bool BlockManager::fits_alone(int32_t n_positions, int32_t chunk) const {
  for (int32_t g = 0; g < kv_.n_groups(); ++g)
    if (peak_blocks(g, n_positions, chunk) > kv_.pool(g).n_total()) return false;
  return true;
}

}  // namespace sluice
