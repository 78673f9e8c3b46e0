// The server's routes: which paths it answers, with which methods, on which thread, and which
// need the API key. Free of Boost (http_server.cpp alone holds Beast), so the table can be read
// and tested without it.
#pragma once

#include <string>
#include <string_view>

namespace sluice::server {

enum class Route {
  kNone,
  kCompletions,
  kChat,
  kTranscriptions,
  kRenderCompletions,
  kRenderChat,
  kModels,
  kModel,
  kTokenize,
  kDetokenize,
  kApplyTemplate,
  kHealth,
  kReady,
  kMetrics,
  kProps,
  kPage
};

struct RouteMatch {
  Route route = Route::kNone;
  const char* endpoint = "unmatched";  // the metrics label: a fixed set, never the client's path
  const char* allow = "";              // the methods the path answers
  bool blocking = false;               // runs on a worker
  bool side = false;                   // a worker route outside the engine (tokenize, templates)
  bool open = false;                   // answered without the API key
  std::string arg;                     // /v1/models/{arg}, the page's file path
};

// `ui`: the chat page's paths ("/", "/favicon.ico", "/ui/...") are routes (else 404).
RouteMatch match_route(std::string_view path, bool ui);

// The bearer key compared in time independent of where the first difference is.
bool key_matches(std::string_view header, const std::string& key);

}  // namespace sluice::server
