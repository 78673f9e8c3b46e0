// The HTTP front: cpp-httplib routes onto OpenAiService, bearer-key auth, body-size and
// idle limits, a worker pool large enough for every stream the engine may hold
// (--parallel running + the waiting queue + a few for /health and /metrics), clean stop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace sluice::server {

class OpenAiService;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (bound_port() tells which)
  std::string api_key;              // empty: no auth
  int n_threads = 16;               // concurrent connections served
  int read_timeout_s = 30;          // a request's bytes must arrive within this
  int write_timeout_s = 30;         // a client that stops reading is dropped after this
  int keep_alive_s = 5;             // idle keep-alive connections close after this
  size_t max_body_bytes = 8u << 20;
  bool ui = true;                   // serve the chat page at / (--no-ui: off)
};

class HttpServer {
 public:
  HttpServer(OpenAiService& service, const HttpOptions& opt);
  ~HttpServer();

  bool bind();        // false: address in use or not valid
  int bound_port() const { return port_; }
  void serve();       // blocks until stop()
  void stop();        // safe from another thread

 private:
  OpenAiService& service_;
  HttpOptions opt_;
  std::unique_ptr<httplib::Server> svr_;
  int port_ = -1;
};

}  // namespace sluice::server
