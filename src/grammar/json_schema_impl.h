// Internal to the JSON Schema front end: the compiler object shared by json_schema.cpp
// (structure: dispatch, objects, arrays, $ref, allOf) and json_scalars.cpp (strings,
// formats, numbers).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>

#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace sluice::grammar::detail {

// Number digits the grammar allows (stricter than JSON, which has no limit): a double holds
// at most 17 significant digits, and the shortest round-trip form (Python repr) writes at
// most 3 zeros after the point before them (below 1e-4 it switches to an exponent). A
// double's decimal exponent has at most 3 digits (1e308).
constexpr uint32_t kMaxFractionDigits = 20;
constexpr uint32_t kMaxExponentDigits = 3;

using Json = nlohmann::ordered_json;

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const Json& root, const JsonSchemaOptions& opts);
  uint32_t rule_for(const Json& s, const std::string& path, bool shared = false);

  // json_scalars.cpp
  Expr string_expr(const Json& s, const std::string& path);
  Expr number_expr(const Json& s, const std::string& path, bool integer);
  Expr quoted(Expr content);         // "..." or <|"|>...<|"|>
  Expr json_literal(const Json& v);  // a const/enum value in the output syntax

 private:
  Expr value_expr(const Json& s, const std::string& path);
  Expr typed_expr(const Json& s, const std::string& type, const std::string& path);
  Expr object_expr(const Json& s, const std::string& path);
  Expr array_expr(const Json& s, const std::string& path);
  Expr any_value();
  Json resolve(const Json& s, const std::string& path, int depth = 0);
  Json merge_all_of(const Json& s, const std::string& path);
  Expr key_expr(const std::string& name);
  Expr format_expr(const std::string& fmt, const std::string& path);
  Expr ws() { return opts_.any_whitespace ? ref(ws_) : empty(); }
  Expr punct(char c) { return seq({ws(), lit(std::string(1, c)), ws()}); }
  Expr digits_range(uint64_t lo, uint64_t hi, bool unbounded);
  std::optional<Expr> magnitude(uint64_t a, bool a_open, std::optional<uint64_t> b, bool b_open, bool integer);
  void common_rules();

  GrammarBuilder& b_;
  const Json& root_;
  JsonSchemaOptions opts_;
  bool native_;
  RegexContext rx_;
  uint32_t ws_ = 0, value_ = 0, string_ = 0, number_ = 0, str_char_ = 0, digit1_ = 0, key_ = 0;
  std::unordered_map<std::string, uint32_t> memo_;  // canonical schema text -> rule
  size_t depth_ = 0;
  Expr char_;  // one string character, inlined into each use (see common_rules)
};

}  // namespace sluice::grammar::detail
