// JSON Schema front end, keywords that select or count: `if`/`then`/`else` (rewritten into
// two disjoint anyOf branches when the `if` can be negated), `propertyNames` (names checked
// against declared properties, a key grammar for the others) and `contains` with
// minContains/maxContains (an item list counting the items that meet it).
#include <regex>

#include "base/error.h"
#include "grammar/item_tracker.h"
#include "grammar/json_schema_impl.h"

namespace sluice::grammar::detail {

namespace {

// UTF-8 characters in s (JSON Schema lengths count characters).
size_t characters(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Whether a declared name meets propertyNames `pn` (type, const/enum, lengths, pattern).
// nullopt: pn has a keyword this cannot check (format, an unreadable pattern).
std::optional<bool> name_meets(const Json& pn, const std::string& name) {
  for (const auto& [k, v] : pn.items()) {
    if (k == "type") {
      const auto ts = types_of(pn);
      if (std::find(ts.begin(), ts.end(), "string") == ts.end()) return false;
    } else if (k == "const" || k == "enum") {
      const Json values = k == "const" ? Json::array({v}) : v;
      if (std::find(values.begin(), values.end(), Json(name)) == values.end()) return false;
    } else if (k == "minLength" || k == "maxLength") {
      if (!v.is_number_integer()) return std::nullopt;
      const auto n = static_cast<int64_t>(characters(name));
      if (k == "minLength" ? n < v.get<int64_t>() : n > v.get<int64_t>()) return false;
    } else if (k == "pattern" && v.is_string()) {
      try {
        if (!std::regex_search(name, std::regex(v.get<std::string>(), std::regex::ECMAScript))) return false;
      } catch (const std::exception&) {
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
  }
  return true;
}

}  // namespace

// The schema of the values `c` does not admit, for the `if` shapes that decide on types and
// values: type/const/enum (as a `not`, whose values must be null, booleans or strings),
// required (the name absent) and properties (the name present with a value its schema does
// not admit; nested objects recurse). not(A and B) is anyOf(not A, not B). nullopt: some
// keyword of `c` has no negation here.
std::optional<Json> SchemaCompiler::negate(const Json& c0, const std::string& path, int depth) {
  const Json c = normalize(c0, path, depth + 1);
  if (c.is_boolean()) return Json(!c.get<bool>());
  if (depth > 16) return std::nullopt;
  Json clauses = Json::array();
  for (const auto& [k, v] : c.items()) {
    if (k == "type" || k == "const" || k == "enum") {
      const Json one{{k, v}};
      Exclusions probe;
      if (!collect_not(one, path, probe)) return std::nullopt;
      clauses.push_back(Json{{"not", one}});
    } else if (k == "required" && v.is_array()) {
      for (const Json& r : v)
        if (r.is_string()) clauses.push_back(Json{{"properties", {{r.get<std::string>(), false}}}});
    } else if (k == "properties" && v.is_object()) {
      for (const auto& [name, ps] : v.items()) {
        const auto n = negate(ps, path + "/properties/" + name, depth + 1);
        if (!n) return std::nullopt;
        if (*n == false) continue;  // every value meets ps: no clause
        clauses.push_back(Json{{"required", {name}}, {"properties", {{name, *n}}}});
      }
    } else {
      return std::nullopt;
    }
  }
  if (clauses.empty()) return Json(false);
  if (clauses.size() == 1) return clauses[0];
  return Json{{"anyOf", clauses}};
}

// if/then/else: anyOf([if, then], [not if, else]) intersected with the rest of the schema.
// The two branches are disjoint, so a value takes exactly the path jsonschema would.
void SchemaCompiler::if_then_else(Json& out, const std::string& path, int depth) {
  const Json cond = out["if"];
  const Json then_s = out.value("then", Json(true)), else_s = out.value("else", Json(true));
  out.erase("if");
  out.erase("then");
  out.erase("else");
  if (trivially_true(then_s) && trivially_true(else_s)) return;
  const auto neg = negate(cond, path + "/if", depth);
  if (!neg) {
    unsupported("'if' that is not decided by types, values and required names", path + "/if");
    return;
  }
  const Json branches = Json::array(
      {Json{{"allOf", Json::array({cond, then_s})}}, Json{{"allOf", Json::array({*neg, else_s})}}});
  if (!out.contains("anyOf")) {
    out["anyOf"] = branches;
    return;
  }
  Json both = Json::array();
  for (const Json& a : out["anyOf"]) both.push_back(Json{{"allOf", Json::array({a, Json{{"anyOf", branches}}})}});
  out["anyOf"] = both;
}

// propertyNames: an enum/const of names becomes those names as properties (each with the
// schema patternProperties/additionalProperties give it) and no others; otherwise declared
// names that fail it are forbidden, and additional members get keys from its string grammar
// (object_expr), which is exact only when there is no declared name and no pattern to keep
// apart from it.
void SchemaCompiler::property_names(Json& out, const std::string& path, int depth) {
  const std::string at = path + "/propertyNames";
  const Json pn = normalize(out["propertyNames"], at, depth + 1);
  out.erase("propertyNames");
  if (trivially_true(pn)) return;
  if (pn == false) {
    out["maxProperties"] = 0;
    return;
  }
  Json props = out.value("properties", Json::object());
  for (const Json& r : out.value("required", Json::array()))
    if (r.is_string() && !props.contains(r.get<std::string>()))
      props[r.get<std::string>()] = schema_for_name(out, r.get<std::string>());
  if (pn.contains("enum") || pn.contains("const")) {
    for (const Json& n : pn.contains("const") ? Json::array({pn["const"]}) : pn["enum"])
      if (n.is_string() && !props.contains(n.get<std::string>()))
        props[n.get<std::string>()] = schema_for_name(out, n.get<std::string>());
    out.erase("patternProperties");
    out["additionalProperties"] = false;
  }
  for (auto& [name, ps] : props.items()) {
    const auto ok = name_meets(pn, name);
    if (!ok) {
      unsupported("'propertyNames' with a keyword other than type, enum, const, minLength, maxLength, pattern", at);
      return;
    }
    if (!*ok) ps = false;
  }
  if (!props.empty()) out["properties"] = props;
  const bool extra = !(out.contains("additionalProperties") && out["additionalProperties"] == false);
  const bool pats = out.contains("patternProperties") && !out["patternProperties"].empty();
  if (!extra && !pats) return;
  if (!props.empty() || pats) {
    unsupported("'propertyNames' beside declared properties or patternProperties", at);
    return;
  }
  out["propertyNames"] = pn;  // object_expr: the additional members' keys
}

// contains with minContains/maxContains (and minItems/maxItems): list(n, c) is the rest of
// the list after n items (saturating at the largest count that matters) of which c meet
// `contains` (saturating likewise). An item may meet `contains` and be counted, or — when
// there is no maxContains — be taken as a plain item; with maxContains, plain items are the
// ones `contains` rejects (its negation).
Expr SchemaCompiler::contains_expr(const Json& s, const std::string& path, size_t lo, size_t hi, const Expr& comma,
                                   const Expr& close) {
  const std::string at = path + "/contains";
  auto count = [&](const char* k, size_t dflt) {
    if (!s.contains(k)) return dflt;
    if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0)
      fail("json schema: '%s' at %s must be a non-negative integer", k, path.c_str());
    return s[k].get<size_t>();
  };
  const size_t min_c = count("minContains", 1), max_c = count("maxContains", SIZE_MAX);
  if (min_c > max_c) fail("json schema: minContains > maxContains at %s", path.c_str());
  const Json items = s.value("items", Json(true));
  const Json hit = normalize(Json{{"allOf", Json::array({items, s["contains"]})}}, at);
  Json plain = items;
  if (max_c != SIZE_MAX) {
    const auto neg = negate(s["contains"], at);
    if (!neg) unsupported("'maxContains' over a 'contains' that is not decided by types and values", at);
    else plain = Json{{"allOf", Json::array({items, *neg})}};
  }
  plain = normalize(plain, path + "/items");
  const size_t top_c = max_c == SIZE_MAX ? min_c : max_c;              // hit counts past top_c behave alike
  const size_t top_n = hi == SIZE_MAX ? std::max<size_t>(lo, 1) : hi;  // n > 0: a comma comes first
  if ((top_c + 1) * (top_n + 1) > opts_.limits.max_rules / 4 || top_n > opts_.limits.max_repeat)
    fail("json schema: the item counts at %s need too many rules (limit max_rules)", path.c_str());
  const bool has_hit = hit != false, has_plain = plain != false;
  const size_t n_states = (top_n + 1) * (top_c + 1);
  auto id = [&](size_t n, size_t c) { return n * (top_c + 1) + c; };
  // Transitions of state (n, c): after a plain item, after a counted one (SIZE_MAX: none).
  auto step = [&](size_t n, size_t c, bool counted) -> size_t {
    if ((hi != SIZE_MAX && n >= hi) || !(counted ? has_hit && c < top_c : has_plain)) return SIZE_MAX;
    return id(std::min(n + 1, top_n), counted ? c + 1 : c);
  };
  auto closes = [&](size_t n, size_t c) { return n >= lo && c >= min_c && c <= max_c; };
  // Live states (some way to close from them), to a fixed point: loops do not count.
  std::vector<bool> live(n_states, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t n = 0; n <= top_n; ++n)
      for (size_t c = 0; c <= top_c; ++c) {
        if (live[id(n, c)]) continue;
        const size_t p = step(n, c, false), h = step(n, c, true);
        if (closes(n, c) || (p != SIZE_MAX && live[p]) || (h != SIZE_MAX && live[h])) live[id(n, c)] = changed = true;
      }
  }
  if (!live[id(0, 0)]) fail("json schema: no array at %s meets 'contains' and its counts", path.c_str());
  std::vector<uint32_t> rule(n_states, 0);
  for (size_t i = 0; i < n_states; ++i)
    if (live[i]) rule[i] = b_.declare("contains");
  const std::optional<Expr> hit_item = has_hit ? std::optional(ref(rule_for(hit, at))) : std::nullopt;
  const std::optional<Expr> plain_item = has_plain ? std::optional(ref(rule_for(plain, path))) : std::nullopt;
  for (size_t n = 0; n <= top_n; ++n)
    for (size_t c = 0; c <= top_c; ++c) {
      if (!live[id(n, c)]) continue;
      const Expr sep = n == 0 ? empty() : comma;
      std::vector<Expr> alts;
      if (closes(n, c)) alts.push_back(close);
      const size_t p = step(n, c, false), h = step(n, c, true);
      if (p != SIZE_MAX && live[p]) alts.push_back(seq({sep, *plain_item, ref(rule[p])}));
      if (h != SIZE_MAX && live[h]) alts.push_back(seq({sep, *hit_item, ref(rule[h])}));
      b_.define(rule[id(n, c)], alt(std::move(alts)));
    }
  return seq({lit("["), ws(), ref(rule[id(0, 0)])});
}

// The values a unique array's items may take, when they are a finite set: enum/const,
// boolean or null items (distinct under JSON equality: {"a":1,"b":2} = {"b":2,"a":1}, 1 = 1.0).
// nullopt: not this shape.
std::optional<std::vector<Json>> SchemaCompiler::unique_value_list(const Json& s, const std::string& path) {
  if (s.contains("prefixItems") || s.contains("contains")) return std::nullopt;
  const Json items = normalize(s.value("items", Json(true)), path + "/items");
  if (!items.is_object()) return std::nullopt;
  for (const auto& [k, v] : items.items())
    if (k != "type" && k != "enum" && k != "const") return std::nullopt;
  Json candidates;
  if (items.contains("const")) candidates = Json::array({items["const"]});
  else if (items.contains("enum") && items["enum"].is_array()) candidates = items["enum"];
  else if (items.value("type", Json()) == "boolean") candidates = Json::array({true, false});
  else if (items.value("type", Json()) == "null") candidates = Json::array({nullptr});
  else return std::nullopt;
  std::vector<Json> values;
  std::set<std::string> seen;
  for (const Json& v : candidates)
    if (admits(items, v) && seen.insert(canonical_json(v.dump())).second) values.push_back(v);
  if (values.empty()) return std::nullopt;
  return values;
}

// uniqueItems over more values than the grammar lists sets of: the item is one literal per
// value, each its own rule, and the matcher drops a written value's parse at its first byte
// and the ',' once every value is written (Grammar::unique_values), so a live prefix always
// has an unwritten value to become. `comma` becomes the delimiter the matcher knows.
Expr SchemaCompiler::unique_value_items(const std::vector<Json>& values, const std::string& path, size_t lo,
                                        Expr& comma) {
  if (lo > values.size()) fail("json schema: no array at %s has minItems different values", path.c_str());
  check_width(values.size(), "'enum'", path);
  std::vector<std::string> canonical;
  std::vector<uint32_t> rules;
  std::vector<Expr> alts;
  for (const Json& v : values) {
    canonical.push_back(canonical_json(v.dump()));
    rules.push_back(b_.add("unique-value", json_literal(v)));
    alts.push_back(ref(rules.back()));
  }
  const uint32_t c = b_.add("unique-values-comma", lit(","));
  b_.mark_unique_values(std::move(canonical), std::move(rules), c);
  comma = seq({ws(), ref(c), ws()});
  return alt(std::move(alts));
}

// uniqueItems over a few values: one rule per set of values already written, each offering
// the values not yet in it — exact in the grammar (no matcher work, native syntax too), and an
// item is never left without a different value to take.
Expr SchemaCompiler::unique_values_expr(const std::vector<Json>& values, const std::string& path, size_t lo,
                                        size_t hi) {
  const size_t n_sets = size_t{1} << values.size();
  std::vector<bool> live(n_sets, false);  // supersets have larger numbers: computed first
  for (size_t set = n_sets; set-- > 0;) {
    const auto count = static_cast<size_t>(__builtin_popcountll(set));
    live[set] = count >= lo;
    for (size_t i = 0; i < values.size() && count < hi; ++i)
      live[set] = live[set] || (!(set >> i & 1) && live[set | size_t{1} << i]);
  }
  if (!live[0]) fail("json schema: no array at %s has minItems different values", path.c_str());
  std::vector<uint32_t> rule(n_sets, 0);
  for (size_t set = 0; set < n_sets; ++set)
    if (live[set]) rule[set] = b_.declare("unique-values");
  for (size_t set = 0; set < n_sets; ++set) {
    if (!live[set]) continue;
    const auto count = static_cast<size_t>(__builtin_popcountll(set));
    std::vector<Expr> alts;
    if (count >= lo) alts.push_back(seq({ws(), lit("]")}));
    for (size_t i = 0; i < values.size() && count < hi; ++i) {
      const size_t next = set | size_t{1} << i;
      if (set >> i & 1 || !live[next]) continue;
      alts.push_back(seq({count == 0 ? empty() : punct(','), json_literal(values[i]), ref(rule[next])}));
    }
    b_.define(rule[set], alt(std::move(alts)));
  }
  return seq({lit("["), ws(), ref(rule[0])});
}

}  // namespace sluice::grammar::detail
