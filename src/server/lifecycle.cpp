#include "server/lifecycle.h"

namespace sluice::server {

void Lifecycle::set_ready() {
  State expected = State::kStarting;
  state_.compare_exchange_strong(expected, State::kReady);
}

void Lifecycle::begin_drain() {
  State s = state_.load();
  while (s < State::kDraining && !state_.compare_exchange_weak(s, State::kDraining)) {
  }
}

void Lifecycle::stop_admitting() {
  // Under the mutex: enter() checks the state and counts in one step, so after this returns no
  // request can slip in unseen by wait_idle().
  std::lock_guard<std::mutex> lk(mu_);
  state_ = State::kClosed;
}

std::shared_ptr<void> Lifecycle::enter() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_.load() == State::kClosed) return nullptr;
    ++in_flight_;
  }
  return std::shared_ptr<void>(this, [](Lifecycle* l) { l->leave(); });
}

void Lifecycle::leave() {
  std::lock_guard<std::mutex> lk(mu_);
  if (--in_flight_ == 0) idle_.notify_all();
}

int Lifecycle::in_flight() const {
  std::lock_guard<std::mutex> lk(mu_);
  return in_flight_;
}

bool Lifecycle::wait_idle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  return idle_.wait_until(lk, deadline, [&] { return in_flight_ == 0; });
}

}  // namespace sluice::server
