// HAProxy's agent check (`server ... agent-check agent-port P`, configuration.txt "agent-check"):
// HAProxy connects to P, reads one line, and applies its words. This responder writes one line
// and closes:
//   "drain"        while starting (not warm yet) and from the moment a drain began: HAProxy
//                  sends the replica no new request (affinity included), in-flight ones finish;
//   "ready N%"     otherwise: READY cancels a DRAIN (a restarted replica comes back by itself),
//                  N = the weight as a share of the configured one, from how full the replica is
//                  (agent_weight_percent).
// It runs on its own thread with plain sockets: an answer never waits on the engine or on the
// HTTP server's threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace sluice::server {

struct AgentLoad {
  bool ready = false;  // Lifecycle::ready(): warm and not draining
  int32_t running = 0, parallel = 1, queued = 0, max_queue = 0;
  double kv_fraction = 0;  // KV blocks in use, 0..1
};

// 100% idle, falling in steps of 10 with the fuller of the request slots (running + queued over
// parallel + max_queue) and the KV cache; never below 1% while ready (0% would read as DRAIN).
// HAProxy scales the server's configured weight by it: configure `weight 100`, since with the
// default weight 1 any share below 100% rounds to 0, a drain.
int agent_weight_percent(const AgentLoad& l);
std::string agent_reply(const AgentLoad& l);  // one line, '\n' included

class AgentCheckServer {
 public:
  AgentCheckServer(std::string host, int port, std::function<std::string()> reply);
  ~AgentCheckServer();  // stop()
  AgentCheckServer(const AgentCheckServer&) = delete;
  AgentCheckServer& operator=(const AgentCheckServer&) = delete;

  bool bind();  // false: address not valid or in use
  int bound_port() const { return port_; }
  void start();  // answers on a thread of its own until stop()
  void stop();

 private:
  void loop();

  std::string host_;
  int port_;
  std::function<std::string()> reply_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::server
