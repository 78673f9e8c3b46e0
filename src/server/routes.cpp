#include "server/routes.h"

#include "server/ui_assets.h"

namespace sluice::server {

RouteMatch match_route(std::string_view path, bool ui) {
  struct Entry {
    std::string_view path;
    Route route;
    const char* allow;
    bool blocking, side, open;
  };
  static constexpr Entry kTable[] = {
      {"/v1/completions", Route::kCompletions, "POST", true, false, false},
      {"/v1/chat/completions", Route::kChat, "POST", true, false, false},
      {"/v1/audio/transcriptions", Route::kTranscriptions, "POST", true, false, false},
      {"/v1/completions/render", Route::kRenderCompletions, "POST", true, true, false},
      {"/v1/chat/completions/render", Route::kRenderChat, "POST", true, true, false},
      {"/v1/models", Route::kModels, "GET, HEAD", false, false, false},
      {"/tokenize", Route::kTokenize, "POST", true, true, false},
      {"/detokenize", Route::kDetokenize, "POST", true, true, false},
      {"/apply-template", Route::kApplyTemplate, "POST", true, true, false},
      {"/health", Route::kHealth, "GET, HEAD", false, false, true},
      {"/ready", Route::kReady, "GET, HEAD", false, false, true},
      {"/metrics", Route::kMetrics, "GET, HEAD", false, false, true},
      {"/props", Route::kProps, "GET, HEAD", false, false, false},
  };
  RouteMatch m;
  for (const Entry& e : kTable)
    if (path == e.path) {
      m.route = e.route;
      m.endpoint = e.path.data();
      m.allow = e.allow;
      m.blocking = e.blocking;
      m.side = e.side;
      m.open = e.open;
      return m;
    }
  constexpr std::string_view kModelPrefix = "/v1/models/";
  if (path.size() > kModelPrefix.size() && path.substr(0, kModelPrefix.size()) == kModelPrefix) {
    m.route = Route::kModel;
    m.endpoint = "/v1/models/{id}";
    m.allow = "GET, HEAD";
    m.arg = std::string(path.substr(kModelPrefix.size()));
  }
  if (ui && UiAssets::is_page_path(path)) {
    m.route = Route::kPage;
    m.endpoint = "/ui";  // one label for every page file: the path is the client's
    m.allow = "GET, HEAD";
    m.open = true;
    m.arg = std::string(path);
  }
  return m;
}

bool key_matches(std::string_view header, const std::string& key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() != kBearer.size() + key.size() || header.substr(0, kBearer.size()) != kBearer) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(header[kBearer.size() + i]) ^ static_cast<unsigned char>(key[i]);
  return diff == 0;
}

}  // namespace sluice::server
