#include "server/agent_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace sluice::server {

int agent_weight_percent(const AgentLoad& l) {
  const double slots = std::max(1, l.parallel + l.max_queue);
  const double busy = std::max(std::clamp(l.kv_fraction, 0.0, 1.0), std::min(1.0, (l.running + l.queued) / slots));
  // Whole tens: a light load keeps 100%, so a consistent-hash ring (balance hash) is not
  // reshuffled by every request that starts or ends.
  return std::clamp(100 - 10 * static_cast<int>(std::floor(busy * 10.0)), 1, 100);
}

std::string agent_reply(const AgentLoad& l) {
  if (!l.ready) return "drain\n";
  return "ready " + std::to_string(agent_weight_percent(l)) + "%\n";
}

AgentCheckServer::AgentCheckServer(std::string host, int port, std::function<std::string()> reply)
    : host_(std::move(host)), port_(port), reply_(std::move(reply)) {}

AgentCheckServer::~AgentCheckServer() { stop(); }

bool AgentCheckServer::bind() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  if (inet_pton(AF_INET, host_.c_str(), &addr.sin_addr) != 1) return false;
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  const int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof addr;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 64) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  port_ = ntohs(addr.sin_port);
  return true;
}

void AgentCheckServer::start() {
  if (fd_ >= 0 && !thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void AgentCheckServer::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// One line per connection, written whole or not at all (a checker that does not read within
// the socket buffer's room is not waited for): HAProxy reads until the first newline.
void AgentCheckServer::loop() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    const std::string line = reply_();
    [[maybe_unused]] const ssize_t n = ::send(c, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(c);
  }
}

}  // namespace sluice::server
