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

// SCHED_BATCH: the thread is treated as CPU-bound and never preempts others on waking;
// nice 19: its CFS weight is 15 against a normal thread's 1024.
void lower_this_thread_priority() {
  sched_param p{};
  p.sched_priority = 0;
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &p);
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
