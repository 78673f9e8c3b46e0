// multipart/form-data request bodies (RFC 7578 over RFC 2046's multipart syntax), as OpenAI's
// POST /v1/audio/transcriptions takes them: the boundary from the Content-Type header, then each
// part's Content-Disposition (form-data; name="..."; filename="...") and Content-Type, and its
// bytes as a view into the body. Bounded: at most `max_parts` parts, `max_header_bytes` of
// headers a part, boundaries of 1-70 characters (RFC 2046). Every malformed body is an ApiError
// 400 saying what is wrong ("multipart body: ..."), never a crash or a read past the body.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::server {

struct MultipartPart {
  std::string name;          // the form field
  std::string filename;      // empty unless the part is a file
  std::string content_type;  // empty when the part has none
  std::string_view data;     // into the body passed to parse_multipart
};

struct MultipartLimits {
  size_t max_parts = 32;
  size_t max_header_bytes = 8192;  // one part's header block
};

// The boundary of a "multipart/form-data; boundary=..." Content-Type (quoted or not). 400 for
// another media type, a missing, empty, over-long or badly charactered boundary.
std::string multipart_boundary(std::string_view content_type);

// The body's parts in order. 400 for a body that does not start with the boundary, a part
// without a form-data Content-Disposition or a name, a header line without ':', headers over
// the limit, more parts than the limit, two parts of one name (but a list's, "x[]"), or no closing boundary.
std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary,
                                           const MultipartLimits& limits = {});

}  // namespace sluice::server
