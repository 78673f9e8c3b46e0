// `sluice serve`'s side of the contract with routers and orchestrators (docs/deploy.md): the
// warm-up that makes /ready turn 200, the drain on SIGTERM, the agent-check port, and the
// vLLM-named metrics' cache description. cmd_serve.cpp wires these in; each is a step of its own.
#pragma once

#include <csignal>
#include <memory>
#include <string>

namespace CLI {
class App;
}

namespace sluice {
class KvCache;
class KvEventLog;
}  // namespace sluice

namespace sluice::api {
class Engine;
}

namespace sluice::server {
class AgentCheckServer;
class HttpServer;
class KvEventPublisher;
class Lifecycle;
class Metrics;
}  // namespace sluice::server

namespace sluice::app {

struct DeployOptions {
  int drain_delay_s = 0;          // after SIGTERM: keep admitting this long (readiness already 503)
  int agent_port = -1;            // HAProxy agent-check port; -1: none, 0: any free port (printed)
  std::string kv_events;          // ZeroMQ endpoint for KV-cache events (tcp://*:5557); empty: none
  std::string kv_pod;             // the topic's pod part; empty: $POD_IP, else the host name
  std::string kv_replay;          // ROUTER endpoint replaying kept batches (tcp://*:5558); empty: none
  int kv_replay_batches = 10000;  // batches kept for kv_replay (vLLM's buffer_steps)
};

void add_deploy_flags(CLI::App* cmd, DeployOptions& o);

// Whether the stack records the prefix cache's events (--kv-events; SessionOptions::kv_events):
// an Error when this sluice was built without ZeroMQ, or given --kv-events-replay alone. Then
// the publisher that sends the stack's log as kv@<pod>@<model> (kv_events_zmq.h) and serves
// --kv-events-replay, or null without --kv-events.
bool wants_kv_events(const DeployOptions& o);
std::unique_ptr<server::KvEventPublisher> start_kv_events(const DeployOptions& o, KvEventLog* log,
                                                          const std::string& model);

// One short generation through the engine (2 prompt tokens, 1 generated): the weights are paged
// in and every kernel has run once before a router is told the replica is ready.
void warm_up(api::Engine& engine, int32_t token);

// Describes the KV cache for vllm:cache_config_info (the prefix-cache group's blocks).
void set_vllm_metrics(server::Metrics& metrics, const KvCache& kv, const std::string& model, bool prefix_caching);

// The agent-check responder on `host`:agent_port, or null without --agent-port.
std::unique_ptr<server::AgentCheckServer> start_agent(const DeployOptions& o, const std::string& host,
                                                      server::Lifecycle& life, api::Engine& engine);

// The HTTP server's own closing window once the engine has stopped: the ended streams write
// their final error event (milliseconds), and a connection still busy after it is closed. The
// requests' own time is --shutdown-timeout, spent by drain_and_stop before the engine stops; with
// a window of 0 here a `--shutdown-timeout 0` drain would cut those last events off. Short, since
// the process exits within --drain-delay + --shutdown-timeout + 1 s: this window, then 0.1 s for
// handlers, after which one still busy (a long tokenize) is not waited for.
inline constexpr int kHttpFlushMs = 500;

// After the first SIGTERM/SIGINT: readiness 503 and agent "drain" at once; new generation
// requests still admitted for --drain-delay s (a second signal ends the wait), then refused with
// 503 + Retry-After; in-flight ones get up to `shutdown_timeout_s` to finish, then the engine
// stops (the rest end with an error event) and the HTTP server closes.
void drain_and_stop(const sigset_t& sigs, const DeployOptions& o, int shutdown_timeout_s, server::Lifecycle& life,
                    api::Engine& engine, server::HttpServer& http);

}  // namespace sluice::app
