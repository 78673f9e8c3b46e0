// Reading JSON text that a client controls: the request body and any JSON that arrives inside
// one of its strings (tool-call arguments, tool results). One reader, one set of limits, and
// work linear in the text:
//   * depth, byte size and value count are checked while parsing, so an over-limit value is
//     never built (copying or converting a deep value recurses once per level);
//   * the order-preserving value (ordered_json) is filled without ordered_map's linear key
//     search (quadratic in an object's keys); a duplicate key keeps its first position and
//     takes the last value, as nlohmann's own parser does.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sluice {

struct JsonLimits {
  int max_depth = 128;                  // open arrays and objects, the outermost included
  size_t max_bytes = 8u << 20;          // the text
  size_t max_values = size_t{1} << 20;  // scalars, arrays and objects (keys not counted)
};

inline constexpr int kMaxJsonDepth = 128;  // arrays and objects in a request body, the body itself included
inline constexpr size_t kMaxJsonValues = size_t{1} << 20;  // scalars, arrays and objects in one JSON text

// The limits every JSON text a client sends is read with: the body, and JSON inside one of
// its strings (a tool call's arguments, a tool result), and JSON a model writes in a tool call.
const JsonLimits& request_json_limits();

// Thrown for text that is not JSON (`limit` false) or that passes a limit (`limit` true).
// The message starts with the `what` given to read_json: "the request body is nested ...".
class JsonReadError : public Error {
 public:
  JsonReadError(const std::string& what, bool limit) : Error(what), limit_(limit) {}
  bool limit() const { return limit_; }

 private:
  bool limit_;
};

// `what` names the text in messages ("the request body", "messages[2].tool_calls[0]...").
template <class J>
J read_json(std::string_view text, const JsonLimits& limits, const std::string& what);

extern template nlohmann::json read_json<nlohmann::json>(std::string_view, const JsonLimits&, const std::string&);
extern template nlohmann::ordered_json read_json<nlohmann::ordered_json>(std::string_view, const JsonLimits&,
                                                                         const std::string&);

// How many texts read_json has read on this thread (tests count the reads of one request).
size_t json_texts_read();

// A copy of `from` as the other value type (sorted <-> document key order), built without
// recursion: safe at any depth.
template <class To, class From>
To convert_json(const From& from);

extern template nlohmann::json convert_json<nlohmann::json, nlohmann::ordered_json>(const nlohmann::ordered_json&);
extern template nlohmann::ordered_json convert_json<nlohmann::ordered_json, nlohmann::json>(const nlohmann::json&);

}  // namespace sluice
