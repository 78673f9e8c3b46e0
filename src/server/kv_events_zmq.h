// KV-cache events on ZeroMQ, in the frames and payloads llm-d's KV indexer reads from vLLM
// (docs/deploy.md "Precise prefix-cache routing"):
//   one message = 3 frames: topic "kv@<pod>@<model>", an 8-byte big-endian sequence number
//   (0, 1, 2 ... with no gap), and a msgpack EventBatch, vLLM's array layout:
//     [ts (float64 seconds), [event...], data_parallel_rank (0)]
//     ["BlockStored", [hash], parent hash | nil, [token id...], block_size, nil, nil, nil]
//     ["BlockRemoved", [hash], nil]
//     ["AllBlocksCleared"]
// Hashes are sluice's own 64-bit block hashes (unsigned); a consumer keys on the token ids.
// The endpoint binds when it names no host ("tcp://*:5557") and connects otherwise, as vLLM's
// publisher does. A publisher thread drains the engine's KvEventLog every few ms; the engine
// never waits on the network. Built only with ZeroMQ and msgpack-c (SLUICE_HAVE_ZMQ):
// without them available() is false and --kv-events is refused.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kv/kv_events.h"

namespace sluice::server {

// The msgpack payload of one batch (the third frame).
std::string encode_kv_batch(const std::vector<KvEvent>& events, int32_t block_size, double ts);

class KvEventPublisher {
 public:
  static bool available();  // built with ZeroMQ

  KvEventPublisher(KvEventLog& log, std::string endpoint, std::string topic);
  ~KvEventPublisher();  // stop()
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void start();  // binds or connects (throws sluice::Error on a bad endpoint), then publishes
  void stop();   // publishes what is left, then closes

 private:
  void loop();

  KvEventLog& log_;
  std::string endpoint_, topic_;
  struct Socket;
  std::unique_ptr<Socket> sock_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::server
