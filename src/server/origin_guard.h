// The check that keeps web pages other than the chat page off the API: a browser request
// (one with an Origin header) must come from the server's own origin, and that origin must
// name the server by a loopback or IP address, "localhost" or the --host name. This stops
// cross-site POSTs (Origin differs from Host) and DNS rebinding (an attacker's name that
// resolves to 127.0.0.1 is not an allowed name). Requests without Origin (curl, the SDKs)
// are not browser requests and pass.
#pragma once

#include <string>
#include <string_view>

namespace sluice::server {

// Empty when the request may pass; otherwise the reason it is refused (for a 403).
std::string origin_refusal(std::string_view origin, std::string_view host, std::string_view bind_host);

}  // namespace sluice::server
