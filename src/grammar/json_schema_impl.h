// Internal to the JSON Schema front end: the compiler object shared by json_schema.cpp
// (structure: dispatch, objects, arrays), json_schema_merge.cpp (keyword normalisation,
// $ref, allOf as an intersection, oneOf) and json_scalars.cpp (strings, formats, numbers).
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

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

// Sets a counter for a scope and restores it at the end, however the scope ends.
struct Widen {
  Widen(size_t& w, size_t value) : w_(w), outer_(w) { w_ = value; }
  ~Widen() { w_ = outer_; }
  Widen(const Widen&) = delete;
  Widen& operator=(const Widen&) = delete;

 private:
  size_t& w_;
  size_t outer_;
};

// A non-negative decimal: integer part and exactly kMaxFractionDigits fraction digits.
struct Decimal {
  uint64_t ip = 0;
  std::string frac = std::string(kMaxFractionDigits, '0');
  bool operator==(const Decimal&) const = default;
  auto operator<=>(const Decimal& o) const {
    if (ip != o.ip) return ip <=> o.ip;
    return frac <=> o.frac;
  }
};

// d +- one unit in the last of `digits` fraction digits (integer part when digits is 0).
Decimal step(Decimal d, int dir, uint32_t digits);

// What a `not` excludes: whole types and single values (null, booleans, strings).
struct Exclusions {
  std::set<std::string> types;
  std::vector<Json> values;
  bool empty() const { return types.empty() && values.empty(); }
  bool excludes(const Json& v) const { return std::find(values.begin(), values.end(), v) != values.end(); }
};

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const Json& root, const JsonSchemaOptions& opts);
  uint32_t rule_for(const Json& s, const std::string& path, bool shared = false);
  const std::vector<std::string>& dropped() const { return dropped_; }

  // An assertion the grammar cannot enforce: an error naming it and where (strict), or
  // dropped and recorded (lenient).
  void unsupported(const std::string& what, const std::string& path);

  // json_schema_merge.cpp
  Json normalize(const Json& s, const std::string& path, int depth = 0);
  Json intersect(const Json& a, const Json& b, const std::string& path, int depth = 0);
  const Json& resolve_ref(const Json& ref, const std::string& path);  // into the root document
  bool disjoint(const Json& a, const Json& b, int depth = 0);
  Json schema_for_name(const Json& s, const std::string& name);

  // json_schema_cond.cpp
  std::optional<Json> negate(const Json& c, const std::string& path, int depth = 0);
  void if_then_else(Json& out, const std::string& path, int depth);
  void property_names(Json& out, const std::string& path, int depth);
  Expr contains_expr(const Json& s, const std::string& path, size_t lo, size_t hi, const Expr& comma,
                     const Expr& close);

  // json_scalars.cpp
  Expr string_expr(const Json& s, const std::string& path);
  Expr number_expr(const Json& s, const std::string& path, bool integer);
  Expr quoted(Expr content);         // "..." or <|"|>...<|"|>
  Expr json_literal(const Json& v);  // a const/enum value in the output syntax

 private:
  Expr value_expr(const Json& s, const std::string& path);
  Expr union_expr(const Json& s, const std::string& path);
  void check_width(size_t n, const char* what, const std::string& path);
  Expr typed_expr(const Json& s, const std::string& type, const std::string& path);
  Expr object_expr(const Json& s, const std::string& path);
  Expr array_expr(const Json& s, const std::string& path);
  bool unique_items_may_differ(const Json& s, const std::string& path, std::optional<Expr>& item);
  std::optional<std::vector<Json>> unique_value_list(const Json& s, const std::string& path);
  Expr unique_values_expr(const std::vector<Json>& values, const std::string& path, size_t lo, size_t hi);
  Expr unique_value_items(const std::vector<Json>& values, const std::string& path, size_t lo, Expr& comma);
  Expr any_value();
  Expr key_expr(const std::string& name);
  std::optional<Expr> extra_members(const Json& s, const std::string& path);
  Expr other_key(const Json& s);
  Expr key_trie(const std::vector<std::string>& names, size_t depth, size_t lo, size_t hi);
  struct Members {
    std::vector<std::optional<Expr>> members;  // per name: key and value; nullopt: never present
    std::vector<bool> required;
    std::vector<std::vector<size_t>> deps;  // dependentRequired: per name, the names it requires
  };
  Expr members_expr(const Json& s, const std::string& path, const Members& m, const std::optional<Expr>& extra);
  bool admits(const Json& s, const Json& v);
  bool collect_not(const Json& n, const std::string& path, Exclusions& no);
  Expr strings_except(const Json& s, std::vector<std::string> out, const std::string& path);
  Expr format_expr(const std::string& fmt, const std::string& path, uint64_t lo, uint64_t hi);
  Expr ws() { return opts_.any_whitespace ? ref(ws_) : empty(); }
  Expr punct(char c) { return seq({ws(), lit(std::string(1, c)), ws()}); }
  Expr digits_range(uint64_t lo, uint64_t hi, bool unbounded);
  Expr fraction(const std::optional<std::string>& lo, const std::optional<std::string>& hi, uint32_t digits);
  std::optional<Expr> magnitude(Decimal a, bool a_open, std::optional<Decimal> b, bool b_open, bool integer,
                                uint32_t digits);
  std::optional<Expr> multiple_of_expr(const Json& s, const std::string& path, bool integer, uint32_t& digits);
  std::optional<Expr> integer_multiples(const Json& s, const std::string& path, uint64_t m);
  Expr bounded_number(const std::optional<std::pair<Json, bool>>& lo, const std::optional<std::pair<Json, bool>>& hi,
                      const std::string& path, bool integer, uint32_t digits);
  void common_rules();
  void value_rule();
  Json fold_all_of(const Json& s, Json out, const std::string& path, int depth);
  void one_of_as_any_of(Json& out, const std::string& path, int depth);
  void rename_one_of(Json& out);
  bool drop_shared_types(std::vector<Json>& br);
  bool disjoint_objects(const Json& a, const Json& b, int depth);
  void merge_objects(Json& res, const Json& a, const Json& b);
  void merge_arrays(Json& res, const Json& a, const Json& b);
  bool merge_keyword(Json& res, const std::string& k, const Json& vb, const std::string& path);

  GrammarBuilder& b_;
  const Json& root_;
  JsonSchemaOptions opts_;
  bool native_;
  RegexContext rx_;
  uint32_t ws_ = 0, value_ = 0, string_ = 0, number_ = 0, str_char_ = 0, digit1_ = 0, key_ = 0;
  std::unordered_map<std::string, uint32_t> memo_;      // canonical schema text -> rule
  std::unordered_map<std::string, uint32_t> ref_memo_;  // "$ref" text -> rule
  size_t depth_ = 0;
  uint32_t u_comma_ = 0, u_close_ = 0;  // delimiters of unique arrays (Grammar::unique_close)
  uint32_t other_key_rest_ = 0;         // rule: the rest of a key that left the declared names' trie
  size_t width_ = 1;                    // product of the enclosing unions' widths (Limits::max_union_branches)
  const Exclusions* not_ = nullptr;     // the `not` of the value typed_expr is building
  Expr char_;                           // one string character, inlined into each use (see common_rules)
  std::vector<std::string> dropped_;
};

// Keyword classes (json_schema_merge.cpp).
bool is_type_name(const std::string& t);
bool trivially_true(const Json& v);                // true or {}: admits every value
std::vector<std::string> types_of(const Json& s);  // explicit or implied types; empty: any

}  // namespace sluice::grammar::detail
