#include "threading/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include "base/error.h"

namespace sluice {

// Memory order (all of it must hold on ARM's weak model, not only on x86's): job_ and pending_
// are published to the workers by the generation_ increment (a release) and read after their
// acquire load of it; a worker's writes reach the caller through its acq_rel decrement of
// pending_ and the caller's acquire load. In barrier() the arrivals' acq_rel increments form
// one release sequence that the last arriver acquires, and its release of barrier_gen_ passes
// them all on to the waiters' acquire loads (the count's relaxed reset with them). Relaxed
// on purpose: hot_ (only a spin policy) and the sleepers_ decrement; the sleepers_ handshake
// itself is sequentially consistent (run_job).
namespace {
constexpr int kSpinIterations = 1 << 14;  // pause loops before an idle worker sleeps

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");  // the spin-wait hint (a no-op on cores without SMT)
#endif
}

// Waits for `done()` by spinning; after a while it also yields the core, so that when more
// threads than cores are runnable (a busy machine) the thread we wait for can run.
template <class Done>
inline void spin_until(Done done) {
  for (int i = 0; !done(); ++i) {
    cpu_relax();
    if (i >= 4096) sched_yield();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1) fail("thread count must be >= 1 (got %d)", n_threads);
  for (int i = 1; i < n_threads; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

int ThreadPool::default_threads() {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

void ThreadPool::run_job(Job job) {
  if (n_threads_ == 1) {
    job.call(job.obj, 0, 1);
    return;
  }
  job_ = job;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  // Spinning workers see the new generation; the mutex and the condition variable are only
  // touched when a worker may be asleep. Both sides use sequentially consistent operations
  // (here: generation then sleepers; a worker: sleepers then generation, under the lock), so
  // either we see its sleepers_ increment and wake it, or it sees the new generation.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_.notify_all();
  }
  job.call(job.obj, 0, n_threads_);
  spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::barrier() {
  if (n_threads_ == 1) return;
  const uint32_t gen = barrier_gen_.load(std::memory_order_acquire);
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
    barrier_count_.store(0, std::memory_order_relaxed);
    barrier_gen_.fetch_add(1, std::memory_order_release);
  } else {
    spin_until([&] { return barrier_gen_.load(std::memory_order_acquire) != gen; });
  }
}

void ThreadPool::worker(int ith) {
  pthread_setname_np(pthread_self(), "sluice-pool");  // top -H, /proc/<pid>/task/*/comm
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen &&
           (hot_.load(std::memory_order_relaxed) > 0 || spins < kSpinIterations)) {
      cpu_relax();
      if (++spins >= 4096 && (spins & 255) == 0) sched_yield();
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lk, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    job_.call(job_.obj, ith, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace sluice
