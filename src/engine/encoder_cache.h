// Encoder outputs kept by content (docs/images.md, "Encoder cache"): a conversation resends its
// images with every turn, and each would be encoded again — seconds of a tower's work for rows
// the server computed a turn ago. The cache maps an encoder input's content key (128 bits of
// hash over its values and its shape) to the soft-token rows the encoder wrote for it, the
// least recently used entries evicted beyond a byte bound. Thread-safe: the HTTP workers look up
// and insert; the engine's step never touches it. The key is a fast hash, not a cryptographic
// one, as the prefix cache's block hashes are: a client able to craft a collision with another
// client's image could hand it its own rows (docs/images.md says so).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace sluice::engine {

struct EncoderKey {
  uint64_t h0 = 0, h1 = 0;  // two independent 64-bit hashes of the values
  int64_t shape = 0;        // the caller's shape (e.g. the patch grid), kept apart from the values
  bool operator==(const EncoderKey&) const = default;
};

// The key of an encoder input: `values` (e.g. a preprocessed image's patches) and its shape.
EncoderKey encoder_key(std::span<const float> values, int64_t shape);

struct EncoderCacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0;
  int64_t entries = 0, bytes = 0, max_bytes = 0;
};

using EncodedRows = std::shared_ptr<const std::vector<float>>;

class EncoderCache {
 public:
  explicit EncoderCache(size_t max_bytes);  // 0: keeps nothing (every find misses)
  // The rows cached for `key` (then the most recently used), or null (a miss, counted).
  EncodedRows find(const EncoderKey& key);
  // find(), except that while another caller holds the encode of the same key it waits for
  // those rows instead of missing (two requests with one new image encode it once). A null
  // return makes this caller the holder: it must end with insert() or abandon() for the key
  // (EncodeClaim does). A cache that keeps nothing never waits.
  EncodedRows acquire(const EncoderKey& key);
  // Keeps `rows` under `key`, evicting the least recently used entries beyond the bound; rows
  // larger than the whole bound are not kept. A key already present keeps its first rows.
  // Releases the key's hold (acquire) either way.
  void insert(const EncoderKey& key, EncodedRows rows);
  // Releases the hold without rows (the encode failed): one waiter becomes the holder.
  void abandon(const EncoderKey& key);
  EncoderCacheStats stats() const;

 private:
  struct KeyHash {
    size_t operator()(const EncoderKey& k) const { return static_cast<size_t>(k.h0 ^ (k.h1 * 0x9e3779b97f4a7c15ull)); }
  };
  struct Entry {
    EncoderKey key;
    EncodedRows rows;
  };
  static size_t bytes_of(const Entry& e) { return e.rows->size() * sizeof(float); }

  void release(const EncoderKey& key);  // under mu_

  mutable std::mutex mu_;
  std::condition_variable released_;
  std::unordered_set<EncoderKey, KeyHash> held_;  // keys a caller is encoding (acquire)
  size_t max_bytes_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<EncoderKey, std::list<Entry>::iterator, KeyHash> index_;
  EncoderCacheStats stats_;
};

// A hold from EncoderCache::acquire that is abandoned unless its rows were inserted: an encode
// that throws (a bad grid, a shutdown) hands the key to the next waiter instead of leaving it
// waiting.
class EncodeClaim {
 public:
  EncodeClaim(EncoderCache& cache, const EncoderKey& key) : cache_(cache), key_(key) {}
  ~EncodeClaim() {
    if (!done_) cache_.abandon(key_);
  }
  EncodeClaim(const EncodeClaim&) = delete;
  EncodeClaim& operator=(const EncodeClaim&) = delete;
  void insert(EncodedRows rows) {
    done_ = true;
    cache_.insert(key_, std::move(rows));
  }

 private:
  EncoderCache& cache_;
  EncoderKey key_;
  bool done_ = false;
};

}  // namespace sluice::engine
