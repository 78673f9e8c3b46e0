// A replica's life as a router sees it (docs/deploy.md "The contract"):
//
//   starting ──set_ready()──▶ ready ──begin_drain()──▶ draining ──stop_admitting()──▶ closed
//   /ready 503                /ready 200               /ready 503                     /ready 503
//   /v1/models 503            /v1/models 200           /v1/models 503                 generation 503 + Retry-After
//
// /health (liveness) answers 200 in every state: it says the process serves HTTP, never that the
// engine is free. Generation requests are admitted until stop_admitting(); each admitted one
// holds a token until its reply is complete, so the shutdown can wait for the count to reach 0.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace sluice::server {

class Lifecycle {
 public:
  enum class State : int { kStarting, kReady, kDraining, kClosed };

  void set_ready();  // starting → ready; no effect once a drain began
  void begin_drain();
  void stop_admitting();

  State state() const { return state_.load(); }
  bool ready() const { return state() == State::kReady; }
  bool draining() const { return state() >= State::kDraining; }
  bool admitting() const { return state() != State::kClosed; }

  // A token for one admitted generation request (released when the last copy goes), or null
  // when requests are no longer admitted.
  std::shared_ptr<void> enter();
  int in_flight() const;
  // Waits until no admitted request is left or `deadline` passes; true: none left.
  bool wait_idle(std::chrono::steady_clock::time_point deadline);

 private:
  void leave();

  std::atomic<State> state_{State::kStarting};
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ = 0;
};

}  // namespace sluice::server
