// Running a thread below everything else in the process, as low as an unprivileged process can
// put itself (Linux applies policy and nice per thread; a thread cannot raise them again). Work
// a client asked for but the engine must not wait behind — grammar compiles
// (grammar/background.h), the HTTP side routes (tokenize, templates) and lingering closes — runs
// on such threads, so on a host with as many cores as engine threads it takes the CPU time the
// engine leaves instead of a share of the engine's cores.
#pragma once

namespace sluice {

// kBatch: SCHED_BATCH + nice 19 (a CFS weight of 15 against a normal thread's 1024). kIdle:
// SCHED_IDLE (weight 3), and a normal thread that wakes takes the core from it at once: work
// that waits for nobody but its own client (the side routes, the lingering closes).
enum class Below { kBatch, kIdle };

// Lowers the calling thread for good. A failure leaves it where it was: slower neighbours,
// not a broken server.
void lower_this_thread_priority(Below how = Below::kBatch);

// The calling thread's scheduling policy (SCHED_OTHER, SCHED_BATCH, ...) and nice value.
struct ThreadPriority {
  int policy = 0;
  int nice = 0;
};
ThreadPriority this_thread_priority();

}  // namespace sluice
