#include "base/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace sluice {

namespace {

constexpr int kLowestNice = 19;

// setpriority(PRIO_PROCESS, tid) is per thread on Linux: the thread id, not the process id.
id_t thread_id() { return static_cast<id_t>(syscall(SYS_gettid)); }

}  // namespace

// SCHED_BATCH: the thread is treated as CPU-bound and never preempts others on waking, but a
// normal thread that wakes beside it may still wait out its slice; nice 19: its CFS weight is
// 15 against a normal thread's 1024. SCHED_IDLE threads are preempted by any normal one that
// wakes: on a 2-core host, side threads at SCHED_BATCH still ran 3-13 ms inside a chat's 8 ms
// prefill step (their run time in /proc/<tid>/schedstat); at SCHED_IDLE, under 1 ms.
void lower_this_thread_priority(Below how) {
  sched_param p{};
  p.sched_priority = 0;
  pthread_setschedparam(pthread_self(), how == Below::kIdle ? SCHED_IDLE : SCHED_BATCH, &p);
  setpriority(PRIO_PROCESS, thread_id(), kLowestNice);
}

ThreadPriority this_thread_priority() {
  ThreadPriority p;
  p.policy = sched_getscheduler(0);
  errno = 0;
  p.nice = getpriority(PRIO_PROCESS, thread_id());
  return p;
}

}  // namespace sluice
