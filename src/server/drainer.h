// Lingering closes below the engine's priority. A connection closed with request bytes still
// coming (a body refused with a 429 before it was read, or any close after a reply) must read
// and discard them for a while: closing with unread bytes makes the kernel send a reset, which
// can destroy the answer before the client reads it. Forty clients each pushing a refused 8 MiB
// body is 288 MB to receive; on the I/O threads, at normal priority, that doubled a running
// chat's decode steps on a 2-core host. Here one thread at SCHED_IDLE (as the side routes'
// workers) reads them all through epoll into one discard buffer, each socket until its
// peer's end, its byte budget or its deadline, whichever comes first, then closes it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice::server {

// Where every discarded byte goes (the drainer's and a strand's that lingers itself): one buffer
// for all, never read by anyone (only the kernel writes it), so a lingering connection costs no
// memory of its own and a refused 8 MiB body takes 128 reads.
inline constexpr size_t kDiscardBytes = 64u << 10;
extern char g_discard[kDiscardBytes];

class Drainer {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Drainer(size_t max_sockets);
  ~Drainer();  // stops the thread and closes every socket it holds
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  // A place for one socket; false when full or not running (the caller lingers itself).
  bool reserve();
  void unreserve();  // a place reserved and not used
  // Takes `fd` into a reserved place (its send side already shut down): discards what arrives
  // until the peer's end, `max_bytes` or `linger`, then closes it.
  void take(int fd, size_t max_bytes, std::chrono::milliseconds linger);
  size_t held() const;

 private:
  struct Entry {
    Clock::time_point deadline;
    size_t left;
  };
  void loop();
  void adopt();                      // the drainer thread: the sockets take() queued
  void drop(int fd);                 // the drainer thread
  bool read_some(int fd, Entry& e);  // false: done with it

  const size_t max_sockets_;
  int epoll_ = -1, wake_ = -1;
  std::atomic<size_t> held_{0};
  std::atomic<bool> stop_{false};
  // take() only queues, under a lock held for a push: the drainer runs at SCHED_IDLE and must never
  // hold anything an I/O thread waits for.
  std::mutex in_mu_;
  std::vector<std::pair<int, Entry>> incoming_;
  std::unordered_map<int, Entry> fds_;  // the drainer thread's own
  std::thread thread_;
};

}  // namespace sluice::server
