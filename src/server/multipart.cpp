#include "server/multipart.h"

#include <cctype>

#include "server/api_error.h"

namespace sluice::server {

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw ApiError(400, "multipart body: " + what, "invalid_request_error", "file");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 2046's bchars: digits, letters and '()+_,-./:=? and space (not last).
bool boundary_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

// One `;`-separated parameter list ("form-data; name=\"file\"; filename=a.wav"): calls
// f(lowercased key, value) for each key=value, quoted values unescaped. `s` starts after the
// first token.
template <class F>
void for_each_param(std::string_view s, F&& f) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ';' || s[i] == ' ' || s[i] == '\t')) ++i;
    const size_t eq = s.find('=', i);
    if (i >= s.size() || eq == std::string_view::npos) return;
    const std::string key = lower(trim(s.substr(i, eq - i)));
    i = eq + 1;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::string value;
    if (i < s.size() && s[i] == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        value.push_back(s[i]);
      }
      if (i >= s.size()) bad("an unterminated quoted parameter ('" + key + "')");
      ++i;
    } else {
      const size_t end = s.find(';', i);
      value = std::string(trim(s.substr(i, end == std::string_view::npos ? s.size() - i : end - i)));
      i = end == std::string_view::npos ? s.size() : end;
    }
    f(key, std::move(value));
  }
}

// A part's header block (lines joined by CRLF, no final blank line) into `p`.
void read_headers(std::string_view block, MultipartPart& p) {
  bool disposition = false;
  while (!block.empty()) {
    const size_t eol = block.find("\r\n");
    const std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol == std::string_view::npos ? block.size() : eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) bad("a part's header line has no ':'");
    const std::string name = lower(trim(line.substr(0, colon)));
    const std::string_view value = trim(line.substr(colon + 1));
    if (name == "content-type") {
      p.content_type = std::string(value);
    } else if (name == "content-disposition") {
      const size_t semi = value.find(';');
      if (lower(trim(value.substr(0, semi))) != "form-data") bad("a part's Content-Disposition is not form-data");
      disposition = true;
      if (semi != std::string_view::npos)
        for_each_param(value.substr(semi), [&p](const std::string& k, std::string v) {
          if (k == "name") p.name = std::move(v);
          else if (k == "filename") p.filename = std::move(v);
        });
    }
  }
  if (!disposition) bad("a part has no Content-Disposition header");
  if (p.name.empty()) bad("a part's Content-Disposition has no name");
}

}  // namespace

std::string multipart_boundary(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  if (lower(trim(content_type.substr(0, semi))) != "multipart/form-data")
    throw ApiError(400,
                   "the request body must be multipart/form-data (Content-Type: multipart/form-data; boundary=...)",
                   "invalid_request_error", "file");
  std::string boundary;
  if (semi != std::string_view::npos)
    for_each_param(content_type.substr(semi), [&boundary](const std::string& k, std::string v) {
      if (k == "boundary") boundary = std::move(v);
    });
  if (boundary.empty()) bad("the Content-Type has no boundary");
  if (boundary.size() > 70) bad("the boundary is longer than 70 characters");
  for (char c : boundary)
    if (!boundary_char(c)) bad("the boundary has a character RFC 2046 does not allow");
  if (boundary.back() == ' ') bad("the boundary ends with a space");
  return boundary;
}

std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary,
                                           const MultipartLimits& limits) {
  const std::string dash = "--" + std::string(boundary);
  const std::string delimiter = "\r\n" + dash;
  // The first boundary: at the start, or after a preamble ending in CRLF.
  size_t at = 0;
  if (body.substr(0, dash.size()) != dash) {
    at = body.find(delimiter);
    if (at == std::string_view::npos) bad("the body does not start with its boundary");
    at += 2;
  }
  at += dash.size();
  std::vector<MultipartPart> parts;
  for (;;) {
    if (body.substr(at, 2) == "--") return parts;  // the close delimiter; the epilogue is ignored
    while (at < body.size() && (body[at] == ' ' || body[at] == '\t')) ++at;  // transport padding
    if (body.substr(at, 2) != "\r\n") bad("a boundary is not followed by a line break");
    at += 2;
    if (parts.size() == limits.max_parts) bad("more than " + std::to_string(limits.max_parts) + " parts");
    const size_t blank = body.find("\r\n\r\n", at);
    const bool no_headers = body.substr(at, 2) == "\r\n";
    if (!no_headers && (blank == std::string_view::npos || blank - at > limits.max_header_bytes))
      bad("a part's headers are over " + std::to_string(limits.max_header_bytes) + " bytes or never end");
    MultipartPart p;
    read_headers(no_headers ? std::string_view() : body.substr(at, blank - at), p);
    at = no_headers ? at + 2 : blank + 4;
    const size_t end = body.find(delimiter, at);
    if (end == std::string_view::npos) bad("no closing boundary (the body is truncated)");
    p.data = body.substr(at, end - at);
    const bool array = p.name.size() > 2 && p.name.compare(p.name.size() - 2, 2, "[]") == 0;  // "include[]"
    for (const MultipartPart& q : parts)
      if (q.name == p.name && !array) bad("two parts are named '" + p.name + "'");
    parts.push_back(std::move(p));
    at = end + delimiter.size();
  }
}

}  // namespace sluice::server
