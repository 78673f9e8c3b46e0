// JSON in and out of the template engine.
//
// In: request data (nlohmann json) becomes template values. ordered_json keeps the sender's
// key order, which is what Python sees (a dict parsed by json.loads keeps insertion order)
// and what `tojson` / `.items()` then reproduce; plain json sorts keys on parse.
// Out: Python's json.dumps, which is what the HF `tojson` filter calls.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/value.h"

namespace sluice::jinja {

Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

struct DumpOptions {
  bool ensure_ascii = false;          // HF's tojson default (jinja2's own escapes HTML instead)
  std::optional<std::string> indent;  // nullopt: one line; else the per-level indent string
  std::string item_sep;               // defaults as json.dumps: ", " (or "," when indenting)
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string dumps(const Value& v, const DumpOptions& opt);

}  // namespace sluice::jinja
