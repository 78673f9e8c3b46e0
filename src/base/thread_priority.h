// Running a thread below everything else in the process: SCHED_BATCH and nice 19, the lowest
// priority an unprivileged process can give itself (Linux applies both per thread, and a thread
// cannot raise them again). Work a client asked for but the engine must not wait behind —
// grammar compiles (grammar/background.h), the HTTP side routes (tokenize, templates) — runs on
// such threads, so on a host with as many cores as engine threads it takes the CPU time the
// engine leaves instead of a share of the engine's cores.
#pragma once

namespace sluice {

// Lowers the calling thread for good. A failure leaves it where it was: slower neighbours,
// not a broken server.
void lower_this_thread_priority();

// The calling thread's scheduling policy (SCHED_OTHER, SCHED_BATCH, ...) and nice value.
struct ThreadPriority {
  int policy = 0;
  int nice = 0;
};
ThreadPriority this_thread_priority();

}  // namespace sluice
