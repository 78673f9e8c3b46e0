// The HTTP/1.1 front (Boost.Beast on Boost.Asio, all of it inside http_server.cpp): a few
// I/O threads hold every connection; requests that block (completions, chat) run on a bounded
// worker pool, the side routes (tokenize, detokenize, templates) on side_workers threads below
// the engine's priority, and answers stream back through their connection's strand with a
// bounded outgoing buffer. /health, /ready, /metrics, /v1/models, /props and the chat page's
// files answer on the I/O threads, so they stay prompt whatever the workers do.
//
// A browser request from a foreign origin is refused (403, origin_guard.h) before routing and
// the key; the chat page's paths ("/", "/favicon.ico", "/ui/...") need no key and are off with
// ui = false.
//
// Limits, checked before authentication and before any body byte is kept: header bytes and
// count (431), body size for Content-Length and chunked bodies (413), a malformed
// Content-Length (400), one deadline for a request's headers and body (408), an idle
// keep-alive timeout, a connection cap (503 + close). Pipelined requests are answered in
// order. stop() ends everything within shutdown_timeout_s.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace sluice::server {

class Metrics;
class OpenAiService;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (bound_port() tells which)
  std::string api_key;                 // empty: no auth
  int io_threads = 2;                  // threads running the event loop
  int workers = 16;                    // threads running blocking handlers (streams hold one each)
  int request_timeout_s = 30;          // a request's headers and body must arrive within this
  int write_timeout_s = 30;            // a client that stops reading is dropped after this
  int keep_alive_s = 5;                // idle keep-alive connections close after this
  int shutdown_timeout_s = 5;          // stop(): connections still open after this are closed
  int shutdown_timeout_ms = -1;        // >= 0: that window in milliseconds instead (a flush after a drain)
  int max_connections = 4096;          // beyond: 503 and close
  int max_connections_per_client = 0;  // one peer address's share (0: 3/4 of max_connections)
  int side_workers = 4;                // tokenize, detokenize, apply-template, render admitted at once (beyond: 429)
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 16u << 10;  // request line + header fields
  int max_headers = 100;
  size_t stream_buffer_bytes = 256u << 10;  // a stream's writer blocks beyond this
  bool ui = true;                           // serve the chat page at / (--no-ui: off)
};

class HttpServer {
 public:
  HttpServer(OpenAiService& service, Metrics& metrics, const HttpOptions& opt);
  ~HttpServer();

  bool bind();  // false: address in use or not valid
  int bound_port() const;
  // Blocks until stop() has finished. False when a handler was still busy 0.1 s past
  // the shutdown deadline: it was left running, and the caller should end the process.
  bool serve();
  void stop();  // safe from another thread (a signal thread)

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server
