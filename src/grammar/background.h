// Grammar work a request waits for but the engine must not wait behind: first-use compiles and
// the analysis of positions a compile deferred run on one worker thread at the lowest priority an
// unprivileged process can give itself (SCHED_BATCH, nice 19: base/thread_priority.h).
// On a host with as many cores as engine threads, a fresh grammar then takes the CPU time the
// engine leaves, instead of a share of the engine's cores (issue 41: a stream's inter-token p99
// rose 2.4x beside clients sending never-seen grammars while the work ran at normal priority).
//
// Budgets in the grammar code are thread CPU time (thread_cpu_ms), so running slower at low
// priority does not change how much is analysed or when a limit trips.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

namespace sluice::grammar {

// CPU time of the calling thread, in milliseconds.
double thread_cpu_ms();

class LowPriorityWorker {
 public:
  LowPriorityWorker();
  ~LowPriorityWorker();  // joins; jobs not yet started fail their waiters (broken promise)
  LowPriorityWorker(const LowPriorityWorker&) = delete;
  LowPriorityWorker& operator=(const LowPriorityWorker&) = delete;

  // Runs `fn` on the worker and waits for it; its exception is rethrown here. On the worker
  // itself (a job that asks for more grammar work) `fn` runs inline, so nothing waits on itself.
  template <class Fn>
  auto run(Fn&& fn) -> decltype(fn()) {
    using T = decltype(fn());
    if (on_worker()) return fn();
    auto task = std::make_shared<std::packaged_task<T()>>(std::forward<Fn>(fn));
    std::future<T> done = task->get_future();
    submit([task] { (*task)(); });
    return done.get();
  }
  static bool on_worker();

 private:
  void submit(std::function<void()> job);
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;  // started on the first job
};

}  // namespace sluice::grammar
