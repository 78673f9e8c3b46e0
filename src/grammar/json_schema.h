// JSON Schema -> grammar, in two output syntaxes:
//   * JSON (default): compact — no whitespace between tokens — with object properties in
//     the schema's `properties` order, then any additional properties;
//   * Gemma 4's native tool-argument syntax: the same value shapes, keys unquoted, strings
//     between `<|"|>` token terminals instead of quotes (gemma4.md §4.5).
// The supported keywords and their exact semantics are listed in docs/structured-output.md.
// Annotations and unknown keywords are ignored (they constrain nothing); an assertion the
// grammar cannot enforce is an error naming it and its location, or, with `lenient`, dropped
// and listed in Grammar::warnings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace sluice::grammar {

struct JsonSchemaOptions {
  enum class Syntax : uint8_t { kJson, kGemmaNative };
  Syntax syntax = Syntax::kJson;
  bool any_whitespace = false;  // allow up to a few spaces/newlines around punctuation
  // Gemma 4 `<|"|>`; -1: the quote is that text in bytes (a vocabulary without the token).
  int32_t native_quote_token = 52;
  // Drop unsupported assertions (listed in Grammar::warnings) instead of failing; oneOf
  // branches that may overlap are then generated as anyOf.
  bool lenient = false;
  Limits limits;
};

// Adds the schema's value rule to `b` and returns it (callers embed it, e.g. in a tool call).
uint32_t add_json_schema(GrammarBuilder& b, const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts);

// The whole grammar: one value of the schema. Throws sluice::Error for malformed JSON,
// unsupported keywords, over-limit schemas.
Grammar json_schema_grammar_text(std::string_view schema_text, const JsonSchemaOptions& opts = {});
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts = {});

// A cache key: the schema's canonical text plus the options.
// "json schema: N bytes, over the limit of M (limit max_schema_bytes)": the refusal of a schema
// whose compact text is over Limits::max_schema_bytes (also given before the body is parsed).
std::string schema_size_error(size_t bytes, size_t limit);
std::string json_schema_cache_key(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts);

}  // namespace sluice::grammar
