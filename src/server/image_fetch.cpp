#include "server/image_fetch.h"

#include <memory>
#include <mutex>

#include "base/error.h"

#if defined(SLUICE_HAVE_CURL)
#include <curl/curl.h>
#endif

namespace sluice::server {

#if defined(SLUICE_HAVE_CURL)
namespace {

struct Sink {
  std::string body;
  size_t max_bytes = 0;
  bool too_large = false;
};

// libcurl's write callback: a short count aborts the transfer (CURLE_WRITE_ERROR).
size_t write_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  if (s->body.size() + size * n > s->max_bytes) {
    s->too_large = true;
    return 0;
  }
  s->body.append(data, size * n);
  return size * n;
}

void check_scheme(const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) fail("the URL's scheme is not http or https");
}

[[noreturn]] void transfer_failed(CURLcode rc, const Sink& sink, const UrlFetchLimits& lim, const char* detail) {
  if (sink.too_large || rc == CURLE_FILESIZE_EXCEEDED)
    fail("the image is larger than %zu bytes (the server's limit)", lim.max_bytes);
  if (rc == CURLE_OPERATION_TIMEDOUT) fail("fetching the image timed out after %ld ms", lim.timeout_ms);
  if (rc == CURLE_TOO_MANY_REDIRECTS) fail("fetching the image took more than %ld redirects", lim.max_redirects);
  if (rc == CURLE_UNSUPPORTED_PROTOCOL) fail("the URL (or a redirect) uses a scheme other than http or https");
  fail("fetching the image failed: %s", detail[0] ? detail : curl_easy_strerror(rc));
}

}  // namespace

bool url_fetch_available() { return true; }

std::string fetch_url(const std::string& url, const UrlFetchLimits& lim) {
  check_scheme(url);
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  if (!h) fail("fetching the image failed: libcurl could not start");
  Sink sink;
  sink.max_bytes = lim.max_bytes;
  char detail[CURL_ERROR_SIZE] = {0};
  CURL* c = h.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, lim.max_redirects);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, lim.timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // worker threads: no SIGALRM for timeouts
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(lim.max_bytes));  // from Content-Length
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "sluice");
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) transfer_failed(rc, sink, lim, detail);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) fail("fetching the image got HTTP status %ld", status);
  const char* type = nullptr;
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
  const std::string t = type ? type : "";
  if (!t.empty() && t.rfind("image/", 0) != 0 && t.rfind("application/octet-stream", 0) != 0)
    fail("the URL's Content-Type '%s' is not an image", t.c_str());
  if (sink.body.empty()) fail("the URL's body is empty");
  return std::move(sink.body);
}

#else

bool url_fetch_available() { return false; }

std::string fetch_url(const std::string&, const UrlFetchLimits&) {
  fail("this sluice was built without libcurl: image URLs cannot be fetched (install libcurl4-openssl-dev)");
}

#endif

}  // namespace sluice::server
