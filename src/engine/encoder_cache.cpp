#include "engine/encoder_cache.h"

#include "kv/block_manager.h"

namespace sluice::engine {

EncoderKey encoder_key(std::span<const float> values, int64_t shape) {
  EncoderKey k;
  const size_t n = values.size_bytes();
  k.h0 = hash_bytes(0x1d5e'e7c0'de00'0001ull, values.data(), n);
  k.h1 = hash_bytes(0x6a09'e667'f3bc'c909ull, values.data(), n);
  k.shape = shape;
  return k;
}

EncoderCache::EncoderCache(size_t max_bytes) : max_bytes_(max_bytes) {
  stats_.max_bytes = static_cast<int64_t>(max_bytes);
}

EncodedRows EncoderCache::find(const EncoderKey& key) {
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->rows;
}

EncodedRows EncoderCache::acquire(const EncoderKey& key) {
  std::unique_lock<std::mutex> lk(mu_);
  if (max_bytes_ == 0) {
    ++stats_.misses;
    return nullptr;
  }
  released_.wait(lk, [&] { return held_.count(key) == 0; });
  const auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    held_.insert(key);
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->rows;
}

void EncoderCache::release(const EncoderKey& key) {
  if (held_.erase(key)) released_.notify_all();
}

void EncoderCache::abandon(const EncoderKey& key) {
  std::lock_guard<std::mutex> lk(mu_);
  release(key);
}

void EncoderCache::insert(const EncoderKey& key, EncodedRows rows) {
  std::lock_guard<std::mutex> lk(mu_);
  release(key);
  if (!rows || rows->size() * sizeof(float) > max_bytes_) return;
  if (index_.count(key)) return;
  lru_.push_front({key, std::move(rows)});
  index_.emplace(key, lru_.begin());
  stats_.bytes += static_cast<int64_t>(bytes_of(lru_.front()));
  ++stats_.entries;
  while (static_cast<size_t>(stats_.bytes) > max_bytes_) {
    const Entry& last = lru_.back();
    stats_.bytes -= static_cast<int64_t>(bytes_of(last));
    --stats_.entries;
    ++stats_.evictions;
    index_.erase(last.key);
    lru_.pop_back();
  }
}

EncoderCacheStats EncoderCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace sluice::engine
