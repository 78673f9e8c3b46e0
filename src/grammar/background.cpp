#include "grammar/background.h"

#include <pthread.h>

#include <ctime>

#include "base/thread_priority.h"

namespace sluice::grammar {

namespace {

thread_local bool t_on_worker = false;

}  // namespace

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

LowPriorityWorker::LowPriorityWorker() = default;

LowPriorityWorker::~LowPriorityWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LowPriorityWorker::on_worker() { return t_on_worker; }

void LowPriorityWorker::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_one();
}

void LowPriorityWorker::loop() {
  t_on_worker = true;
  // Named for itself: a thread inherits its creator's name (an HTTP worker's, here).
  pthread_setname_np(pthread_self(), "sluice-grammar");
  lower_this_thread_priority();
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) {
      jobs_.clear();  // their packaged tasks, destroyed unrun, fail the waiters
      return;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();  // a packaged task: its exception goes to the waiter
    lock.lock();
  }
}

}  // namespace sluice::grammar
