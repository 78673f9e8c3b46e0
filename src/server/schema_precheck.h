// An over-limit schema refused before the body is parsed (issue 41: a 1.25 MB schema of 120k keys
// took 75-80 ms to refuse, most of it building the body's order-preserving value only to measure
// the schema's dump()). One scan over the body's bytes, building no value, finds the request's
// schema (response_format.json_schema.schema or the top-level json_schema) and computes the exact
// size dump() would give it; over grammar::Limits::max_schema_bytes, the request gets the 400 the
// full path would give. Anything the scan is unsure of (invalid or too deep JSON, escaped keys
// that repeat, another error the full path would report first) is left to the full path.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "server/model_context.h"

namespace sluice::server {

// The size nlohmann's dump() gives the JSON `text` (compact, UTF-8 as read), without building
// the value; nullopt for text the scan does not take (invalid, nested past kMaxJsonDepth) and,
// past `check_keys_past` bytes, for an object with a repeated key (dump() keeps one
// of a repeated key, so the count would be over).
std::optional<size_t> json_dumped_size(std::string_view text, size_t check_keys_past);

// Throws the ApiError parse_structured_output would throw for an oversized schema; else returns.
void refuse_oversized_schema(std::string_view body, const ModelContext& m);

}  // namespace sluice::server
