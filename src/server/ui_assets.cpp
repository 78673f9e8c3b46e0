#include "server/ui_assets.h"

#include <zlib.h>

#include <array>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

namespace sluice::server {

// Defined by the source cmake/embed_files.cmake generates: (URL path, bytes) pairs.
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_files();

namespace {

// KaTeX sets styles on the elements it builds, hence 'unsafe-inline' for styles only.
constexpr const char* kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

std::string content_type_of(std::string_view path) {
  static const std::array<std::pair<std::string_view, const char*>, 9> types = {{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".woff2", "font/woff2"},
      {".woff", "font/woff"},
      {".ttf", "font/ttf"},
      {".txt", "text/plain; charset=utf-8"},
  }};
  for (const auto& [ext, type] : types)
    if (path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext) return type;
  return "application/octet-stream";
}

bool compressible(std::string_view type) { return type.starts_with("text/") || type == "image/svg+xml"; }

// gzip (RFC 1952) of `in` at the best level; empty when zlib fails.
std::string gzip(std::string_view in) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END ? out : std::string();
}

// True when the Accept-Encoding header lists gzip without q=0.
bool accepts_gzip(std::string_view accept) {
  size_t pos = 0;
  while (pos < accept.size()) {
    size_t end = accept.find(',', pos);
    if (end == std::string_view::npos) end = accept.size();
    std::string_view item = accept.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    if (item.starts_with("gzip") || item.starts_with("*")) {
      const size_t q = item.find("q=");
      if (q == std::string_view::npos) return true;
      const std::string_view v = item.substr(q + 2);
      return !(v.starts_with("0") && v.find_first_of("123456789") == std::string_view::npos);
    }
    pos = end + 1;
  }
  return false;
}

}  // namespace

UiAssets::UiAssets() {
  for (const auto& [url, bytes] : embedded_files()) {
    Asset a;
    a.body = bytes;
    a.content_type = content_type_of(url);
    char tag[32];
    std::snprintf(tag, sizeof tag, "\"%016zx\"", std::hash<std::string_view>{}(bytes));
    a.etag = tag;
    a.compressible = compressible(a.content_type) && bytes.size() > 256;
    assets_.emplace(std::string(url), std::move(a));
  }
}

const std::string& UiAssets::gzip_of(const Asset& a) const {
  std::call_once(*a.gzip_once, [&a] {
    std::string z = gzip(a.body);
    if (!z.empty() && z.size() < a.body.size()) a.gzip = std::move(z);
  });
  return a.gzip;
}

bool UiAssets::is_page_path(std::string_view path) {
  return path == "/" || path == "/favicon.ico" || path.starts_with("/ui/");
}

Reply UiAssets::serve(std::string_view path, std::string_view accept_encoding, std::string_view if_none_match) const {
  std::string file(path);
  if (path == "/") file = "/ui/index.html";
  if (path == "/favicon.ico") file = "/ui/icon.svg";
  const auto it = assets_.find(file);
  if (it == assets_.end())
    return OpenAiService::error_reply(404, "no such file: " + std::string(path), "invalid_request_error");
  const Asset& a = it->second;
  Reply r;
  r.content_type = a.content_type;
  r.headers = {{"ETag", a.etag},
               {"Cache-Control", "no-cache"},
               {"Vary", "Accept-Encoding"},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               {"Content-Security-Policy", kCsp}};
  if (!if_none_match.empty() && if_none_match.find(a.etag) != std::string_view::npos) {
    r.status = 304;
    return r;
  }
  if (a.compressible && accepts_gzip(accept_encoding) && !gzip_of(a).empty()) {
    r.body = gzip_of(a);
    r.headers.emplace_back("Content-Encoding", "gzip");
  } else {
    r.body = std::string(a.body);
  }
  return r;
}

}  // namespace sluice::server
