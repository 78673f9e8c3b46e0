// KV block accounting for many sequences over one KvCache, with prefix caching.
//
// Every sequence owns one append-only block table per layer group (SeqBlocks). A block that
// is full — all block_tokens positions computed — is published in its group's prefix cache
// under a hash chained over the whole token prefix up to its end:
//     h_0 = H(seed, tokens[0, bt)),  h_k = H(h_{k-1}, tokens[k·bt, (k+1)·bt))
// so equal hashes mean equal prefixes (64-bit XXH3; a collision is a ~2^-64 event per pair
// and is not checked). A released block keeps its hash while it waits in the pool's free
// list; it is forgotten only when allocate() hands it out again (LRU eviction, since freed
// blocks go to the back of the list).
//
// What a new sequence can reuse (docs/serving.md has the longer story):
//  * global groups (window 0): every block of the prefix, from block 0 on;
//  * sliding groups (window w): only the blocks a query at the resume position P can see,
//    i.e. those holding positions >= P - w + 1; the older ones were released while the first
//    sequence ran, and nobody needs them again;
//  * layers that own no K/V (Gemma 4 shared layers) read their source layer's blocks, so
//    reusing the source group's blocks covers them.
// A prefix of k blocks is a hit only if every group can serve its part of it; at least one
// prompt token is always left to compute (its logits start the generation).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_events.h"

namespace sluice {

using BlockHash = uint64_t;

// Hash of a full block of tokens that follows a prefix whose hash is `parent`
// (kRootHash for the first block).
inline constexpr BlockHash kRootHash = 0x5157'ca11'0b10'c4a5ull;
BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);
// Hash of `n` bytes after `seed`: media content (an image's encoder rows) for the block keys of
// the positions it fills (engine/media_keys.h).
uint64_t hash_bytes(uint64_t seed, const void* data, size_t n);

// One sequence's blocks. Owned by the engine's sequence state, managed by BlockManager.
struct SeqBlocks {
  std::vector<std::vector<BlockId>> tables;  // [group][block index]; kNoBlock = not held
  std::vector<BlockHash> hashes;             // hash of each full block computed so far
  bool empty() const;
};

struct PrefixCacheStats {
  int64_t queries = 0;       // match_prefix calls
  int64_t hit_tokens = 0;    // positions reused instead of computed
  int64_t query_tokens = 0;  // prompt positions looked up
};

class BlockManager {
 public:
  explicit BlockManager(KvCache& kv, bool prefix_caching = true);
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  KvCache& kv() { return kv_; }
  int32_t block_tokens() const { return kv_.block_tokens(); }

  // For a sequence with no blocks yet: takes the longest cached prefix of `tokens` (whole
  // blocks, fewer than tokens.size() positions) and returns its length in positions.
  int32_t match_prefix(SeqBlocks& s, std::span<const int32_t> tokens);

  // Makes positions [first_query, end) writable and everything queries there can see
  // backed by blocks. All or nothing: false (nothing allocated) if a pool runs short.
  bool reserve(SeqBlocks& s, int32_t first_query, int32_t end);

  // Sliding groups keep `n` positions more below each query's window: for a drafter that
  // reads the cache wider than the target (Gemma 4's assistant sees window + 1 positions
  // ending one before its query: 2). Set before any sequence holds blocks.
  void set_window_margin(int32_t n) { margin_ = n; }

  // Sliding groups: returns blocks no query at position >= first_query can see.
  void release_outside_window(SeqBlocks& s, int32_t first_query);

  // Publishes the blocks that [0, n_computed) has filled since the last call.
  void publish_full_blocks(SeqBlocks& s, std::span<const int32_t> tokens, int32_t n_computed);

  // Releases every block of the sequence (cached ones stay findable until reused).
  void free(SeqBlocks& s);

  // Whether a query at position `pos` could run now reusing the sequence's blocks: every
  // block holding a key position below `pos` that the query sees is still held.
  bool can_resume(const SeqBlocks& s, int32_t pos) const;
  // Shrinks the sequence to positions [0, n_keep) so later positions can be rewritten:
  // blocks past them are released and the block n_keep falls in leaves the prefix cache.
  // A block another sequence shares cannot be rewritten: then the sequence keeps only the
  // whole blocks before it. Returns the positions kept (<= n_keep).
  int32_t truncate(SeqBlocks& s, int32_t n_keep);

  // Blocks group g must hold at once for one sequence of n_positions computed in chunks of
  // at most `chunk` tokens (sliding groups need only the window plus one chunk).
  int32_t peak_blocks(int32_t g, int32_t n_positions, int32_t chunk) const;
  // Whether such a sequence could ever run, alone with the whole pool.
  bool fits_alone(int32_t n_positions, int32_t chunk) const;

  int32_t n_groups() const { return kv_.n_groups(); }
  int32_t n_used(int32_t g) const { return kv_.pool(g).n_used(); }
  int32_t n_total(int32_t g) const { return kv_.pool(g).n_total(); }
  int32_t n_cached(int32_t g) const { return static_cast<int32_t>(cached_[g].size()); }
  int32_t n_used_all() const;
  const PrefixCacheStats& prefix_stats() const { return stats_; }

  // The group whose cached blocks stand for "this prefix is cached" to the outside (KV events,
  // vllm:cache_config_info): the first global (window 0) group, which holds every block of a
  // prefix; else group 0. Reuse also needs a sliding group's blocks near the resume point, so
  // this group's set is an upper bound of what the next request can reuse.
  int32_t index_group() const;
  // Reports the index group's prefix cache to `log` from now on (stored when a full block is
  // published, removed when a cached block's hash is forgotten). Not owned; null: none.
  void set_event_log(KvEventLog* log) { events_ = log; }

 private:
  BlockId take(int32_t g);            // allocate, forgetting an evicted block's hash
  void forget(int32_t g, BlockId b);  // drops b's hash from the prefix cache
  void hold(int32_t g, BlockId b);    // one more reference to a cached block
  int32_t first_needed_block(int32_t g, int32_t first_query) const;

  KvCache& kv_;
  bool prefix_caching_;
  int32_t margin_ = 0;                                          // set_window_margin
  std::vector<std::unordered_map<BlockHash, BlockId>> cached_;  // [group] hash -> block
  std::vector<std::vector<BlockHash>> block_hash_;              // [group][block]
  std::vector<std::vector<uint8_t>> has_hash_;                  // [group][block]
  PrefixCacheStats stats_;
  KvEventLog* events_ = nullptr;
};

}  // namespace sluice
