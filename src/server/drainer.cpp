#include "server/drainer.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "base/thread_priority.h"

namespace sluice::server {

char g_discard[kDiscardBytes];

Drainer::Drainer(size_t max_sockets) : max_sockets_(max_sockets) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_ < 0 || wake_ < 0) return;  // take() then refuses: closes stay on the I/O threads
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  thread_ = std::thread([this] { loop(); });
}

Drainer::~Drainer() {
  stop_ = true;
  if (wake_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  for (auto& [fd, e] : fds_) ::close(fd);
  for (auto& [fd, e] : incoming_) ::close(fd);
  if (wake_ >= 0) ::close(wake_);
  if (epoll_ >= 0) ::close(epoll_);
}

bool Drainer::reserve() {
  if (stop_ || !thread_.joinable()) return false;
  if (held_.fetch_add(1) < max_sockets_) return true;
  --held_;
  return false;
}

void Drainer::unreserve() { --held_; }

void Drainer::take(int fd, size_t max_bytes, std::chrono::milliseconds linger) {
  {
    std::lock_guard<std::mutex> lk(in_mu_);
    incoming_.emplace_back(fd, Entry{Clock::now() + linger, max_bytes});
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_, &one, sizeof one);
}

size_t Drainer::held() const { return held_.load(); }

void Drainer::adopt() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t r = read(wake_, &count, sizeof count);
  std::vector<std::pair<int, Entry>> in;
  {
    std::lock_guard<std::mutex> lk(in_mu_);
    in.swap(incoming_);
  }
  for (auto& [fd, e] : in) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    fds_[fd] = e;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) drop(fd);
  }
}

void Drainer::drop(int fd) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  if (fds_.erase(fd)) --held_;
}

bool Drainer::read_some(int fd, Entry& e) {
  for (;;) {
    const ssize_t n = recv(fd, g_discard, kDiscardBytes, MSG_DONTWAIT);
    if (n == 0) return false;  // the peer's end: everything it sent was read
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (static_cast<size_t>(n) >= e.left) return false;
    e.left -= static_cast<size_t>(n);
  }
}

void Drainer::loop() {
  pthread_setname_np(pthread_self(), "sluice-drain");  // top -H, /proc/<pid>/task/*/comm
  lower_this_thread_priority(Below::kIdle);
  std::vector<epoll_event> ready(64);
  while (!stop_) {
    const int n = epoll_wait(epoll_, ready.data(), static_cast<int>(ready.size()), 100);
    for (int i = 0; i < n; ++i) {
      const int fd = ready[static_cast<size_t>(i)].data.fd;
      if (fd == wake_) {
        adopt();
        continue;
      }
      auto it = fds_.find(fd);
      if (it != fds_.end() && !read_some(fd, it->second)) drop(fd);
    }
    const auto now = Clock::now();
    std::vector<int> late;
    for (const auto& [fd, e] : fds_)
      if (e.deadline <= now) late.push_back(fd);
    for (int fd : late) drop(fd);
  }
}

}  // namespace sluice::server
