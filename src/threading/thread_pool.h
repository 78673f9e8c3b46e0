// One persistent pool of worker threads for the whole engine. `run(fn)` calls fn(ith, nth)
// on every worker (the calling thread is worker 0) and returns when all are done; ops are
// written SPMD-style over (ith, nth). Workers spin briefly for the next job (a decode step
// issues hundreds of jobs per token), then sleep on a condition variable, so an idle engine
// burns no CPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);   // n_threads >= 1; 1 means "run inline"
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(ith, nth) for ith in [0, nth) concurrently; returns when all have returned.
  // fn must not throw. Not reentrant.
  void run(const std::function<void(int ith, int nth)>& fn);

  // Default thread count: the physical cores we may use (never more workers than cores).
  static int default_threads();

 private:
  void worker(int ith);

  int n_threads_;
  std::vector<std::thread> threads_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

// Splits [0, n) into nth contiguous ranges; returns worker ith's [begin, end).
inline void split_range(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
  const int64_t per = n / nth, rem = n % nth;
  *begin = ith * per + (ith < rem ? ith : rem);
  *end = *begin + per + (ith < rem ? 1 : 0);
}

}  // namespace sluice
