#include "apps/sluice/serve_deploy.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "api/engine.h"
#include "base/error.h"
#include "kv/kv_cache.h"
#include "kv/kv_events.h"
#include "server/agent_check.h"
#include "server/http_server.h"
#include "server/kv_events_zmq.h"
#include "server/lifecycle.h"
#include "server/metrics.h"

namespace sluice::app {

void add_deploy_flags(CLI::App* cmd, DeployOptions& o) {
  cmd->add_option("--drain-delay", o.drain_delay_s,
                  "seconds SIGTERM keeps admitting requests (readiness is 503 at once), for a preStop window")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  cmd->add_option("--agent-port", o.agent_port, "HAProxy agent-check port: 'ready N%' or 'drain' (0: any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--kv-events", o.kv_events,
                  "publish prefix-cache events on ZeroMQ (e.g. tcp://*:5557), as llm-d's KV indexer reads vLLM's");
  cmd->add_option("--kv-events-pod", o.kv_pod,
                  "the pod part of the topic kv@POD@MODEL (default: $POD_IP, else the host name)");
  cmd->add_option("--kv-events-replay", o.kv_replay,
                  "bind a ZeroMQ ROUTER (e.g. tcp://*:5558) that resends kept KV-event batches from a "
                  "sequence number, as vLLM's replay_endpoint");
  cmd->add_option("--kv-events-buffer", o.kv_replay_batches,
                  "KV-event batches kept for --kv-events-replay (vLLM's buffer_steps)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
}

bool wants_kv_events(const DeployOptions& o) {
  if (o.kv_events.empty() && !o.kv_replay.empty()) fail("--kv-events-replay needs --kv-events");
  if (o.kv_events.empty()) return false;
  if (!server::KvEventPublisher::available())
    fail("--kv-events: this sluice was built without ZeroMQ (libzmq3-dev, cppzmq-dev, libmsgpack-cxx-dev)");
  return true;
}

std::unique_ptr<server::KvEventPublisher> start_kv_events(const DeployOptions& o, KvEventLog* log,
                                                          const std::string& model) {
  if (!log) return nullptr;
  std::string pod = o.kv_pod;
  if (const char* ip = std::getenv("POD_IP"); pod.empty() && ip && *ip) pod = ip;
  if (char host[256] = {}; pod.empty() && gethostname(host, sizeof host - 1) == 0) pod = host;
  const std::string topic = "kv@" + pod + "@" + model;
  auto pub = std::make_unique<server::KvEventPublisher>(*log, o.kv_events, topic, o.kv_replay,
                                                        static_cast<size_t>(o.kv_replay_batches));
  pub->start();
  std::fprintf(stderr, "sluice serve: KV events on %s, topic %s\n", o.kv_events.c_str(), topic.c_str());
  if (!o.kv_replay.empty())
    std::fprintf(stderr, "sluice serve: KV-event replay on %s, the last %d batches\n", o.kv_replay.c_str(),
                 o.kv_replay_batches);
  return pub;
}

void warm_up(api::Engine& engine, int32_t token) {
  api::EngineRequest r;
  r.prompt = {token, token};
  r.max_tokens = 1;
  r.sampling.temperature = 0;
  api::SubmitResult s = engine.submit(std::move(r));
  if (s.status != api::SubmitStatus::kOk) fail("warm-up: the engine refused its request (%s)", s.error.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  while (!s.handle->finished()) s.handle->wait(std::chrono::milliseconds(100));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "sluice serve: warm-up step %.0f ms\n", ms);
}

void set_vllm_metrics(server::Metrics& metrics, const KvCache& kv, const std::string& model, bool prefix_caching) {
  // A prompt's whole prefix lives in a global (window 0) group: its blocks are the capacity a
  // prefix-aware router models. No global group (all sliding): the first group.
  int32_t g = 0;
  for (int32_t i = kv.n_groups() - 1; i >= 0; --i)
    if (kv.group(i).window <= 0) g = i;
  server::VllmCacheInfo info;
  info.model_name = model;
  info.block_size = kv.block_tokens();
  info.num_blocks = kv.pool(g).n_total();
  info.prefix_caching = prefix_caching;
  info.cache_dtype = kv_type_name(kv.type());
  metrics.set_vllm_info(std::move(info));
}

std::unique_ptr<server::AgentCheckServer> start_agent(const DeployOptions& o, const std::string& host,
                                                      server::Lifecycle& life, api::Engine& engine) {
  if (o.agent_port < 0) return nullptr;
  auto reply = [&life, &engine] {
    const api::EngineSnapshot s = engine.snapshot();
    server::AgentLoad l;
    l.ready = life.ready();
    l.running = s.stats.n_running;
    l.queued = s.n_queued;
    l.parallel = engine.config().sched.max_running;
    l.max_queue = engine.max_waiting();
    l.kv_fraction = s.stats.kv_blocks_total > 0 ? double(s.stats.kv_blocks_used) / s.stats.kv_blocks_total : 0.0;
    return server::agent_reply(l);
  };
  auto agent = std::make_unique<server::AgentCheckServer>(host, o.agent_port, reply);
  if (!agent->bind()) fail("cannot listen on %s:%d (--agent-port)", host.c_str(), o.agent_port);
  agent->start();
  std::fprintf(stderr, "sluice serve: agent-check on %s:%d\n", host.c_str(), agent->bound_port());
  return agent;
}

void drain_and_stop(const sigset_t& sigs, const DeployOptions& o, int shutdown_timeout_s, server::Lifecycle& life,
                    api::Engine& engine, server::HttpServer& http) {
  life.begin_drain();
  std::fprintf(stderr, "sluice serve: draining (/ready 503); admitting for %d s more\n", o.drain_delay_s);
  if (o.drain_delay_s > 0) {
    const timespec delay{o.drain_delay_s, 0};
    sigtimedwait(&sigs, nullptr, &delay);  // a second signal ends the wait early
  }
  life.stop_admitting();
  const int left = life.in_flight();
  const bool done = life.wait_idle(std::chrono::steady_clock::now() + std::chrono::seconds(shutdown_timeout_s));
  std::fprintf(stderr, "sluice serve: not admitting; %d request(s) in flight %s\n", left,
               done ? "finished" : "ended by --shutdown-timeout");
  engine.shutdown();  // what is still running ends now, streams with an error event
  http.stop();
}

}  // namespace sluice::app
