#include "server/origin_guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace sluice::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "name:port", "[v6]:port" or "name" -> the name without brackets or port.
std::string host_name(std::string_view hostport) {
  if (hostport.starts_with("[")) {
    const size_t close = hostport.find(']');
    return close == std::string_view::npos ? std::string() : std::string(hostport.substr(1, close - 1));
  }
  return std::string(hostport.substr(0, hostport.find(':')));
}

bool is_ip_literal(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

bool allowed_name(const std::string& name, std::string_view bind_host) {
  if (name.empty()) return false;
  if (name == "localhost" || name.ends_with(".localhost") || is_ip_literal(name)) return true;
  return name == lower(bind_host);
}

}  // namespace

std::string origin_refusal(std::string_view origin, std::string_view host, std::string_view bind_host) {
  if (origin.empty()) return {};
  const std::string o = lower(origin), h = lower(host);
  const size_t scheme = o.find("://");
  if (scheme == std::string::npos)
    return "requests from a page must carry an http(s) Origin (got '" + std::string(origin) + "')";
  const std::string o_hostport = o.substr(scheme + 3);
  if (o_hostport != h)
    return "cross-origin request refused: Origin " + std::string(origin) + " is not this server (" + std::string(host) +
           ")";
  if (!allowed_name(host_name(h), bind_host))
    return "request refused: the page names this server as '" + std::string(host) +
           "', which is not localhost, an IP address or --host (DNS rebinding guard)";
  return {};
}

}  // namespace sluice::server
