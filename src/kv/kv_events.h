// Prefix-cache events, as plain data: what a router that routes by cached prefixes (llm-d's
// KV indexer, docs/deploy.md) needs to mirror one replica's prefix cache.
//
//   engine thread (BlockManager)            publisher thread (server/kv_events_zmq.cpp)
//   push(stored | removed) ──▶ KvEventLog ──▶ take() → one batch on the wire
//
// A stored event is a full block that became findable by its hash: the hash, its parent's
// (none for a prompt's first block) and the block's token ids. A removed event is a cached
// block whose hash was forgotten (evicted for reuse, or rewritten). "Cleared" says the cache is
// empty: the log starts with one, so a subscriber that sees a replica restart drops what it
// held. The log is unbounded only in the sense that the publisher drains it every few ms; the
// engine never waits on it beyond one mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sluice {

struct KvEvent {
  enum class Kind : uint8_t { kStored, kRemoved, kCleared };
  Kind kind = Kind::kCleared;
  uint64_t hash = 0;
  bool has_parent = false;  // stored: false for a prompt's first block
  uint64_t parent = 0;
  std::vector<int32_t> tokens;  // stored: the block's block_tokens token ids
};

class KvEventLog {
 public:
  explicit KvEventLog(int32_t block_tokens);

  int32_t block_tokens() const { return block_tokens_; }
  void push(KvEvent e);
  // Everything pushed since the last take, in order; waits up to `timeout` for the first.
  std::vector<KvEvent> take(std::chrono::milliseconds timeout);
  void close();  // wakes a waiting take(); later pushes are still kept

 private:
  int32_t block_tokens_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<KvEvent> pending_;
  bool closed_ = false;
};

}  // namespace sluice
