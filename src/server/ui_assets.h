// The chat page's files (src/server/ui/ and the Debian browser libraries), embedded into the
// binary at build time (cmake/embed_files.cmake) and served under / and /ui/: each with its
// content type, an ETag (304 on If-None-Match), a gzip copy made on the first request that
// accepts one (compressible types only), and the page's Content-Security-Policy (no inline
// or foreign script).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "server/openai_service.h"

namespace sluice::server {

class UiAssets {
 public:
  UiAssets();

  // True for the paths the page itself lives at ("/", "/ui/..."): public, no API key.
  static bool is_page_path(std::string_view path);

  // The file for `path` ("/" is the page), or a 404 reply. `accept_encoding` and
  // `if_none_match` are the request's headers (empty when absent).
  Reply serve(std::string_view path, std::string_view accept_encoding, std::string_view if_none_match) const;

 private:
  struct Asset {
    std::string_view body;
    std::string content_type;
    std::string etag;
    bool compressible = false;
    std::unique_ptr<std::once_flag> gzip_once = std::make_unique<std::once_flag>();
    mutable std::string gzip;  // set once under gzip_once: empty when not worth it
  };
  const std::string& gzip_of(const Asset& a) const;

  std::unordered_map<std::string, Asset> assets_;  // keyed by URL path; gzip filled lazily
};

}  // namespace sluice::server
