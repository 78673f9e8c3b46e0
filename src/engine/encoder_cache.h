// Encoder outputs kept by content (docs/images.md, "Encoder cache"): a conversation resends its
// images with every turn, and each would be encoded again — seconds of a tower's work for rows
// the server computed a turn ago. The cache maps an encoder input's content key (128 bits of
// hash over its values and its shape) to the soft-token rows the encoder wrote for it, the
// least recently used entries evicted beyond a byte bound. Thread-safe: the HTTP workers look up
// and insert; the engine's step never touches it. The key is a fast hash, not a cryptographic
// one, as the prefix cache's block hashes are: a client able to craft a collision with another
// client's image could hand it its own rows (docs/images.md says so).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
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
  // Keeps `rows` under `key`, evicting the least recently used entries beyond the bound; rows
  // larger than the whole bound are not kept. A key already present keeps its first rows.
  void insert(const EncoderKey& key, EncodedRows rows);
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

  mutable std::mutex mu_;
  size_t max_bytes_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<EncoderKey, std::list<Entry>::iterator, KeyHash> index_;
  EncoderCacheStats stats_;
};

}  // namespace sluice::engine
