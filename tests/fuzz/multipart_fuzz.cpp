// libFuzzer target for the multipart/form-data parser of POST /v1/audio/transcriptions
// (src/server/multipart.cpp). An input is a Content-Type line, '\n', then the body. ApiError
// (a 400) is the only accepted failure; every part returned must lie inside the body, have a
// name, and there are never more parts than the limit.
//
// Seeds: tests/fuzz/multipart/*.txt.   tests/fuzz/run_media.sh multipart build-fuzz 60

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/api_error.h"
#include "server/multipart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace s = sluice::server;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::string_view body = in.substr(nl + 1);
  s::MultipartLimits lim;
  lim.max_parts = 8;
  lim.max_header_bytes = 256;
  try {
    const std::string boundary = s::multipart_boundary(in.substr(0, nl));
    if (boundary.empty() || boundary.size() > 70) std::abort();
    const auto parts = s::parse_multipart(body, boundary, lim);
    if (parts.size() > lim.max_parts) std::abort();
    for (const s::MultipartPart& p : parts) {
      if (p.name.empty()) std::abort();
      if (p.data.data() < body.data() || p.data.data() + p.data.size() > body.data() + body.size()) std::abort();
    }
  } catch (const s::ApiError& e) {
    if (e.status() != 400) std::abort();
  }
  return 0;
}
