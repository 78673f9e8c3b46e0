// `sluice serve -m FILE`: an OpenAI-compatible HTTP server (docs/serving.md).
//   threads: main + HTTP I/O threads (every connection: parsing, limits, /health, /metrics) ·
//   HTTP workers (JSON, templates, tokenize, detokenize, stop strings, SSE) · one engine thread
//   (schedule → forward → sample) · one signal thread (SIGTERM/SIGINT: drain — readiness off,
//   admitting for --drain-delay s, in-flight requests finish within --shutdown-timeout — then
//   stop the engine and the HTTP server, exit 0; serve_deploy.h) · one warm-up thread (one
//   generation, then /ready says 200 and "listening on" is printed) · with --agent-port, the
//   agent-check thread.
#include <CLI/CLI.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <malloc.h>
#include <pthread.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "api/engine.h"
#include "apps/sluice/audio_tower.h"
#include "apps/sluice/commands.h"
#include "apps/sluice/engine_session.h"
#include "apps/sluice/image_tower.h"
#include "apps/sluice/serve_deploy.h"
#include "base/error.h"
#include "engine/encoder_cache.h"
#include "media/preprocess.h"
#include "models/encoder.h"
#include "server/agent_check.h"
#include "server/audio_parts.h"
#include "server/content_parts.h"
#include "server/http_server.h"
#include "server/image_fetch.h"
#include "server/kv_events_zmq.h"
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
  DeployOptions deploy;
  std::string alias, kv_memory;
  std::string max_body = "8M";
  int parallel = 4, max_queue = 64, batch_tokens = 256, max_tokens = 0;
  bool no_prefix_cache = false;
  int image_tokens = 280;              // --image-tokens: an image part's budget for "detail": "auto"
  std::string max_audio = "25M";       // --max-audio: one clip's encoded bytes (OpenAI's upload cap)
  std::string encoder_cache = "128M";  // --encoder-cache: encoder outputs kept by content
  bool allow_image_urls = false;       // --allow-image-urls: fetch http(s) image URLs
  std::string image_url_max = "8M";
  double image_url_timeout_s = 10;
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
  cmd->add_option("--mmproj", a->session.mmproj,
                  "the model's multimodal projector (an mmproj GGUF): chat requests may then carry images and, "
                  "with an audio tower (Gemma 4 E2B/E4B), audio");
  cmd->add_option("--max-audio", a->max_audio, "largest audio clip or upload, encoded (checked before decoding)")
      ->capture_default_str();
  cmd->add_option("--image-tokens", a->image_tokens,
                  "soft tokens per image for detail \"auto\": 70, 140, 280, 560 or 1120 (low: 70, high: 1120)")
      ->capture_default_str();
  cmd->add_flag("--allow-image-urls", a->allow_image_urls,
                "fetch http(s) image URLs (the server then reaches whatever its network allows: docs/images.md)");
  cmd->add_option("--image-url-max", a->image_url_max, "largest image a URL may give (e.g. 8M)")->capture_default_str();
  cmd->add_option("--image-url-timeout", a->image_url_timeout_s, "seconds a URL's fetch may take")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--encoder-cache", a->encoder_cache,
                  "memory for encoder outputs kept by content, so a resent image is not encoded again (0: none)")
      ->capture_default_str();
}

// One image's encode as the engine thread's shared work: pieces on the engine's pool, its
// workers kept spinning through a turn (as in a step), none while the engine waits.
class EncodeTurns final : public api::BetweenSteps {
 public:
  EncodeTurns(std::unique_ptr<models::EncodeJob> job, ThreadPool& pool) : job_(std::move(job)), pool_(pool) {}
  bool run_for(std::chrono::nanoseconds budget) override {
    ThreadPool::StepScope hot(pool_);
    return job_->run_for(budget);
  }

 private:
  std::unique_ptr<models::EncodeJob> job_;
  ThreadPool& pool_;
};

// The served model's image input (--mmproj): the stack's tower, the vocabulary's markers; each
// image encoded by the engine thread between steps (api::Engine::run_between_steps).
std::shared_ptr<const server::ImageInput> image_input(EngineStack& stack, api::Engine& engine,
                                                      const chat::ChatFormat& format, const ServeArgs& a,
                                                      const server::UrlFetchLimits& fetch) {
  ImageTower* tower = stack.image_tower();
  if (tower == nullptr) return nullptr;
  auto in = std::make_shared<server::ImageInput>();
  in->markers = image_markers(format);
  in->text_width = tower->text_width();
  in->blocks = tower->bidirectional_images();
  in->default_tokens = a.image_tokens;
  in->allow_urls = a.allow_image_urls;
  in->fetch = fetch;
  in->encode = [tower, &engine](const media::PreprocessedImage& p, float* out) {
    // The same pixels at the same grid: the rows a turn ago (each turn of a chat resends its images).
    const engine::EncoderKey key = engine::encoder_key(p.patches, (int64_t{p.patches_x} << 32) | p.patches_y);
    const size_t n = static_cast<size_t>(p.n_soft_tokens()) * static_cast<size_t>(tower->text_width());
    // Another request encoding the same image now: its rows, once it has them.
    if (const engine::EncodedRows rows = engine.encoder_cache().acquire(key); rows && rows->size() == n) {
      std::copy(rows->begin(), rows->end(), out);
      return;
    }
    engine::EncodeClaim claim(engine.encoder_cache(), key);  // the waiters' next holder if this throws
    EncodeTurns turns(tower->start(p, out), tower->pool());
    engine.run_between_steps(turns);
    claim.insert(std::make_shared<const std::vector<float>>(out, out + n));
  };
  return in;
}

// Which towers of --mmproj join the stack: each one the file has (a file with neither still
// loads the vision tower, whose loader names what is wrong with it).
void choose_towers(SessionOptions& so) {
  if (so.mmproj.empty()) return;
  const auto f = gguf::GgufFile::open(so.mmproj);
  so.mmproj_audio = has_audio_tower(*f);
  so.mmproj_vision = has_vision_tower(*f) || !so.mmproj_audio;
}

// The served model's audio input (an mmproj with an audio tower): the tower, the markers.
std::shared_ptr<const server::AudioInput> audio_input(EngineStack& stack, const chat::ChatFormat& format,
                                                      int64_t max_bytes) {
  AudioTower* tower = stack.audio_tower();
  if (tower == nullptr) return nullptr;
  auto in = std::make_shared<server::AudioInput>();
  in->markers = audio_markers(format);
  in->text_width = tower->text_width();
  in->limits.max_bytes = max_bytes;
  in->n_tokens = [tower](const media::LogMel& mel) { return tower->n_tokens(mel); };
  in->encode = [tower](const media::LogMel& mel, float* out) { tower->encode(mel, out); };
  return in;
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

// The start-up lines of the media towers the stack holds.
void print_towers(EngineStack& stack, const ServeArgs& a) {
  if (ImageTower* t = stack.image_tower())
    std::fprintf(stderr, "sluice serve: images through %s, %d tokens each by default\n", t->path().c_str(),
                 a.image_tokens);
  if (AudioTower* t = stack.audio_tower())
    std::fprintf(stderr, "sluice serve: audio through %s, up to %s a clip\n", t->path().c_str(), a.max_audio.c_str());
}

}  // namespace

CommandFn add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API");
  add_engine_flags(cmd, *a);
  add_http_flags(cmd, a);
  add_deploy_flags(cmd, a->deploy);
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
    if (!media::is_supported_budget(a->image_tokens))
      fail("--image-tokens %d: expected 70, 140, 280, 560 or 1120", a->image_tokens);
    const uint64_t encoder_cache = a->encoder_cache == "0" ? 0 : parse_bytes(a->encoder_cache, "--encoder-cache");
    server::UrlFetchLimits fetch;
    fetch.max_bytes = parse_bytes(a->image_url_max, "--image-url-max");
    fetch.timeout_ms = static_cast<long>(a->image_url_timeout_s * 1000);
    if (a->allow_image_urls && !server::url_fetch_available())
      fail("--allow-image-urls: this sluice was built without libcurl (install libcurl4-openssl-dev and rebuild)");
    SessionOptions& so = a->session;
    so.n_seqs = a->parallel;
    so.token_budget = a->batch_tokens;
    so.kv_memory = parse_bytes(a->kv_memory, "--kv-memory");
    so.prefix_caching = !a->no_prefix_cache;
    so.kv_events = wants_kv_events(a->deploy);
    const auto max_audio = static_cast<int64_t>(parse_bytes(a->max_audio, "--max-audio"));
    if (max_audio < 1) fail("--max-audio must be at least 1 byte");
    choose_towers(so);
    EngineStack stack(so);  // outlives the engine
    std::fprintf(stderr, "sluice serve: %s\n", describe_outcome(stack.tuning()).c_str());
    auto tok = Tokenizer::from_gguf(stack.file());
    api::EngineOptions eo;
    eo.core = stack.config();  // with the stack's KV event log (--kv-events)
    eo.max_waiting = a->max_queue;
    eo.encoder_cache_bytes = encoder_cache;
    api::Engine engine(stack.model(), stack.kv(), eo);

    server::ModelContext mctx(stack.file(), *tok, a->alias, so.ctx_size, a->max_tokens);
    mctx.set_images(image_input(stack, engine, mctx.format(), *a, fetch));
    mctx.set_audio(audio_input(stack, mctx.format(), max_audio));
    server::Metrics metrics;
    set_vllm_metrics(metrics, stack.kv(), mctx.alias(), eo.core.prefix_caching);
    const auto kv_pub = start_kv_events(a->deploy, stack.kv_events(), mctx.alias());
    server::OpenAiService service(engine, mctx, metrics);
    server::HttpOptions ho = a->http;
    ho.workers = a->parallel + a->max_queue + 4;  // every request the engine may hold, and a few more
    ho.max_body_bytes = parse_bytes(a->max_body, "--max-body");
    ho.shutdown_timeout_ms = kHttpFlushMs;  // after the drain (which spends --shutdown-timeout)
    raise_fd_limit();
    server::HttpServer http(service, metrics, ho);
    if (!http.bind()) fail("cannot listen on %s:%d", ho.host.c_str(), ho.port);

    const auto agent = start_agent(a->deploy, ho.host, service.lifecycle(), engine);
    std::thread signals([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      std::fprintf(stderr, "sluice serve: signal %d, shutting down\n", sig);
      drain_and_stop(sigs, a->deploy, a->http.shutdown_timeout_s, service.lifecycle(), engine, http);
    });
    std::fprintf(stderr, "sluice serve: model '%s' (%s), ctx %d, parallel %d, KV %.1f MiB (%s), %d threads\n",
                 mctx.alias().c_str(), stack.spec().arch.c_str(), so.ctx_size, a->parallel,
                 stack.kv().bytes() / 1048576.0, kv_type_name(stack.kv().type()), stack.pool().size());
    print_draft_summary(stack.draft());
    print_towers(stack, *a);
    // /health answers from here on; /ready and /v1/models once the warm-up step has run.
    std::thread warm([&] {
      warm_up(engine, tok->bos());
      service.lifecycle().set_ready();
      std::fprintf(stderr, "sluice serve: listening on http://%s:%d\n", ho.host.c_str(), http.bound_port());
      std::fflush(stderr);
    });
    const bool handlers_done = http.serve();
    pthread_kill(signals.native_handle(), SIGTERM);  // serve() ended on its own: wake the signal thread
    signals.join();
    engine.shutdown();
    if (!handlers_done) {  // a handler still busy past the shutdown deadline: the deadline is hard
      std::fprintf(stderr, "sluice serve: stopped with a request handler still busy past --shutdown-timeout\n");
      std::fflush(stderr);
      std::_Exit(0);
    }
    warm.join();
    std::fprintf(stderr, "sluice serve: stopped\n");
    return 0;
  };
}

}  // namespace sluice::app
