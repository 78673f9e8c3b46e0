// JSON Schema front end, keyword level: what each keyword means before any grammar is built.
// normalize() reduces a schema object to the keywords that constrain (annotations and
// unknown keywords dropped, draft-4/6/7 spellings rewritten to 2020-12, `$ref` with
// siblings and `allOf` folded into one intersection, `oneOf` turned into `anyOf` where the
// branches are provably disjoint); intersect() is `allOf` of two normalized schemas.
#include <algorithm>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include "base/error.h"
#include "grammar/json_schema_impl.h"

namespace sluice::grammar::detail {

namespace {

// Keywords kept as they are; everything else is an annotation, an unknown keyword (both
// ignored: they constrain nothing) or one of the rewrites in keyword_into().
const std::set<std::string> kKept = {"type",
                                     "properties",
                                     "required",
                                     "additionalProperties",
                                     "patternProperties",
                                     "enum",
                                     "const",
                                     "anyOf",
                                     "oneOf",
                                     "allOf",
                                     "prefixItems",
                                     "minItems",
                                     "maxItems",
                                     "minLength",
                                     "maxLength",
                                     "pattern",
                                     "format",
                                     "minimum",
                                     "maximum",
                                     "exclusiveMinimum",
                                     "exclusiveMaximum",
                                     "multipleOf",
                                     "$ref",
                                     "nullable",
                                     "minProperties",
                                     "maxProperties",
                                     "dependentRequired",
                                     "not",
                                     "uniqueItems",
                                     "if",
                                     "then",
                                     "else",
                                     "propertyNames",
                                     "contains",
                                     "minContains",
                                     "maxContains"};
const char* const kApplicators[] = {"allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas", "dependencies"};

bool has_applicator(const Json& s) {
  return std::any_of(std::begin(kApplicators), std::end(kApplicators), [&](const char* k) { return s.contains(k); });
}

std::string pointer_part(const std::string& k) {
  std::string out;
  for (char c : k) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// The JSON type of a value; integral floats count as integers (JSON Schema does).
std::string value_type(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() ||
      (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))))
    return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

std::set<std::string> type_set(const Json& t) {
  std::set<std::string> out;
  if (t.is_string()) out.insert(t.get<std::string>());
  else if (t.is_array())
    for (const Json& x : t)
      if (x.is_string()) out.insert(x.get<std::string>());
  return out;
}

// Type sets as admitted values: "number" includes "integer".
bool type_admits(const std::set<std::string>& ts, const std::string& t) {
  return ts.count(t) || (t == "integer" && ts.count("number"));
}

std::set<std::string> intersect_types(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const std::string& t : a) {
    if (type_admits(b, t)) out.insert(t);
    else if (t == "number" && b.count("integer")) out.insert("integer");
  }
  return out;
}

Json values_of(const Json& s) {
  if (s.contains("const")) return Json::array({s["const"]});
  return s["enum"];
}

Json all_of2(const Json& x, const Json& y) {
  if (trivially_true(x)) return y;
  if (trivially_true(y) || x == y) return x;
  if (x.is_boolean() || y.is_boolean()) return Json(false);
  return Json{{"allOf", Json::array({x, y})}};
}

// Whether a property name matches a patternProperties key (ECMAScript search). A pattern
// std::regex cannot read counts as matching: the member then meets that schema too.
bool name_matches(const std::string& pattern, const std::string& name) {
  try {
    return std::regex_search(name, std::regex(pattern, std::regex::ECMAScript));
  } catch (const std::exception&) {
    return true;
  }
}

double num(const Json& v) { return v.get<double>(); }

}  // namespace

bool trivially_true(const Json& v) { return (v.is_boolean() && v.get<bool>()) || (v.is_object() && v.empty()); }

bool is_type_name(const std::string& t) {
  return t == "object" || t == "array" || t == "string" || t == "integer" || t == "number" || t == "boolean" ||
         t == "null";
}

std::vector<std::string> types_of(const Json& s) {
  if (!s.is_object()) return {};
  if (s.contains("type")) {
    const auto ts = type_set(s["type"]);
    return {ts.begin(), ts.end()};
  }
  for (const char* k : {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                        "maxProperties", "dependentRequired", "propertyNames"})
    if (s.contains(k)) return {"object"};
  for (const char* k :
       {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains"})
    if (s.contains(k)) return {"array"};
  for (const char* k : {"minLength", "maxLength", "pattern", "format"})
    if (s.contains(k)) return {"string"};
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
    if (s.contains(k)) return {"number"};
  return {};
}

void SchemaCompiler::unsupported(const std::string& what, const std::string& path) {
  if (!opts_.lenient) fail("json schema: unsupported %s at %s", what.c_str(), path.c_str());
  const std::string note = what + " at " + path;
  if (std::find(dropped_.begin(), dropped_.end(), note) == dropped_.end()) dropped_.push_back(note);
}

// The schema a "$ref" points to (a JSON pointer into the root document).
const Json& SchemaCompiler::resolve_ref(const Json& r, const std::string& path) {
  if (!r.is_string() || r.get<std::string>().rfind("#", 0) != 0)
    fail("json schema: only local '$ref' (\"#...\") is supported, at %s", path.c_str());
  const std::string ptr = r.get<std::string>().substr(1);
  try {
    return root_.at(Json::json_pointer(ptr));
  } catch (const std::exception&) {
    fail("json schema: '$ref' \"%s\" at %s points nowhere", r.get<std::string>().c_str(), path.c_str());
  }
}

namespace {

// Rewrites of keywords outside kKept into `out` (see normalize). Returns nothing: a keyword
// that is neither rewritten nor reported is an annotation.
struct KeywordRewriter {
  SchemaCompiler& c;
  const Json& s;
  Json& out;
  const std::string& path;

  void operator()(const std::string& k, const Json& v) {
    const std::string at = path + "/" + pointer_part(k);
    if (k == "items") {
      if (!v.is_array()) out["items"] = v;
      else {  // draft 4-2019 tuple form
        out["prefixItems"] = v;
        if (s.contains("additionalItems")) out["items"] = s["additionalItems"];
      }
    } else if (k == "dependencies") {
      if (!v.is_object()) fail("json schema: 'dependencies' at %s must be an object", path.c_str());
      for (const auto& [name, dep] : v.items()) {
        if (dep.is_array()) out["dependentRequired"][name] = dep;
        else if (!trivially_true(dep)) c.unsupported("'dependencies' with a schema", at + "/" + pointer_part(name));
      }
    } else if (k == "dependentSchemas") {
      for (const auto& [name, dep] : v.items())
        if (!trivially_true(dep)) c.unsupported("'dependentSchemas'", at + "/" + pointer_part(name));
    } else if (k == "unevaluatedItems") {
      if (!trivially_true(v) && !has_applicator(s) && !s.contains("items")) out["items"] = v;
      else if (!trivially_true(v)) c.unsupported("'" + k + "'", at);
    } else if (k == "unevaluatedProperties") {
      if (trivially_true(v)) return;
      if (has_applicator(s)) c.unsupported("'unevaluatedProperties' beside applicators", at);
      else if (!s.contains("additionalProperties")) out["additionalProperties"] = v;
    } else if (k == "$recursiveRef" || k == "$dynamicRef") {
      if (v == "#") out["$ref"] = "#";
      else c.unsupported("'" + k + "'", at);
    }
  }
};

}  // namespace

Json SchemaCompiler::normalize(const Json& s, const std::string& path, int depth) {
  if (s.is_boolean()) return s;
  if (!s.is_object()) fail("json schema: %s must be an object or a boolean", path.c_str());
  if (depth > 64) fail("json schema: '$ref'/'allOf' chain deeper than 64 at %s", path.c_str());
  Json out = Json::object();
  KeywordRewriter rewrite{*this, s, out, path};
  for (const auto& [k, v] : s.items()) {
    if (kKept.count(k)) out[k] = v;
    else rewrite(k, v);
  }
  if (out.contains("uniqueItems") && out["uniqueItems"] == false) out.erase("uniqueItems");
  if (!out.contains("if")) {  // then/else without if constrain nothing
    out.erase("then");
    out.erase("else");
  }
  // Draft 4: exclusiveMinimum/Maximum are booleans qualifying minimum/maximum.
  for (const auto& [ex, bound] : {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
    if (!out.contains(ex) || !out[ex].is_boolean()) continue;
    if (out[ex].get<bool>() && out.contains(bound)) {
      out[ex] = out[bound];
      out.erase(bound);
    } else {
      out.erase(ex);
    }
  }
  // $ref beside other keywords: both apply (2019+; in draft 7 the siblings are ignored,
  // so applying them too only narrows what is generated).
  if (out.contains("$ref") && out.size() > 1) {
    Json all = Json::array({Json{{"$ref", out["$ref"]}}});
    if (out.contains("allOf") && out["allOf"].is_array())
      for (const Json& x : out["allOf"]) all.push_back(x);
    out.erase("$ref");
    out["allOf"] = all;
  }
  if (out.contains("allOf")) out = fold_all_of(s, std::move(out), path, depth);
  if (out.is_object() && out.contains("oneOf")) one_of_as_any_of(out, path, depth);
  if (out.is_object() && out.contains("if")) if_then_else(out, path, depth);
  if (out.is_object() && out.contains("propertyNames")) property_names(out, path, depth);
  return out;
}

Json SchemaCompiler::fold_all_of(const Json& s, Json out, const std::string& path, int depth) {
  const Json branches = out["allOf"];
  out.erase("allOf");
  if (!branches.is_array() || branches.empty())
    fail("json schema: 'allOf' at %s must be a non-empty array", path.c_str());
  // Property order follows the document (llguidance's rule): branches first when allOf
  // comes before "properties".
  const auto pos = [&](const char* k) {
    size_t i = 0;
    for (const auto& [key, v] : s.items()) {
      if (key == k) return i;
      ++i;
    }
    return i;
  };
  const bool branches_first = pos("allOf") < pos("properties");
  Json acc = branches_first ? Json(true) : out;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string at = path + "/allOf/" + std::to_string(i);
    acc = intersect(acc, normalize(branches[i], at, depth + 1), at, depth + 1);
    if (acc == false) return acc;
  }
  return branches_first ? intersect(acc, out, path, depth + 1) : acc;
}

// oneOf is anyOf when no value can match two branches; provable cases: disjoint types,
// disjoint enum/const values, a required property whose schemas are disjoint (a
// discriminator), a required property the other branch forbids.
void SchemaCompiler::one_of_as_any_of(Json& out, const std::string& path, int depth) {
  const Json& br = out["oneOf"];
  if (!br.is_array() || br.empty()) fail("json schema: 'oneOf' at %s must be a non-empty array", path.c_str());
  if (br.size() > 64) {
    unsupported("'oneOf' with more than 64 branches (limit)", path + "/oneOf");
  } else {
    std::vector<Json> norm;
    for (size_t i = 0; i < br.size(); ++i)
      norm.push_back(normalize(br[i], path + "/oneOf/" + std::to_string(i), depth + 1));
    if (drop_shared_types(norm)) out["oneOf"] = Json(norm);
    for (size_t i = 0; i < norm.size(); ++i)
      for (size_t j = i + 1; j < norm.size(); ++j)
        if (!disjoint(norm[i], norm[j])) {
          unsupported(strfmt("'oneOf' whose branches %zu and %zu may overlap", i, j), path + "/oneOf");
          return rename_one_of(out);  // lenient: exclusivity dropped
        }
  }
  rename_one_of(out);
}

// A type two oneOf branches both admit wholly (no keyword of theirs constrains its values)
// matches both: under oneOf no value of it is valid, so it leaves both branches
// ({"oneOf":[{"type":["string","null"]},{"type":["integer","null"]}]}: null goes). Integer and
// number are left alone (an integer is also a number). Returns whether a branch changed.
bool SchemaCompiler::drop_shared_types(std::vector<Json>& br) {
  static const std::map<std::string, std::vector<const char*>> kTypeKeywords = {
      {"null", {}},
      {"boolean", {}},
      {"string", {"minLength", "maxLength", "pattern", "format"}},
      {"array",
       {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains"}},
      {"object",
       {"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties",
        "dependentRequired", "propertyNames"}}};
  auto wholly = [&](const Json& s, const std::string& t) {
    if (!s.is_object() || !s.contains("type") || !type_set(s["type"]).count(t) || !kTypeKeywords.count(t)) return false;
    for (const char* k : {"enum", "const", "anyOf", "oneOf", "not", "if", "$ref", "allOf"})
      if (s.contains(k)) return false;
    for (const char* k : kTypeKeywords.at(t))
      if (s.contains(k)) return false;
    return true;
  };
  bool changed = false;
  for (const std::string t : {"null", "boolean", "string", "array", "object"}) {
    size_t whole = 0;
    bool typed = true;  // every branch says its types (else one may admit t implicitly)
    for (const Json& b : br) {
      whole += wholly(b, t);
      typed = typed && (b == false || (b.is_object() && b.contains("type")));
    }
    if (whole < 2 || !typed) continue;
    // Two branches take every value of type t: none of them is valid; t leaves every branch.
    for (Json& b : br) {
      if (b == false) continue;
      auto ts = type_set(b["type"]);
      if (!ts.erase(t)) continue;
      if (ts.empty()) b = Json(false);
      else b["type"] = Json(std::vector<std::string>(ts.begin(), ts.end()));
      changed = true;
    }
  }
  return changed;
}

void SchemaCompiler::rename_one_of(Json& out) {
  Json br = out["oneOf"];
  out.erase("oneOf");
  if (!out.contains("anyOf")) {
    out["anyOf"] = br;
    return;
  }
  Json both = Json::array();
  for (const Json& a : out["anyOf"]) both.push_back(all_of2(a, Json{{"anyOf", br}}));
  out["anyOf"] = both;
}

bool SchemaCompiler::disjoint(const Json& a0, const Json& b0, int depth) {
  if (depth > 16) return false;
  auto deref = [&](const Json& x) {
    Json y = x;
    for (int i = 0; i < 16 && y.is_object() && y.contains("$ref") && y.size() == 1; ++i)
      y = normalize(resolve_ref(y["$ref"], "#"), "#", 1);
    return y;
  };
  const Json a = deref(a0), b = deref(b0);
  if (a == false || b == false) return true;
  if (!a.is_object() || !b.is_object()) return false;
  for (const auto& [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    if (x->contains("anyOf") && (*x)["anyOf"].is_array()) {
      bool all = true;
      for (const Json& br : (*x)["anyOf"]) all = all && disjoint(br, *y, depth + 1);
      if (all) return true;
    }
  }
  const auto ta = types_of(a), tb = types_of(b);
  const std::set<std::string> sa(ta.begin(), ta.end()), sb(tb.begin(), tb.end());
  if (!sa.empty() && !sb.empty() && intersect_types(sa, sb).empty()) return true;
  const bool va = a.contains("const") || a.contains("enum"), vb = b.contains("const") || b.contains("enum");
  if (va && vb) {
    for (const Json& x : values_of(a))
      for (const Json& y : values_of(b))
        if (x == y) return false;
    return true;
  }
  for (const auto& [x, tset] : {std::pair{&a, &sb}, std::pair{&b, &sa}}) {
    if (!(x->contains("const") || x->contains("enum")) || tset->empty()) continue;
    bool none = true;
    for (const Json& v : values_of(*x)) none = none && !type_admits(*tset, value_type(v));
    if (none) return true;
  }
  return disjoint_objects(a, b, depth);
}

bool SchemaCompiler::disjoint_objects(const Json& a, const Json& b, int depth) {
  auto required = [](const Json& s, const std::string& n) {
    if (!s.contains("required") || !s["required"].is_array()) return false;
    return std::find(s["required"].begin(), s["required"].end(), Json(n)) != s["required"].end();
  };
  for (const auto& [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    if (!x->contains("properties") || !(*x)["properties"].is_object()) continue;
    for (const auto& [n, ps] : (*x)["properties"].items()) {
      if (!required(*x, n)) continue;
      const Json other = schema_for_name(*y, n);
      if (other == false) return true;
      if (required(*y, n) && disjoint(ps, other, depth + 1)) return true;
    }
  }
  return false;
}

// The schema a member named `name` must meet in object schema s: its property schema,
// else the patternProperties it matches, else additionalProperties (true when absent).
// A property that also matches patterns meets them too.
Json SchemaCompiler::schema_for_name(const Json& s, const std::string& name) {
  if (!s.is_object()) return s;
  Json out = true;
  bool named = false;
  if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name)) {
    out = s["properties"][name];
    named = true;
  }
  if (s.contains("patternProperties") && s["patternProperties"].is_object()) {
    for (const auto& [p, ps] : s["patternProperties"].items())
      if (name_matches(p, name)) {
        out = all_of2(out, ps);
        named = true;
      }
  }
  if (!named && s.contains("additionalProperties")) out = s["additionalProperties"];
  return out;
}

// allOf of two schemas as one schema. Unknown combinations of one keyword are reported
// (unsupported); contradictions give `false`.
Json SchemaCompiler::intersect(const Json& a0, const Json& b0, const std::string& path, int depth) {
  if (depth > 64) fail("json schema: '$ref'/'allOf' chain deeper than 64 at %s", path.c_str());
  auto deref = [&](const Json& x) {
    if (x.is_object() && x.contains("$ref") && x.size() == 1)
      return normalize(resolve_ref(x["$ref"], path), path, depth + 1);
    return x;
  };
  const Json a = deref(a0), b = deref(b0);
  if (trivially_true(a)) return b;
  if (trivially_true(b)) return a;
  if (a == false || b == false) return Json(false);
  Json res = a;
  for (const auto& [k, vb] : b.items()) {
    if (!res.contains(k)) {
      res[k] = vb;
      continue;
    }
    if (!merge_keyword(res, k, vb, path)) return Json(false);
  }
  if (a.contains("properties") || b.contains("properties") || a.contains("patternProperties") ||
      b.contains("patternProperties") || a.contains("additionalProperties") || b.contains("additionalProperties"))
    merge_objects(res, a, b);
  if (a.contains("prefixItems") || b.contains("prefixItems")) merge_arrays(res, a, b);
  return res;
}

void SchemaCompiler::merge_objects(Json& res, const Json& a, const Json& b) {
  Json props = Json::object();
  const Json none = Json::object();
  const Json& pa = a.contains("properties") ? a["properties"] : none;
  const Json& pb = b.contains("properties") ? b["properties"] : none;
  for (const auto& [n, s] : pa.items()) props[n] = all_of2(s, schema_for_name(b, n));
  for (const auto& [n, s] : pb.items())
    if (!props.contains(n)) props[n] = all_of2(schema_for_name(a, n), s);
  if (!props.empty()) res["properties"] = props;
  Json pats = Json::object();
  for (const Json* x : {&a, &b})
    if (x->contains("patternProperties"))
      for (const auto& [p, s] : (*x)["patternProperties"].items()) pats[p] = pats.contains(p) ? all_of2(pats[p], s) : s;
  if (!pats.empty()) res["patternProperties"] = pats;
  const Json add = all_of2(a.value("additionalProperties", Json(true)), b.value("additionalProperties", Json(true)));
  if (trivially_true(add)) res.erase("additionalProperties");
  else res["additionalProperties"] = add;
}

void SchemaCompiler::merge_arrays(Json& res, const Json& a, const Json& b) {
  auto item_at = [](const Json& s, size_t i) {
    if (s.contains("prefixItems") && i < s["prefixItems"].size()) return s["prefixItems"][i];
    return s.value("items", Json(true));
  };
  const size_t n = std::max(a.value("prefixItems", Json::array()).size(), b.value("prefixItems", Json::array()).size());
  Json out = Json::array();
  for (size_t i = 0; i < n; ++i) out.push_back(all_of2(item_at(a, i), item_at(b, i)));
  res["prefixItems"] = out;
}

// One keyword present in both: res[k] (from the left schema) and vb. False: no value.
bool SchemaCompiler::merge_keyword(Json& res, const std::string& k, const Json& vb, const std::string& path) {
  Json& va = res[k];
  if (k == "properties" || k == "patternProperties" || k == "additionalProperties" || k == "prefixItems")
    return true;  // merge_objects, merge_arrays
  if (va == vb) return true;
  if (k == "type") {
    const auto t = intersect_types(type_set(va), type_set(vb));
    if (t.empty()) return false;
    va = Json(std::vector<std::string>(t.begin(), t.end()));
  } else if (k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" || k == "minProperties") {
    if (num(vb) > num(va)) va = vb;
  } else if (k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties") {
    if (num(vb) < num(va)) va = vb;
  } else if (k == "required") {
    for (const Json& n : vb)
      if (std::find(va.begin(), va.end(), n) == va.end()) va.push_back(n);
  } else if (k == "const" || k == "enum") {
    Json keep = Json::array();
    const Json bv = k == "const" ? Json::array({vb}) : vb;
    for (const Json& x : (k == "const" ? Json::array({va}) : va))
      if (std::find(bv.begin(), bv.end(), x) != bv.end()) keep.push_back(x);
    if (keep.empty()) return false;
    res.erase(k);
    res["enum"] = keep;
  } else if (k == "items" || k == "propertyNames") {
    va = all_of2(va, vb);
  } else if (k == "anyOf") {
    Json both = Json::array();
    for (const Json& x : va) both.push_back(all_of2(x, Json{{"anyOf", vb}}));
    va = both;
  } else if (k == "not") {
    va = Json{{"anyOf", Json::array({va, vb})}};
  } else if (k == "uniqueItems" || k == "nullable") {
    va = k == "uniqueItems" ? (va == true || vb == true) : (va == true && vb == true);
  } else if (k == "dependentRequired") {
    for (const auto& [n, list] : vb.items())
      for (const Json& x : list)
        if (!va.contains(n)) va[n] = Json::array({x});
        else if (std::find(va[n].begin(), va[n].end(), x) == va[n].end()) va[n].push_back(x);
  } else if (k == "multipleOf" && va.is_number_integer() && vb.is_number_integer() && va.get<int64_t>() > 0 &&
             vb.get<int64_t>() > 0) {
    va = std::lcm(va.get<int64_t>(), vb.get<int64_t>());
  } else {
    unsupported("'allOf' with two different values of '" + k + "'", path);
  }
  return true;
}

}  // namespace sluice::grammar::detail
