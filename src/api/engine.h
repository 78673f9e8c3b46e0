// The engine as a service: one engine thread runs EngineCore's step loop; any thread may
// submit requests and read their outputs through a RequestHandle. This is the only header
// the HTTP server uses — it never reaches into the scheduler or the model.
//
//   HTTP thread                         engine thread
//   submit(EngineRequest) ──inbox──▶    core.add / core.abort, core.step()
//   handle.wait(timeout)  ◀─stream──    outputs of every step, per request
//   ~RequestHandle / cancel() ──────▶   abort: blocks freed before the next step runs
//
// The engine thread sleeps on a condition variable while there is no work.
//
// Work that needs the engine's cores but is not a step (an image encode) is handed over with
// run_between_steps: the engine thread runs it in pieces between steps, each turn for about one
// step's time while requests run, so it shares the cores instead of competing with the step's
// threads for them, and a running request's next token waits at most about one step more.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/latency.h"
#include "base/error.h"
#include "engine/encoder_cache.h"
#include "engine/engine_core.h"
#include "engine/request.h"

namespace sluice::api {

using engine::EngineRequest;
using engine::FinishReason;
using engine::GrammarConstraint;
using engine::RequestId;
using engine::SoftTokens;
using engine::TokenLogprob;
using engine::TokenOutput;

struct StreamState;
struct Inbox;
struct SharedWorkSlot;

// What Engine::run_between_steps throws when the engine stops before the work ends (a server
// answers 503: the request was fine, the replica is going away).
class ShuttingDown : public Error {
 public:
  using Error::Error;
};

// Work run by the engine thread between steps (Engine::run_between_steps): an image encode
// (models::EncodeJob). It may use the engine's thread pool: no step runs meanwhile.
class BetweenSteps {
 public:
  virtual ~BetweenSteps() = default;
  // Works for about `budget` (at least one piece, however short the budget); true once complete.
  virtual bool run_for(std::chrono::nanoseconds budget) = 0;
};

// How the engine thread shared its time (EngineSnapshot::shared), for /metrics and tests.
struct SharedWorkStats {
  uint64_t jobs = 0;           // completed (or failed)
  uint64_t turns = 0;          // run_for calls
  uint64_t turns_between = 0;  // of which ran while requests were running (with a step's budget)
  uint64_t turns_skipped = 0;  // turns not taken right after a long prefill step
  double seconds = 0;          // in run_for
};

// The consumer's end of one request. Destroying it (or cancel()) aborts the request if it
// has not finished, so a handler that returns early — client gone, exception — leaks nothing.
class RequestHandle {
 public:
  RequestHandle(std::shared_ptr<StreamState> s, std::shared_ptr<Inbox> inbox);
  ~RequestHandle();
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;

  RequestId id() const;
  // Outputs that arrived, waiting up to `timeout` for the first; empty on timeout.
  std::vector<TokenOutput> wait(std::chrono::milliseconds timeout);
  bool finished() const;  // the final output has been returned by wait()
  void cancel();          // idempotent

 private:
  std::shared_ptr<StreamState> s_;
  std::shared_ptr<Inbox> inbox_;
  bool finished_ = false;
};

enum class SubmitStatus { kOk, kInvalid, kQueueFull, kShuttingDown };

struct SubmitResult {
  SubmitStatus status = SubmitStatus::kOk;
  std::string error;                      // for kInvalid
  std::unique_ptr<RequestHandle> handle;  // for kOk
};

// A group of requests admitted together (one API request's n choices).
struct SubmitGroupResult {
  SubmitStatus status = SubmitStatus::kOk;
  std::string error;                                    // for kInvalid
  std::vector<std::unique_ptr<RequestHandle>> handles;  // for kOk: one per request, in order
};

struct EngineOptions {
  engine::EngineConfig core;
  int32_t max_waiting = 64;        // requests queued beyond the running ones; more get kQueueFull
  size_t encoder_cache_bytes = 0;  // encoder outputs kept by content (encoder_cache()); 0: none
};

struct EngineSnapshot {
  engine::EngineStats stats;
  int32_t n_queued = 0;       // waiting in the scheduler or not yet picked up
  LatencySnapshot ttft, itl;  // seconds
  SharedWorkStats shared;
  engine::EncoderCacheStats encoder_cache;
};

class Engine {
 public:
  Engine(models::Model& model, KvCache& kv, const EngineOptions& opt);
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates what the engine can (prompt length against context and pool, sampling
  // parameters) on the caller's thread, then queues the request. Assigns r.id.
  SubmitResult submit(EngineRequest r);
  // All of `rs` or none: either every request is queued, or nothing is and the status says
  // why. A refused group holds no room, so a client that keeps sending groups that do not
  // fit takes no place from anyone else. A group larger than capacity() is kInvalid.
  SubmitGroupResult submit_group(std::vector<EngineRequest> rs);
  std::optional<std::string> check_admissible(int32_t n_prompt) const { return core_.check_admissible(n_prompt); }

  EngineSnapshot snapshot() const;
  const engine::EngineConfig& config() const { return core_.config(); }
  const models::ModelSpec& spec() const { return core_.spec(); }
  int32_t max_waiting() const { return opt_.max_waiting; }
  // Requests the engine holds at most: running plus waiting.
  int32_t capacity() const { return core_.config().sched.max_running + opt_.max_waiting; }

  // Runs `work` on the engine thread between steps until it completes (one work at a time, in
  // arrival order); the caller blocks meanwhile. While requests run, each turn gets about one
  // step's time (the recent steps' average, at least kMinTurn) — none right after a long
  // prefill step unless the turn before was skipped too; an idle engine gives it
  // kIdleTurn at a time, looking at its inbox in between. Rethrows what the work threw; throws
  // ShuttingDown when the engine shuts down first.
  void run_between_steps(BetweenSteps& work);
  // Encoder outputs by content, shared by every request (engine/encoder_cache.h): whoever
  // encodes media for a request looks here first. Thread-safe.
  engine::EncoderCache& encoder_cache() { return encoder_cache_; }
  static constexpr std::chrono::microseconds kMinTurn{500}, kIdleTurn{20000};
  static constexpr double kLongStep = 1.5;  // a step that prefilled and took this many decode steps

  // Stops the loop: queued and running requests end with kAbort. Idempotent.
  void shutdown();

 private:
  void loop();
  void take_inbox(std::vector<std::pair<EngineRequest, std::shared_ptr<StreamState>>>& adds,
                  std::vector<RequestId>& cancels);
  void step(std::vector<TokenOutput>& outs);
  void share_turn();
  void run_shared_work(bool between_steps);
  void fail_shared_work(const char* why);
  void dispatch(std::vector<TokenOutput>& outs);
  void publish_stats();
  std::optional<std::string> check_request(const EngineRequest& r) const;

  EngineOptions opt_;
  engine::EngineCore core_;  // touched only by the engine thread after construction
  std::shared_ptr<Inbox> inbox_;
  std::unordered_map<RequestId, std::shared_ptr<StreamState>> streams_;  // engine thread only
  mutable std::mutex stats_mu_;
  engine::EngineStats stats_;
  LatencyHistogram ttft_, itl_;
  std::deque<std::shared_ptr<SharedWorkSlot>> shared_;  // engine thread only: taken from the inbox
  double step_ns_ = 0;                                  // the recent steps' duration (moving average)
  double decode_ns_ = 0;                                // the same over steps that prefilled nothing
  bool long_step_ = false;                              // the last step prefilled and took > kLongStep decode steps
  bool skipped_turn_ = false;                           // the turn after the last step was skipped
  SharedWorkStats shared_stats_;                        // under stats_mu_
  engine::EncoderCache encoder_cache_;
  std::thread thread_;
};

}  // namespace sluice::api
