// Remote images (sluice serve --allow-image-urls, docs/images.md): an image_url part's http(s)
// URL fetched with libcurl (image_fetch.cpp is the only file that includes it), within limits:
// only http and https (redirects too), at most `max_redirects` of them, `max_bytes` (refused from
// Content-Length before reading, and cut while reading), `timeout_ms` for the whole transfer,
// a 2xx status and an image (or unlabelled) content type. The server fetches whatever the
// operator's network lets it reach: that is the flag's whole risk (server-side request forgery).
#pragma once

#include <cstddef>
#include <string>

namespace sluice::server {

struct UrlFetchLimits {
  size_t max_bytes = 8u << 20;
  long timeout_ms = 10000;
  long max_redirects = 3;
};

// Whether this build can fetch (libcurl found at build time).
bool url_fetch_available();

// The body at `url`. Throws sluice::Error saying what failed ("HTTP status 404", "larger than
// ... bytes", "timed out after ... ms", "more than N redirects", "scheme ... is not http or https",
// "Content-Type 'text/html' is not an image").
std::string fetch_url(const std::string& url, const UrlFetchLimits& lim);

}  // namespace sluice::server
