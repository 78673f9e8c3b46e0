// `sluice serve -m FILE`: an OpenAI-compatible HTTP server (docs/serving.md).
//   threads: main + HTTP I/O threads (every connection: parsing, limits, /health, /metrics) ·
//   HTTP workers (JSON, templates, tokenize, detokenize, stop strings, SSE) · one engine thread
//   (schedule → forward → sample) · one signal thread (SIGTERM/SIGINT: stop the engine, then
//   the HTTP server within --shutdown-timeout, then exit 0).
#include <CLI/CLI.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <malloc.h>
#include <pthread.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "api/engine.h"
#include "apps/sluice/commands.h"
#include "apps/sluice/engine_session.h"
#include "apps/sluice/model_drafter.h"
#include "apps/sluice/tuner.h"
#include "base/error.h"
#include "engine/kv_budget.h"
#include "gguf/reader.h"
#include "models/model.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/model_context.h"
#include "server/openai_service.h"
#include "threading/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

namespace {

struct ServeArgs {
  SessionOptions session;
  server::HttpOptions http;
  std::string alias, kv_memory;
  std::string max_body = "8M";
  int parallel = 4, max_queue = 64, batch_tokens = 256, max_tokens = 0;
  bool no_prefix_cache = false;
};

// "1073741824", "512M", "2G", "800K" (binary units); `what` names the option in errors.
uint64_t parse_bytes(const std::string& s, const char* what) {
  if (s.empty()) return 0;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    fail("%s '%s' is not a size (e.g. 512M, 2G)", what, s.c_str());
  }
  const std::string unit = s.substr(used);
  double mul = 1;
  if (unit == "K" || unit == "KiB" || unit == "k") mul = 1024.0;
  else if (unit == "M" || unit == "MiB" || unit == "m") mul = 1048576.0;
  else if (unit == "G" || unit == "GiB" || unit == "g") mul = 1073741824.0;
  else if (!unit.empty()) fail("%s '%s': unknown unit '%s' (K, M or G)", what, s.c_str(), unit.c_str());
  if (!(v > 0) || v * mul > 1e18) fail("%s must be positive and below 2^60", what);
  return static_cast<uint64_t>(v * mul);
}

// Every connection is a descriptor: allow as many as the hard limit does.
void raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  r.rlim_cur = r.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &r) != 0) std::fprintf(stderr, "sluice serve: could not raise the open-file limit\n");
}

}  // namespace

// glibc keeps freed small blocks in a cache per thread (tcache) and gives each thread its own
// arena; malloc_trim, which the engine calls when it goes idle, can return neither. With ~30
// HTTP threads each doing JSON work, a server's anonymous memory crept up for hundreds of
// requests after warm-up, flattening only slowly, although nothing leaks. With the tcache off
// and one arena it stays flat. Those are start-up tunables only, hence one re-execution with
// them set in the environment; the server's hot path (the engine step) does not allocate.
void tune_malloc_for_server(char** argv) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  if (std::getenv("SLUICE_MALLOC_TUNED") != nullptr) return;
  std::string tunables = "glibc.malloc.tcache_count=0";
  if (const char* t = std::getenv("GLIBC_TUNABLES"); t != nullptr && *t != '\0')
    tunables = std::string(t) + ":" + tunables;
  setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
  setenv("MALLOC_ARENA_MAX", "1", 1);
  setenv("SLUICE_MALLOC_TUNED", "1", 1);
  execv("/proc/self/exe", argv);
  // Could not re-execute (no /proc?): serve anyway, with the default allocator settings.
  unsetenv("SLUICE_MALLOC_TUNED");
#else
  (void)argv;
#endif
}

namespace {

// The engine's flags: the model session, speculation, batching, KV and admission.
void add_engine_flags(CLI::App* cmd, ServeArgs& args) {
  ServeArgs* a = &args;
  add_session_options(cmd, a->session);
  add_spec_options(cmd, a->session);
  cmd->add_option("--alias", a->alias, "model name clients use (default: general.name)");
  cmd->add_option("-P,--parallel", a->parallel, "sequences decoded together")->capture_default_str();
  cmd->add_option("--max-queue", a->max_queue, "requests waiting beyond --parallel; more get 429")
      ->capture_default_str();
  cmd->add_option("--batch-tokens", a->batch_tokens, "tokens per engine step (decodes + prefill chunks)")
      ->capture_default_str();
  cmd->add_option("--kv-memory", a->kv_memory, "KV cache budget (e.g. 512M, 2G); default --ctx-size x --parallel");
  cmd->add_option("--max-tokens", a->max_tokens, "cap on generated tokens per request (0: up to the context end)")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", a->no_prefix_cache, "recompute every prompt in full");
}

// The HTTP layer's flags: address, key, the page, deadlines, connection limits and shutdown.
void add_http_flags(CLI::App* cmd, const std::shared_ptr<ServeArgs>& a) {
  cmd->add_option("--host", a->http.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->http.port, "port (0: any free port, printed at start)")->capture_default_str();
  cmd->add_option("--api-key", a->http.api_key,
                  "require 'Authorization: Bearer KEY' (not for /health, /metrics, the chat page)");
  cmd->add_flag(
      "--no-ui", [a](int64_t) { a->http.ui = false; }, "do not serve the chat page at /");
  cmd->add_option("--timeout", a->http.request_timeout_s,
                  "seconds a request's headers and body may take to arrive (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  cmd->add_option("--keep-alive", a->http.keep_alive_s, "seconds an idle keep-alive connection stays open")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  cmd->add_option("--max-connections", a->http.max_connections, "open connections; more are answered 503 and closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-connections-per-client", a->http.max_connections_per_client,
                  "open connections one client address may hold (0: 3/4 of --max-connections)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--max-body", a->max_body, "largest request body (e.g. 8M; more is 413)")->capture_default_str();
  cmd->add_option("--shutdown-timeout", a->http.shutdown_timeout_s,
                  "seconds SIGTERM waits for streams before closing them")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  cmd->add_option("--http-threads", a->http.io_threads, "threads serving connections (I/O)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

}  // namespace

CommandFn add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API");
  add_engine_flags(cmd, *a);
  add_http_flags(cmd, a);
  return [a]() {
    // Signals go to the signal thread only: block them before any thread exists.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a vanished client is a failed write, not a dead server
    // Request-sized buffers (bodies, replies, token lists) are mapped and unmapped whole:
    // glibc's default threshold rises to the largest block freed so far, after which an 8 MiB
    // request's buffers stay in the heap and the process keeps its peak size.
    mallopt(M_MMAP_THRESHOLD, 1 << 20);

    if (a->parallel < 1) fail("--parallel must be at least 1");
    if (a->max_queue < 0) fail("--max-queue must be >= 0");
    if (a->batch_tokens < 1) fail("--batch-tokens must be at least 1");
    if (a->max_tokens < 0) fail("--max-tokens must be >= 0");
    const SessionOptions& so = a->session;
    std::fprintf(stderr, "loading %s ...\n", so.model_path.c_str());
    auto file = gguf::GgufFile::open(so.model_path);
    auto tok = Tokenizer::from_gguf(*file);
    ThreadPool pool(so.threads > 0 ? so.threads : ThreadPool::default_threads());
    models::LoadOptions lo;
    lo.pool = &pool;
    auto model = models::load_model(*file, lo);
    const auto& spec = model->spec();
    if (so.ctx_size < 2) fail("--ctx-size must be at least 2");

    engine::KvBudget budget;
    budget.ctx_size = so.ctx_size;
    budget.parallel = a->parallel;
    budget.block_tokens = so.block_tokens;
    budget.chunk = a->batch_tokens;
    budget.memory_bytes = parse_bytes(a->kv_memory, "--kv-memory");
    budget.type = parse_kv_type(so.kv_type);
    budget.window_margin = spec_window_margin(so);
    const DraftParts draft = load_draft(so, *file, spec, pool, budget);  // outlives the engine
    KvCache kv(spec.kv_groups, so.block_tokens, engine::kv_blocks_per_group(spec.kv_groups, budget), budget.type);
    const TuneOutcome tuned = apply_tuning(tune_mode(so.no_tune), *model, kv, pool, *file, so.ctx_size);
    std::fprintf(stderr, "sluice serve: %s\n", describe_outcome(tuned).c_str());

    api::EngineOptions eo;
    eo.core.sched.max_running = a->parallel;
    eo.core.sched.token_budget = a->batch_tokens;
    eo.core.sched.ctx_size = so.ctx_size;
    eo.core.prefix_caching = !a->no_prefix_cache;
    eo.core.sample_pool = &pool;
    apply_spec_options(so, eo.core, draft, &tuned.record.curve);
    const auto assistant = make_model_drafter(so, pool, *file, *model, kv, eo.core);  // --spec assistant
    eo.max_waiting = a->max_queue;
    api::Engine engine(*model, kv, eo);

    server::ModelContext mctx(*file, *tok, a->alias, so.ctx_size, a->max_tokens);
    server::Metrics metrics;
    server::OpenAiService service(engine, mctx, metrics);
    server::HttpOptions ho = a->http;
    ho.workers = a->parallel + a->max_queue + 4;  // every request the engine may hold, plus tokenize/detokenize
    ho.max_body_bytes = parse_bytes(a->max_body, "--max-body");
    raise_fd_limit();
    server::HttpServer http(service, metrics, ho);
    if (!http.bind()) fail("cannot listen on %s:%d", ho.host.c_str(), ho.port);

    std::thread signals([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      std::fprintf(stderr, "sluice serve: signal %d, shutting down\n", sig);
      engine.shutdown();  // running requests end now; their streams close
      http.stop();
    });
    std::fprintf(stderr, "sluice serve: model '%s' (%s), ctx %d, parallel %d, KV %.1f MiB (%s), %d threads\n",
                 mctx.alias().c_str(), spec.arch.c_str(), so.ctx_size, a->parallel, kv.bytes() / 1048576.0,
                 kv_type_name(kv.type()), pool.size());
    print_draft_summary(draft);
    std::fprintf(stderr, "sluice serve: listening on http://%s:%d\n", ho.host.c_str(), http.bound_port());
    std::fflush(stderr);
    const bool handlers_done = http.serve();
    pthread_kill(signals.native_handle(), SIGTERM);  // serve() ended on its own: wake the signal thread
    signals.join();
    engine.shutdown();
    if (!handlers_done) {  // a handler still busy past --shutdown-timeout: the deadline is hard
      std::fprintf(stderr, "sluice serve: stopped with a request handler still busy past --shutdown-timeout\n");
      std::fflush(stderr);
      std::_Exit(0);
    }
    std::fprintf(stderr, "sluice serve: stopped\n");
    return 0;
  };
}

}  // namespace sluice::app
