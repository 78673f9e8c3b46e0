#include "server/http_server.h"

#include <httplib.h>

#include "server/api_error.h"
#include "server/openai_service.h"
#include "server/origin_guard.h"
#include "server/props.h"
#include "server/ui_assets.h"

namespace sluice::server {

namespace {

void send(const Reply& r, httplib::Response& res) {
  res.status = r.status;
  for (const auto& [k, v] : r.headers) res.set_header(k, v);
  if (!r.stream) {
    res.set_content(r.body, r.content_type.c_str());
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  auto stream = r.stream;
  // One provider call writes the whole stream; `write` reports a vanished client.
  res.set_chunked_content_provider(r.content_type, [stream](size_t, httplib::DataSink& sink) {
    stream([&sink](std::string_view bytes) { return sink.write(bytes.data(), bytes.size()); });
    sink.done();
    return true;
  });
}

}  // namespace

HttpServer::HttpServer(OpenAiService& service, const HttpOptions& opt)
    : service_(service), opt_(opt), svr_(std::make_unique<httplib::Server>()) {
  httplib::Server& s = *svr_;
  const int n = opt.n_threads;
  s.new_task_queue = [n] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  s.set_payload_max_length(opt.max_body_bytes);
  s.set_read_timeout(opt.read_timeout_s, 0);
  s.set_write_timeout(opt.write_timeout_s, 0);
  s.set_keep_alive_timeout(opt.keep_alive_s);
  s.set_tcp_nodelay(true);

  const std::string key = opt.api_key, bind_host = opt.host;
  s.set_pre_routing_handler([key, bind_host](const httplib::Request& req, httplib::Response& res) {
    const std::string refused = origin_refusal(req.get_header_value("Origin"), req.get_header_value("Host"), bind_host);
    if (!refused.empty()) {
      send(OpenAiService::error_reply(403, refused, "permission_error"), res);
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool open = req.path == "/health" || req.path == "/metrics" || UiAssets::is_page_path(req.path);
    if (key.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + key) return httplib::Server::HandlerResponse::Unhandled;
    send(OpenAiService::error_reply(401, "missing or wrong API key (Authorization: Bearer ...)", "authentication_error"), res);
    return httplib::Server::HandlerResponse::Handled;
  });

  OpenAiService* svc = &service_;
  s.Post("/v1/completions", [svc](const httplib::Request& req, httplib::Response& res) { send(svc->completions(req.body), res); });
  s.Post("/v1/chat/completions", [svc](const httplib::Request& req, httplib::Response& res) { send(svc->chat_completions(req.body), res); });
  s.Get("/v1/models", [svc](const httplib::Request&, httplib::Response& res) { send(svc->models(), res); });
  s.Get(R"(/v1/models/(.+))", [svc](const httplib::Request& req, httplib::Response& res) { send(svc->model(req.matches[1]), res); });
  s.Post("/tokenize", [svc](const httplib::Request& req, httplib::Response& res) { send(svc->tokenize(req.body), res); });
  s.Post("/detokenize", [svc](const httplib::Request& req, httplib::Response& res) { send(svc->detokenize(req.body), res); });
  s.Get("/health", [svc](const httplib::Request&, httplib::Response& res) { send(svc->health(), res); });
  s.Get("/metrics", [svc](const httplib::Request&, httplib::Response& res) { send(svc->metrics(), res); });
  s.Get("/props", [svc](const httplib::Request&, httplib::Response& res) { send(props_reply(svc->model_context()), res); });
  if (opt.ui) {   // the chat page (src/server/ui/)
    auto ui = std::make_shared<const UiAssets>();
    s.Get(R"(/|/favicon\.ico|/ui/.+)", [ui](const httplib::Request& req, httplib::Response& res) {
      // cpp-httplib compresses text bodies itself (gzip or br): hand it the plain bytes.
      send(ui->serve(req.path, "", req.get_header_value("If-None-Match")), res);
    });
  }

  // Anything that ends without a body of its own (404 route, 413 too large, 400 from the
  // parser...) still answers in OpenAI's error shape.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = "HTTP error " + std::to_string(res.status);
    if (res.status == 400) msg = "malformed HTTP request";
    if (res.status == 404) msg = "no route for " + req.method + " " + req.path;
    if (res.status == 413) msg = "the request body is too large";
    const Reply r = OpenAiService::error_reply(res.status, msg, res.status >= 500 ? "server_error" : "invalid_request_error");
    res.set_content(r.body, "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg += std::string(": ") + e.what();
    } catch (...) {
    }
    const Reply r = OpenAiService::error_reply(500, msg, "server_error");
    res.status = 500;
    res.set_content(r.body, "application/json");
  });
}

HttpServer::~HttpServer() = default;

bool HttpServer::bind() {
  if (opt_.port == 0) port_ = svr_->bind_to_any_port(opt_.host);
  else port_ = svr_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1;
  return port_ > 0;
}

void HttpServer::serve() { svr_->listen_after_bind(); }

void HttpServer::stop() { svr_->stop(); }

}  // namespace sluice::server
