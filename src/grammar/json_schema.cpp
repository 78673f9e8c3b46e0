// JSON Schema front end, structural part: keyword checks, $ref, allOf merging, unions,
// objects and arrays. Scalars are in json_scalars.cpp.
#include "grammar/json_schema.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "base/json_read.h"
#include "grammar/json_schema_impl.h"

namespace sluice::grammar {

namespace detail {

namespace {

// Keywords that constrain nothing (annotations) are accepted; every other keyword outside
// this list is an error naming it.
const std::set<std::string> kKeywords = {"type",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "enum",
                                         "const",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "items",
                                         "prefixItems",
                                         "minItems",
                                         "maxItems",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum",
                                         "format",
                                         "$ref",
                                         "$defs",
                                         "definitions",
                                         "nullable",
                                         "title",
                                         "description",
                                         "default",
                                         "examples",
                                         "$schema",
                                         "$id",
                                         "$comment",
                                         "deprecated",
                                         "readOnly",
                                         "writeOnly"};
const std::set<std::string> kFormats = {"date", "time", "date-time", "uuid", "email", "ipv4"};

void check_keywords(const Json& s, const std::string& path) {
  if (!s.is_object()) fail("json schema: %s must be an object or a boolean", path.c_str());
  for (const auto& [k, v] : s.items())
    if (!kKeywords.count(k)) fail("json schema: unsupported keyword '%s' at %s", k.c_str(), path.c_str());
}

size_t as_count(const Json& s, const char* key, const std::string& path) {
  const Json& v = s.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    fail("json schema: '%s' at %s must be a non-negative integer", key, path.c_str());
  return v.get<size_t>();
}

}  // namespace

SchemaCompiler::SchemaCompiler(GrammarBuilder& b, const Json& root, const JsonSchemaOptions& opts)
    : b_(b), root_(root), opts_(opts), native_(opts.syntax == JsonSchemaOptions::Syntax::kGemmaNative) {
  common_rules();
}

void SchemaCompiler::common_rules() {
  ByteSet space;
  space.add(' ');
  space.add('\n');
  space.add('\t');
  ws_ = b_.add("ws", repeat(bytes(space), 0, 4));
  digit1_ = b_.add("digit19", bytes(ByteSet::range('1', '9')));
  const Expr cont = bytes(ByteSet::range(0x80, 0xBF));
  ByteSet e1x;
  e1x.add_range(0xE1, 0xEC);
  e1x.add_range(0xEE, 0xEF);
  std::vector<Expr> utf8_alts{seq({bytes(ByteSet::range(0xC2, 0xDF)), cont}),
                              seq({lit("\xE0"), bytes(ByteSet::range(0xA0, 0xBF)), cont}),
                              seq({bytes(e1x), cont, cont}),
                              seq({lit("\xED"), bytes(ByteSet::range(0x80, 0x9F)), cont}),
                              seq({lit("\xF0"), bytes(ByteSet::range(0x90, 0xBF)), cont, cont}),
                              seq({bytes(ByteSet::range(0xF1, 0xF3)), cont, cont, cont}),
                              seq({lit("\xF4"), bytes(ByteSet::range(0x80, 0x8F)), cont, cont})};
  const uint32_t utf8 = b_.add("utf8", alt(utf8_alts));
  ByteSet hex = ByteSet::range('0', '9');
  hex.add_range('a', 'f');
  hex.add_range('A', 'F');
  ByteSet hex_no_d = ByteSet::range('0', '9');
  hex_no_d.add_range('a', 'c');
  hex_no_d.add_range('A', 'C');
  hex_no_d.add_range('e', 'f');
  hex_no_d.add_range('E', 'F');
  ByteSet dd;
  dd.add('d');
  dd.add('D');
  ByteSet simple_esc;
  for (char c : std::string_view("\"\\/bfnrt")) simple_esc.add(static_cast<uint8_t>(c));
  // \uXXXX outside the surrogate range: one escape is one character.
  const Expr uesc = seq({lit("u"), alt({seq({bytes(hex_no_d), bytes(hex), bytes(hex), bytes(hex)}),
                                        seq({bytes(dd), bytes(ByteSet::range('0', '7')), bytes(hex), bytes(hex)})})});
  if (native_) {
    // Native strings are raw text up to the closing <|"|> token; '|' is left out so the
    // text `<|"|>` can never appear inside one.
    ByteSet plain = ByteSet::range(0x20, 0x7E);
    plain.add('\n');
    plain.add('\t');
    plain.w[1] &= ~(uint64_t{1} << ('|' - 64));
    std::vector<Expr> alts{bytes(plain)};
    alts.insert(alts.end(), utf8_alts.begin(), utf8_alts.end());
    char_ = alt(std::move(alts));
  } else {
    ByteSet plain = ByteSet::range(0x20, 0x7F);
    plain.w[0] &= ~(uint64_t{1} << '"');
    plain.w[1] &= ~(uint64_t{1} << ('\\' - 64));
    std::vector<Expr> alts{bytes(plain)};
    alts.insert(alts.end(), utf8_alts.begin(), utf8_alts.end());
    alts.push_back(seq({lit("\\"), alt({bytes(simple_esc), uesc})}));
    char_ = alt(std::move(alts));
  }
  // The character is an expression, not a shared rule: each string gets its own loop rule,
  // whose one call site lets the mask analysis follow a token past the closing quote
  // (CompiledGrammar). Shared rules are analysed under a wildcard caller instead.
  str_char_ = b_.add("char", char_);
  rx_ = RegexContext{&b_, !native_, char_, utf8};
  string_ = b_.add("string", quoted(star(ref(str_char_))));
  const Expr digit = bytes(ByteSet::range('0', '9'));
  ByteSet e;
  e.add('e');
  e.add('E');
  ByteSet sign;
  sign.add('+');
  sign.add('-');
  number_ = b_.add("number",
                   seq({opt(lit("-")), alt({lit("0"), seq({ref(digit1_), star(bytes(ByteSet::range('0', '9')))})}),
                        opt(seq({lit("."), repeat(digit, 1, kMaxFractionDigits)})),
                        opt(seq({bytes(e), opt(bytes(sign)), repeat(digit, 1, kMaxExponentDigits)}))}));
  value_ = b_.declare("value");
  // Keys of members the schema does not name: any string, or in native syntax an identifier.
  ByteSet id0 = ByteSet::range('a', 'z');
  id0.add_range('A', 'Z');
  id0.add('_');
  ByteSet id1 = id0;
  id1.add_range('0', '9');
  key_ = native_ ? b_.add("ident", seq({bytes(id0), star(bytes(id1))})) : string_;
  const Expr member = seq({ref(key_), punct(':'), ref(value_)});
  const Expr object = seq({lit("{"), ws(), opt(seq({member, star(seq({punct(','), member}))})), ws(), lit("}")});
  const Expr array = seq(
      {lit("["), ws(), opt(seq({ref(value_), star(seq({punct(','), ref(value_)}))})), ws(), lit("]")});
  b_.define(value_, alt({object, array, ref(string_), ref(number_), lit("true"), lit("false"), lit("null")}));
}

Expr SchemaCompiler::any_value() { return ref(value_); }

// One rule per use of a sub-schema: a rule with one call site lets the mask analysis
// follow tokens out of it (CompiledGrammar). Only $ref targets are shared (memoized by
// their text), which is also what makes recursive schemas finite.
uint32_t SchemaCompiler::rule_for(const Json& s, const std::string& path, bool shared) {
  const std::string key = shared ? s.dump() : std::string();
  if (shared) {
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
  }
  const uint32_t r = b_.declare("s" + std::to_string(b_.n_rules()));
  if (shared) memo_.emplace(key, r);
  if (++depth_ > 200) fail("json schema: nesting deeper than 200 at %s", path.c_str());
  b_.define(r, value_expr(s, path));
  --depth_;
  return r;
}

// The schema a "$ref" points to (a JSON pointer into the root document).
Json SchemaCompiler::resolve(const Json& s, const std::string& path, int depth) {
  if (!s.is_object() || !s.contains("$ref")) return s;
  if (depth > 32) fail("json schema: $ref chain longer than 32 at %s", path.c_str());
  const Json& r = s["$ref"];
  if (!r.is_string() || r.get<std::string>().rfind("#", 0) != 0)
    fail("json schema: only local '$ref' (\"#...\") is supported, at %s", path.c_str());
  const std::string ptr = r.get<std::string>().substr(1);
  const Json* target = &root_;
  try {
    target = &root_.at(Json::json_pointer(ptr));
  } catch (const std::exception&) {
    fail("json schema: '$ref' \"%s\" at %s points nowhere", r.get<std::string>().c_str(), path.c_str());
  }
  for (const auto& [k, v] : s.items())
    if (k != "$ref" && k != "$defs" && k != "definitions" && k != "title" && k != "description" && k != "$schema" &&
        k != "$id" && k != "$comment")
      fail("json schema: keyword '%s' beside '$ref' at %s is not supported", k.c_str(), path.c_str());
  return resolve(*target, path, depth + 1);
}

Json SchemaCompiler::merge_all_of(const Json& s, const std::string& path) {
  Json merged = s;
  merged.erase("allOf");
  if (!s["allOf"].is_array() || s["allOf"].empty())
    fail("json schema: 'allOf' at %s must be a non-empty array", path.c_str());
  for (size_t i = 0; i < s["allOf"].size(); ++i) {
    const std::string sub_path = path + "/allOf/" + std::to_string(i);
    Json sub = resolve(s["allOf"][i], sub_path);
    if (sub.is_boolean()) {
      if (!sub.get<bool>()) fail("json schema: 'allOf' at %s contains false", path.c_str());
      continue;
    }
    check_keywords(sub, sub_path);
    if (sub.contains("allOf")) sub = merge_all_of(sub, sub_path);
    for (const auto& [k, v] : sub.items()) {
      if (!merged.contains(k)) {
        merged[k] = v;
      } else if (k == "properties") {
        for (const auto& [name, ps] : v.items())
          merged[k][name] = merged[k].contains(name) ? Json{{"allOf", Json::array({merged[k][name], ps})}} : ps;
      } else if (k == "required") {
        for (const auto& name : v)
          if (std::find(merged[k].begin(), merged[k].end(), name) == merged[k].end()) merged[k].push_back(name);
      } else if (merged[k] != v) {
        fail("json schema: 'allOf' at %s cannot merge two different values of '%s'", path.c_str(), k.c_str());
      }
    }
  }
  return merged;
}

Expr SchemaCompiler::value_expr(const Json& s0, const std::string& path) {
  if (s0.is_boolean()) {
    if (!s0.get<bool>()) fail("json schema: schema 'false' at %s admits no value", path.c_str());
    return any_value();
  }
  check_keywords(s0, path);
  if (s0.contains("$ref")) return ref(rule_for(resolve(s0, path), path + "/$ref", true));
  const Json s = s0.contains("allOf") ? merge_all_of(s0, path) : s0;
  if (s.contains("allOf")) return value_expr(s, path);
  std::vector<Expr> alts;
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) fail("json schema: 'nullable' at %s must be a boolean", path.c_str());
    if (s["nullable"].get<bool>()) alts.push_back(lit("null"));
  }
  if (s.contains("const")) {
    alts.push_back(json_literal(s["const"]));
    return alt(std::move(alts));
  }
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty())
      fail("json schema: 'enum' at %s must be a non-empty array", path.c_str());
    for (const Json& v : s["enum"]) alts.push_back(json_literal(v));
    return alt(std::move(alts));
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    if (!s.contains(k)) continue;
    if (!s[k].is_array() || s[k].empty()) fail("json schema: '%s' at %s must be a non-empty array", k, path.c_str());
    Json rest = s;
    rest.erase(k);
    rest.erase("nullable");
    for (size_t i = 0; i < s[k].size(); ++i) {
      Json branch = s[k][i];
      // Sibling keywords apply to every branch: {"type":"object","anyOf":[...]} etc.
      if (rest.size() > 0 && !branch.is_boolean()) branch = Json{{"allOf", Json::array({rest, branch})}};
      alts.push_back(ref(rule_for(branch, path + "/" + k + "/" + std::to_string(i))));
    }
    return alt(std::move(alts));
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    else if (t.is_array())
      for (const Json& x : t) types.push_back(x.is_string() ? x.get<std::string>() : std::string("?"));
    if (types.empty()) fail("json schema: 'type' at %s must be a string or a non-empty array of strings", path.c_str());
  } else {
    // Keywords imply their type when "type" is absent (a value the grammar produces then
    // also satisfies the keyword; see docs/structured-output.md).
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
      types.push_back("object");
    else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
      types.push_back("array");
    else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format"))
      types.push_back("string");
    else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
             s.contains("exclusiveMaximum"))
      types.push_back("number");
    else if (alts.empty()) return any_value();
    else alts.push_back(any_value());
  }
  for (const std::string& t : types) alts.push_back(typed_expr(s, t, path));
  return alt(std::move(alts));
}

Expr SchemaCompiler::typed_expr(const Json& s, const std::string& type, const std::string& path) {
  if (type == "object") return object_expr(s, path);
  if (type == "array") return array_expr(s, path);
  if (type == "string") return string_expr(s, path);
  if (type == "integer") return number_expr(s, path, true);
  if (type == "number") return number_expr(s, path, false);
  if (type == "boolean") return alt({lit("true"), lit("false")});
  if (type == "null") return lit("null");
  fail("json schema: unknown type '%s' at %s", type.c_str(), path.c_str());
}

Expr SchemaCompiler::key_expr(const std::string& name) { return native_ ? lit(name) : json_literal(Json(name)); }

Expr SchemaCompiler::object_expr(const Json& s, const std::string& path) {
  std::vector<std::string> names;
  std::vector<Expr> members;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) fail("json schema: 'properties' at %s must be an object", path.c_str());
    // Each property takes a rule of its own: a count over the limit fails before any is built.
    if (s["properties"].size() > opts_.limits.max_rules)
      fail("grammar: more than %zu rules (limit max_rules)", opts_.limits.max_rules);
    for (const auto& [name, ps] : s["properties"].items()) {
      names.push_back(name);
      members.push_back(seq({key_expr(name), punct(':'), ref(rule_for(ps, path + "/properties/" + name))}));
    }
  }
  std::vector<bool> required(names.size(), false);
  if (s.contains("required")) {
    if (!s["required"].is_array()) fail("json schema: 'required' at %s must be an array", path.c_str());
    std::unordered_map<std::string_view, size_t> position;  // a linear search per name would be quadratic
    for (size_t i = 0; i < names.size(); ++i) position.emplace(names[i], i);
    for (const Json& r : s["required"]) {
      const auto it = r.is_string() ? position.find(r.get_ref<const std::string&>()) : position.end();
      if (it == position.end())
        fail("json schema: required property %s at %s is not in 'properties'", r.dump().c_str(), path.c_str());
      required[it->second] = true;
    }
  }
  std::optional<Expr> extra;  // one additional member
  const Json add = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  if (!(add.is_boolean() && !add.get<bool>())) {
    extra = seq(
        {ref(key_), punct(':'), add.is_boolean() ? any_value() : ref(rule_for(add, path + "/additionalProperties"))});
  }
  const size_t n = names.size();
  // tail[k][first]: the members from index k on, `first` when nothing was written yet.
  std::vector<std::array<uint32_t, 2>> tail(n + 1);
  for (size_t k = n + 1; k-- > 0;) {
    for (int first = 0; first < 2; ++first) {
      const Expr sep = first ? empty() : punct(',');
      std::vector<Expr> alts;
      for (size_t j = k; j < n; ++j) {
        alts.push_back(seq({sep, members[j], ref(tail[j + 1][0])}));
        if (required[j]) break;
      }
      const bool all_optional = std::none_of(required.begin() + k, required.end(), [](bool r) { return r; });
      if (all_optional) {
        if (extra) alts.push_back(opt(seq({sep, *extra, star(seq({punct(','), *extra}))})));
        else alts.push_back(empty());
      }
      tail[k][first] = b_.add("obj" + std::to_string(k), alt(std::move(alts)));
    }
  }
  return seq({lit("{"), ws(), ref(tail[0][1]), ws(), lit("}")});
}

Expr SchemaCompiler::array_expr(const Json& s, const std::string& path) {
  std::vector<Expr> prefix;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) fail("json schema: 'prefixItems' at %s must be an array", path.c_str());
    for (size_t i = 0; i < s["prefixItems"].size(); ++i)
      prefix.push_back(ref(rule_for(s["prefixItems"][i], path + "/prefixItems/" + std::to_string(i))));
  }
  std::optional<Expr> item = any_value();
  if (s.contains("items")) {
    const Json& it = s["items"];
    if (it.is_boolean() && !it.get<bool>()) item.reset();
    else if (it.is_array())
      fail("json schema: 'items' as an array (draft 2019) at %s: use 'prefixItems'", path.c_str());
    else item = ref(rule_for(it, path + "/items"));
  }
  const size_t lo = s.contains("minItems") ? as_count(s, "minItems", path) : 0;
  const size_t hi = s.contains("maxItems") ? as_count(s, "maxItems", path) : SIZE_MAX;
  if (lo > hi) fail("json schema: minItems > maxItems at %s", path.c_str());
  if (!item && lo > prefix.size())
    fail("json schema: minItems at %s needs more items than prefixItems allows", path.c_str());
  const size_t k = std::min(prefix.size(), hi);
  // Items after the prefix: i items are already written.
  auto rest = [&](size_t i) -> Expr {
    if (!item || i >= hi) return empty();
    const size_t need = lo > i ? lo - i : 0;
    const uint32_t max = hi == SIZE_MAX ? kInf : static_cast<uint32_t>(hi - i);
    if (max != kInf && max > opts_.limits.max_repeat)
      fail("json schema: maxItems at %s over the limit %zu (limit max_repeat)", path.c_str(), opts_.limits.max_repeat);
    if (need > opts_.limits.max_repeat)
      fail("json schema: minItems at %s over the limit %zu (limit max_repeat)", path.c_str(), opts_.limits.max_repeat);
    const Expr more = seq({punct(','), *item});
    if (i == 0 && need == 0 && max == kInf) {
      // "]" | item ("," item)* "]" as a loop that calls the item from one place:
      // each ::= item next; next ::= "," each | "]".
      const uint32_t each = b_.declare("items"), next = b_.declare("items-next");
      b_.define(each, seq({*item, ref(next)}));
      b_.define(next, alt({seq({punct(','), ref(each)}), seq({ws(), lit("]")})}));
      return alt({seq({ws(), lit("]")}), ref(each)});
    }
    if (i > 0) return repeat(more, static_cast<uint32_t>(need), max);
    Expr some = seq({*item, repeat(more, need ? static_cast<uint32_t>(need - 1) : 0, max == kInf ? kInf : max - 1)});
    return need ? some : opt(std::move(some));
  };
  if (k == 0 && item && lo == 0 && hi == SIZE_MAX) return seq({lit("["), ws(), rest(0)});  // the loop closes itself
  Expr body = rest(k);
  for (size_t i = k; i-- > 0;) {
    Expr next = seq({i ? punct(',') : empty(), prefix[i], std::move(body)});
    body = i + 1 > lo ? opt(std::move(next)) : std::move(next);
  }
  return seq({lit("["), ws(), std::move(body), ws(), lit("]")});
}

}  // namespace detail

uint32_t add_json_schema(GrammarBuilder& b, const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts) {
  detail::SchemaCompiler c(b, schema, opts);
  return c.rule_for(schema, "#");
}

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts) {
  GrammarBuilder b(opts.limits);
  const uint32_t root = add_json_schema(b, schema, opts);
  return b.finish(root);
}

Grammar json_schema_grammar_text(std::string_view text, const JsonSchemaOptions& opts) {
  if (text.size() > opts.limits.max_schema_bytes)
    fail("json schema: %zu bytes, over the limit of %zu (limit max_schema_bytes)", text.size(),
         opts.limits.max_schema_bytes);
  nlohmann::ordered_json schema;
  try {
    schema = read_json<nlohmann::ordered_json>(text, JsonLimits{}, "the schema");
  } catch (const JsonReadError& e) {
    fail("json schema: %s", e.what());
  }
  return json_schema_grammar(schema, opts);
}

std::string json_schema_cache_key(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts) {
  std::string text = schema.dump();
  if (text.size() > opts.limits.max_schema_bytes)
    fail("json schema: %zu bytes, over the limit of %zu (limit max_schema_bytes)", text.size(),
         opts.limits.max_schema_bytes);
  return strfmt("json:%d:%d:%d:", static_cast<int>(opts.syntax), opts.any_whitespace ? 1 : 0, opts.native_quote_token) +
         text;
}

}  // namespace sluice::grammar
