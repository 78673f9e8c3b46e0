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
//
// Replay (--kv-events-replay, vLLM's replay_endpoint): a ROUTER socket, always bound, served by
// the same publisher thread. The last `replay_batches` messages are kept as (seq, payload).
//   request (REQ client):  [start seq, 8 bytes big-endian]   (the ROUTER sees [id, "", seq])
//   reply, per kept batch with seq >= start, in order:  [seq (8 bytes BE), payload]
//   then the end marker:                                 [0xFF x 8 (-1), ""]
// The topic is not repeated. A start older than the oldest kept batch gets what is kept: the
// first seq returned tells the client how much it lost. A request that is not 3 frames at the
// ROUTER, or whose seq is not 8 bytes, is ignored (logged), as vLLM ignores one that is not 3.
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

  static constexpr size_t kDefaultReplayBatches = 10000;  // vLLM's buffer_steps default

  // replay_endpoint empty: no replay socket (and nothing kept).
  KvEventPublisher(KvEventLog& log, std::string endpoint, std::string topic, std::string replay_endpoint = {},
                   size_t replay_batches = kDefaultReplayBatches);
  ~KvEventPublisher();  // stop()
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void start();  // binds or connects, binds the replay socket (sluice::Error on a bad endpoint), then publishes
  void stop();   // publishes what is left, then closes

 private:
  void loop();
  void send_batch(uint64_t seq, std::string payload);  // publishes, and keeps it for replay
  void serve_replay();                                 // answers the requests waiting, if any

  KvEventLog& log_;
  std::string endpoint_, topic_, replay_endpoint_;
  size_t replay_batches_;
  struct Socket;
  std::unique_ptr<Socket> sock_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::server
