// One persistent pool of worker threads for the whole engine. `run(fn)` calls fn(ith, nth)
// on every worker (the calling thread is worker 0) and returns when all are done; ops are
// written SPMD-style over (ith, nth), and may synchronize inside a job with `barrier()`.
//
// Spinning: a decode step issues hundreds of short jobs, so between jobs the workers spin on
// the job counter. While a `StepScope` is alive they spin without limit (a step is running);
// otherwise they spin briefly and then sleep on a condition variable, so an idle engine burns
// no CPU. `run` never allocates: the job is passed by reference, not as a std::function.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace sluice {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads >= 1; 1 means "run inline"
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(ith, nth) for ith in [0, nth) concurrently; returns when all have returned.
  // fn must not throw. Not reentrant (a job must not call run).
  template <class Fn>
  void run(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_job(Job{const_cast<void*>(static_cast<const void*>(&fn)),
                [](void* obj, int ith, int nth) { (*static_cast<F*>(obj))(ith, nth); }});
  }

  // Inside a job: waits until every worker of the job has reached the same barrier.
  void barrier();

  // While one is alive, idle workers spin instead of sleeping (keep it to the duration of a
  // step: spinning costs a core).
  class StepScope {
   public:
    explicit StepScope(ThreadPool& p) : p_(p) { p_.hot_.fetch_add(1, std::memory_order_relaxed); }
    ~StepScope() { p_.hot_.fetch_sub(1, std::memory_order_relaxed); }
    StepScope(const StepScope&) = delete;
    StepScope& operator=(const StepScope&) = delete;

   private:
    ThreadPool& p_;
  };

  // Default thread count: the physical cores we may use (never more workers than cores).
  static int default_threads();

 private:
  struct Job {
    void* obj;
    void (*call)(void* obj, int ith, int nth);
  };
  void run_job(Job job);
  void worker(int ith);

  int n_threads_;
  std::vector<std::thread> threads_;
  Job job_{nullptr, nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> hot_{0};
  std::atomic<int> sleepers_{0};  // workers waiting on cv_ (or about to)
  std::atomic<bool> stop_{false};
  std::atomic<int> barrier_count_{0};
  std::atomic<uint32_t> barrier_gen_{0};
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
