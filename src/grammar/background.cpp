#include "grammar/background.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace sluice::grammar {

namespace {

thread_local bool t_on_worker = false;

constexpr int kLowestNice = 19;

pid_t thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// SCHED_BATCH: the thread is treated as CPU-bound and never preempts the engine on waking;
// nice 19: its CFS weight is 15 against the engine threads' 1024. Both are allowed to an
// unprivileged process (lowering only) and both apply to this thread alone. A failure leaves
// the thread at normal priority: slower neighbours, not a broken server.
void lower_this_thread() {
  sched_param p{};
  p.sched_priority = 0;
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &p);
  setpriority(PRIO_PROCESS, static_cast<id_t>(thread_id()), kLowestNice);
}

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

LowPriorityWorker::Priority LowPriorityWorker::current_priority() {
  Priority p;
  p.policy = sched_getscheduler(0);
  errno = 0;
  p.nice = getpriority(PRIO_PROCESS, static_cast<id_t>(thread_id()));
  return p;
}

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
  lower_this_thread();
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
