// JSON Schema front end, structural part: keyword checks, $ref, allOf merging, unions,
// objects and arrays. Scalars are in json_scalars.cpp.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "base/json_read.h"
#include "grammar/background.h"
#include "grammar/json_schema_impl.h"

namespace sluice::grammar {

namespace detail {

namespace {

// Patterns no name can match both: anchored, with literal prefixes where neither is a
// prefix of the other (^S_ and ^I_).
bool patterns_disjoint(const std::string& p, const std::string& q) {
  auto prefix = [](const std::string& x) {
    std::string out;
    if (x.empty() || x[0] != '^') return std::optional<std::string>();
    for (size_t i = 1; i < x.size(); ++i) {
      if (std::string_view("\\.[]()*+?{}|^$").find(x[i]) != std::string_view::npos) {
        // a quantifier makes the last literal optional
        if (std::string_view("*?{").find(x[i]) != std::string_view::npos && !out.empty()) out.pop_back();
        break;
      }
      out += x[i];
    }
    return std::optional<std::string>(out);
  };
  const auto a = prefix(p), b = prefix(q);
  if (!a || !b) return false;
  const size_t n = std::min(a->size(), b->size());
  return a->compare(0, n, *b, 0, n) != 0;
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

namespace {

ByteSet byte_set(std::string_view chars) {
  ByteSet out;
  for (char c : chars) out.add(static_cast<uint8_t>(c));
  return out;
}

// The well-formed multi-byte UTF-8 sequences (no overlongs, no surrogates, at most U+10FFFF).
std::vector<Expr> utf8_sequences() {
  const Expr cont = bytes(ByteSet::range(0x80, 0xBF));
  ByteSet e1x;
  e1x.add_range(0xE1, 0xEC);
  e1x.add_range(0xEE, 0xEF);
  return {seq({bytes(ByteSet::range(0xC2, 0xDF)), cont}),
          seq({lit("\xE0"), bytes(ByteSet::range(0xA0, 0xBF)), cont}),
          seq({bytes(e1x), cont, cont}),
          seq({lit("\xED"), bytes(ByteSet::range(0x80, 0x9F)), cont}),
          seq({lit("\xF0"), bytes(ByteSet::range(0x90, 0xBF)), cont, cont}),
          seq({bytes(ByteSet::range(0xF1, 0xF3)), cont, cont, cont}),
          seq({lit("\xF4"), bytes(ByteSet::range(0x80, 0x8F)), cont, cont})};
}

// A native string's character: raw text up to the closing <|"|> token; '|' is left out so
// the text `<|"|>` can never appear inside one.
Expr native_string_char(const std::vector<Expr>& utf8) {
  ByteSet plain = ByteSet::range(0x20, 0x7E);
  plain.add('\n');
  plain.add('\t');
  plain.w[1] &= ~(uint64_t{1} << ('|' - 64));
  std::vector<Expr> alts{bytes(plain)};
  alts.insert(alts.end(), utf8.begin(), utf8.end());
  return alt(std::move(alts));
}

// A JSON string's character: printable ASCII but '"' and '\\', UTF-8, or an escape; \uXXXX
// outside the surrogate range, so that one escape is one character.
Expr json_string_char(const std::vector<Expr>& utf8) {
  ByteSet hex = ByteSet::range('0', '9');
  hex.add_range('a', 'f');
  hex.add_range('A', 'F');
  ByteSet hex_no_d = ByteSet::range('0', '9');
  hex_no_d.add_range('a', 'c');
  hex_no_d.add_range('A', 'C');
  hex_no_d.add_range('e', 'f');
  hex_no_d.add_range('E', 'F');
  const Expr uesc = seq(
      {lit("u"), alt({seq({bytes(hex_no_d), bytes(hex), bytes(hex), bytes(hex)}),
                      seq({bytes(byte_set("dD")), bytes(ByteSet::range('0', '7')), bytes(hex), bytes(hex)})})});
  ByteSet plain = ByteSet::range(0x20, 0x7F);
  plain.w[0] &= ~(uint64_t{1} << '"');
  plain.w[1] &= ~(uint64_t{1} << ('\\' - 64));
  std::vector<Expr> alts{bytes(plain)};
  alts.insert(alts.end(), utf8.begin(), utf8.end());
  alts.push_back(seq({lit("\\"), alt({bytes(byte_set("\"\\/bfnrt")), uesc})}));
  return alt(std::move(alts));
}

// -?(0|[1-9][0-9]*)(.[0-9]{1,F})?([eE][+-]?[0-9]{1,X})?, `digit19` the rule for [1-9].
Expr number_syntax(uint32_t digit19) {
  const Expr digit = bytes(ByteSet::range('0', '9'));
  return seq({opt(lit("-")), alt({lit("0"), seq({ref(digit19), star(bytes(ByteSet::range('0', '9')))})}),
              opt(seq({lit("."), repeat(digit, 1, kMaxFractionDigits)})),
              opt(seq({bytes(byte_set("eE")), opt(bytes(byte_set("+-"))), repeat(digit, 1, kMaxExponentDigits)}))});
}

}  // namespace

// The rules every schema's grammar shares, added in this order: ws, digit19, utf8, char,
// string, number, value (and in native syntax ident, the bare key).
void SchemaCompiler::common_rules() {
  ws_ = b_.add("ws", repeat(bytes(byte_set(" \n\t")), 0, 4));
  digit1_ = b_.add("digit19", bytes(ByteSet::range('1', '9')));
  const std::vector<Expr> utf8_alts = utf8_sequences();
  const uint32_t utf8 = b_.add("utf8", alt(utf8_alts));
  char_ = native_ ? native_string_char(utf8_alts) : json_string_char(utf8_alts);
  // The character is an expression, not a shared rule: each string gets its own loop rule,
  // whose one call site lets the mask analysis follow a token past the closing quote
  // (CompiledGrammar). Shared rules are analysed under a wildcard caller instead.
  str_char_ = b_.add("char", char_);
  rx_ = RegexContext{&b_, !native_, char_, utf8};
  string_ = b_.add("string", quoted(star(ref(str_char_))));
  number_ = b_.add("number", number_syntax(digit1_));
  value_rule();
}

// Any JSON value. Keys of members the schema does not name: any string, or in native syntax
// an identifier.
void SchemaCompiler::value_rule() {
  value_ = b_.declare("value");
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
  // Deep down, every rule is shared: a recursion that re-expands a schema inline (a $ref
  // with siblings, an anyOf branch met again through a cycle) then closes on itself.
  shared = shared || depth_ > 32;
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

Expr SchemaCompiler::value_expr(const Json& s0, const std::string& path) {
  const Json s = normalize(s0, path);
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail("json schema: schema at %s admits no value", path.c_str());
    return any_value();
  }
  if (s.contains("$ref") && s.size() == 1) {
    // One rule per target, found by the reference's text (no copy or dump of the target).
    const Json& target = resolve_ref(s["$ref"], path);
    const std::string key = s["$ref"].get<std::string>();
    auto it = ref_memo_.find(key);
    if (it != ref_memo_.end()) return ref(it->second);
    const uint32_t r = b_.declare("s" + std::to_string(b_.n_rules()));
    ref_memo_.emplace(key, r);
    if (++depth_ > 200) fail("json schema: nesting deeper than 200 at %s", path.c_str());
    b_.define(r, value_expr(target, path + "/$ref"));
    --depth_;
    return ref(r);
  }
  Exclusions no;
  if (s.contains("not") && !collect_not(s["not"], path + "/not", no)) unsupported("'not'", path + "/not");
  std::vector<Expr> alts;
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) fail("json schema: 'nullable' at %s must be a boolean", path.c_str());
    if (s["nullable"].get<bool>() && !no.excludes(Json(nullptr))) alts.push_back(lit("null"));
  }
  if (s.contains("const") || s.contains("enum")) {
    if (s.contains("enum") && (!s["enum"].is_array() || s["enum"].empty()))
      fail("json schema: 'enum' at %s must be a non-empty array", path.c_str());
    const Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
    check_width(values.size(), "'enum'", path);
    for (const Json& v : values)
      if (admits(s, v) && !no.excludes(v)) alts.push_back(json_literal(v));
    if (alts.empty()) fail("json schema: no value of 'enum'/'const' at %s meets its sibling keywords", path.c_str());
    return alt(std::move(alts));
  }
  if (s.contains("anyOf")) {
    alts.push_back(union_expr(s, path));
    return alt(std::move(alts));
  }
  std::vector<std::string> types = types_of(s);
  if (types.empty() && no.empty()) {
    alts.push_back(any_value());
    return alt(std::move(alts));
  }
  if (types.empty()) types = {"object", "array", "string", "number", "boolean", "null"};
  for (const std::string& t : types) {
    // "number" and "integer" together: the number grammar covers both.
    if (t == "integer" && std::find(types.begin(), types.end(), "number") != types.end()) continue;
    if (no.types.count(t) || (t == "integer" && no.types.count("number")) ||
        (t == "null" && no.excludes(Json(nullptr))))
      continue;
    if (t == "number" && no.types.count("integer")) unsupported("'not' of integers within numbers", path + "/not");
    if (t == "boolean" && no.excludes(Json(true)) && no.excludes(Json(false))) continue;
    not_ = &no;  // read by typed_expr for this value only (nested values set their own)
    alts.push_back(typed_expr(s, t, path));
  }
  not_ = nullptr;
  if (alts.empty()) fail("json schema: no value at %s escapes its 'not'", path.c_str());
  return alt(std::move(alts));
}

// not: {"type": ..}, {"const": ..}, {"enum": [..]}, and anyOf of those (not(A or B) is
// not A and not B). Excluded values must be null, booleans or strings.
bool SchemaCompiler::collect_not(const Json& n0, const std::string& path, Exclusions& no) {
  const Json n = normalize(n0, path);
  if (!n.is_object() || n.empty()) return false;
  if (n.size() == 1 && n.contains("anyOf") && n["anyOf"].is_array()) {
    for (size_t i = 0; i < n["anyOf"].size(); ++i)
      if (!collect_not(n["anyOf"][i], path + "/anyOf/" + std::to_string(i), no)) return false;
    return true;
  }
  if (n.size() == 1 && n.contains("type")) {
    for (const std::string& t : types_of(n)) no.types.insert(t);
    return true;
  }
  if (n.size() == 1 && (n.contains("const") || (n.contains("enum") && n["enum"].is_array()))) {
    for (const Json& v : n.contains("const") ? Json::array({n["const"]}) : n["enum"]) {
      if (!v.is_null() && !v.is_boolean() && !v.is_string()) return false;
      no.values.push_back(v);
    }
    return true;
  }
  return false;
}

// A const/enum value that the schema's "type" (if any) admits. Other sibling keywords are
// not checked against it (docs: keep enum values consistent with them).
bool SchemaCompiler::admits(const Json& s, const Json& v) {
  if (!s.contains("type")) return true;
  const std::vector<std::string> types = types_of(s);
  const bool integral = v.is_number_integer() ||
                        (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  for (const std::string& t : types) {
    if ((t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) || (t == "string" && v.is_string()) ||
        (t == "array" && v.is_array()) || (t == "object" && v.is_object()) || (t == "number" && v.is_number()) ||
        (t == "integer" && v.is_number() && integral))
      return true;
  }
  return false;
}

void SchemaCompiler::check_width(size_t n, const char* what, const std::string& path) {
  if (n > 1 && width_ * n > opts_.limits.max_union_branches)
    fail(
        "json schema: %s at %s makes %zu alternatives for one value (with the unions around it), over the limit %zu "
        "(limit max_union_branches)",
        what, path.c_str(), width_ * n, opts_.limits.max_union_branches);
}

// anyOf: sibling keywords apply to every branch (intersected now, so contradictory
// branches drop out: {"type":"string","anyOf":[{"minLength":1},{"type":"null"}]}).
Expr SchemaCompiler::union_expr(const Json& s, const std::string& path) {
  const Json& br = s["anyOf"];
  if (!br.is_array() || br.empty()) fail("json schema: 'anyOf' at %s must be a non-empty array", path.c_str());
  Json rest = s;
  rest.erase("anyOf");
  rest.erase("nullable");
  check_width(br.size(), "'anyOf'", path);
  Widen widen{width_, width_ * br.size()};
  std::vector<Expr> alts;
  for (size_t i = 0; i < br.size(); ++i) {
    const std::string at = path + "/anyOf/" + std::to_string(i);
    Json branch = br[i];
    if (!rest.empty()) branch = intersect(rest, normalize(branch, at), at);
    if (branch == false) continue;
    alts.push_back(ref(rule_for(branch, at)));
  }
  if (alts.empty()) fail("json schema: no branch of 'anyOf' at %s admits a value", path.c_str());
  return alt(std::move(alts));
}

Expr SchemaCompiler::typed_expr(const Json& s, const std::string& type, const std::string& path) {
  const Exclusions* no = not_;  // this value's `not`; members and items below are other values
  not_ = nullptr;
  // Members and items start after a key or bracket: unions there are not alternatives of
  // this value's first byte (only unions nested directly in unions multiply).
  if (type == "object") {
    Widen w{width_, 1};
    return object_expr(s, path);
  }
  if (type == "array") {
    Widen w{width_, 1};
    return array_expr(s, path);
  }
  if (type == "string") {
    std::vector<std::string> out;
    if (no)
      for (const Json& v : no->values)
        if (v.is_string()) out.push_back(v.get<std::string>());
    if (!out.empty()) return strings_except(s, out, path);
    return string_expr(s, path);
  }
  if (type == "integer") return number_expr(s, path, true);
  if (type == "number") return number_expr(s, path, false);
  if (type == "boolean") {
    std::vector<Expr> b;
    for (bool v : {true, false})
      if (!no || !no->excludes(Json(v))) b.push_back(lit(v ? "true" : "false"));
    return alt(std::move(b));
  }
  if (type == "null") return lit("null");
  fail("json schema: unknown type '%s' at %s", type.c_str(), path.c_str());
}

Expr SchemaCompiler::key_expr(const std::string& name) { return native_ ? lit(name) : json_literal(Json(name)); }

// Members in the order of "properties", then required names not in "properties" (as
// llguidance orders them), then additional members (patternProperties / additionalProperties).
Expr SchemaCompiler::object_expr(const Json& s, const std::string& path) {
  if (s.contains("properties") && !s["properties"].is_object())
    fail("json schema: 'properties' at %s must be an object", path.c_str());
  if (s.contains("required") && !s["required"].is_array())
    fail("json schema: 'required' at %s must be an array", path.c_str());
  std::vector<std::string> names;
  if (s.contains("properties")) {
    // Each property takes a rule of its own: a count over the limit fails before any is built.
    if (s["properties"].size() > opts_.limits.max_rules)
      fail("grammar: more than %zu rules (limit max_rules)", opts_.limits.max_rules);
    for (const auto& [name, ps] : s["properties"].items()) names.push_back(name);
  }
  std::vector<bool> required(names.size(), false);
  // A name's place in `names`: a linear search per name would be quadratic in the member count.
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < names.size(); ++i) position.emplace(names[i], i);
  const auto add_name = [&](const std::string& n, bool req) {
    const auto [it, fresh] = position.emplace(n, names.size());
    if (fresh) {
      names.push_back(n);
      required.push_back(req);
    } else if (req) {
      required[it->second] = true;
    }
  };
  // dependentRequired names take part in the member order like properties (optional ones).
  const Json dependent = s.value("dependentRequired", Json::object());
  if (!dependent.is_object()) fail("json schema: 'dependentRequired' at %s must be an object", path.c_str());
  for (const auto& [trigger, deps] : dependent.items()) {
    if (!deps.is_array()) fail("json schema: 'dependentRequired' at %s must map names to arrays", path.c_str());
    Json all = deps;
    all.push_back(trigger);
    for (const Json& d : all)
      if (d.is_string()) add_name(d.get<std::string>(), false);
  }
  for (const Json& r : s.value("required", Json::array())) {
    if (!r.is_string()) fail("json schema: 'required' at %s must list strings", path.c_str());
    add_name(r.get<std::string>(), true);
  }
  std::vector<std::optional<Expr>> members;  // nullopt: the name may not appear (schema false)
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string at = path + "/properties/" + names[i];
    const Json ps = normalize(schema_for_name(s, names[i]), at);
    if (ps == false) {
      if (required[i])
        fail("json schema: required property '%s' at %s admits no value", names[i].c_str(), path.c_str());
      members.emplace_back();
      continue;
    }
    // A rule per member (and one for an additional member): the tail rules below each
    // mention every later member, so inlining them would grow the grammar with the square
    // of the member count.
    members.emplace_back(ref(b_.add("member", seq({key_expr(names[i]), punct(':'), ref(rule_for(ps, at))}))));
  }
  std::vector<std::vector<size_t>> deps(names.size());
  for (const auto& [trigger, list] : dependent.items()) {
    const size_t t = position.at(trigger);
    for (const Json& d : list)
      if (d.is_string()) deps[t].push_back(position.at(d.get<std::string>()));
  }
  std::optional<Expr> extra = extra_members(s, path);
  if (extra) extra = ref(b_.add("extra", *extra));
  return members_expr(s, path, Members{members, required, deps}, extra);
}

// The key of an additional member: any name but those "properties" declares (a duplicate
// key would be a second value for a declared member, and parsing it both ways would keep
// two parses alive through every nested level). A trie over the names: a key that leaves the
// trie, or stops at a node that ends no name, is another name. Names with characters outside
// printable ASCII fall back to any key; inside the trie `\u` escapes are left out (one
// could spell a declared name).
Expr SchemaCompiler::other_key(const Json& s) {
  std::vector<std::string> names;
  if (native_ || !s.contains("properties") || !s["properties"].is_object() || s["properties"].empty()) return ref(key_);
  for (const auto& [n, ps] : s["properties"].items()) {
    for (unsigned char c : n)
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return ref(key_);
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  if (!other_key_rest_) other_key_rest_ = b_.add("key-rest", seq({star(char_), lit("\"")}));
  return seq({lit("\""), key_trie(names, 0, 0, names.size())});
}

// Strings other than `out` (a `not` of string values): the key trie, when the string has no
// other keyword and the values are printable ASCII.
Expr SchemaCompiler::strings_except(const Json& s, std::vector<std::string> out, const std::string& path) {
  bool plain = !native_;
  for (const char* k : {"minLength", "maxLength", "pattern", "format"}) plain = plain && !s.contains(k);
  for (const std::string& n : out)
    for (unsigned char c : n) plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  if (!plain) {
    unsupported("'not' of strings beside other string keywords", path + "/not");
    return string_expr(s, path);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (!other_key_rest_) other_key_rest_ = b_.add("key-rest", seq({star(char_), lit("\"")}));
  return seq({lit("\""), key_trie(out, 0, 0, out.size())});
}

// Keys continuing a common prefix of length `depth` shared by names[lo, hi).
Expr SchemaCompiler::key_trie(const std::vector<std::string>& names, size_t depth, size_t lo, size_t hi) {
  std::vector<Expr> alts;
  ByteSet next;
  bool ends_here = false;
  for (size_t i = lo; i < hi; ++i) {
    if (names[i].size() == depth) ends_here = true;
    else next.add(static_cast<uint8_t>(names[i][depth]));
  }
  if (!ends_here) alts.push_back(lit("\""));
  // Leave the trie: a character no name continues with, then anything.
  ByteSet plain = ByteSet::range(0x20, 0x7F);
  plain.w[0] &= ~(uint64_t{1} << '"');
  plain.w[1] &= ~(uint64_t{1} << ('\\' - 64));
  for (int w = 0; w < 4; ++w) plain.w[w] &= ~next.w[w];
  ByteSet esc;
  for (char c : std::string_view("bfnrt")) esc.add(static_cast<uint8_t>(c));
  if (!next.has('"')) esc.add('"');
  if (!next.has('\\')) esc.add('\\');
  if (!next.has('/')) esc.add('/');
  alts.push_back(seq({alt({bytes(plain), ref(rx_.utf8_multi), seq({lit("\\"), bytes(esc)})}), ref(other_key_rest_)}));
  for (size_t i = lo; i < hi;) {
    if (names[i].size() == depth) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < hi && names[j].size() > depth && names[j][depth] == names[i][depth]) ++j;
    alts.push_back(seq({lit(names[i].substr(depth, 1)), key_trie(names, depth + 1, i, j)}));
    i = j;
  }
  return alt(std::move(alts));
}

// One additional member (a name not in "properties"): for each patternProperties key, a
// name matching it whose value meets that schema and those of the patterns it may also
// match; with additionalProperties not false, any name whose value meets
// additionalProperties and every pattern's schema (so whichever patterns the name matches,
// the value fits). nullopt: no additional member.
std::optional<Expr> SchemaCompiler::extra_members(const Json& s, const std::string& path) {
  std::vector<Expr> alts;
  const Json pats = s.value("patternProperties", Json::object());
  if (!pats.is_object()) fail("json schema: 'patternProperties' at %s must be an object", path.c_str());
  if (!pats.empty() && native_) unsupported("'patternProperties' in native tool syntax", path);
  Json all_pats = Json(true);
  for (const auto& [p, ps] : pats.items())
    all_pats = all_pats == true ? ps : Json{{"allOf", Json::array({all_pats, ps})}};
  auto value_rule = [&](const Json& schema, const std::string& at) -> std::optional<uint32_t> {
    Json n;
    try {
      n = normalize(schema, at);
    } catch (const Error&) {
      return std::nullopt;  // schemas that cannot be intersected: no such member
    }
    if (n == false) return std::nullopt;
    return rule_for(n, at);
  };
  if (!pats.empty() && !native_) {
    for (const auto& [p, ps] : pats.items()) {
      const std::string at = path + "/patternProperties/" + p;
      Json all = Json::array({ps});
      for (const auto& [q, qs] : pats.items())
        if (q != p && !patterns_disjoint(p, q)) all.push_back(qs);
      auto v = value_rule(all.size() == 1 ? ps : Json{{"allOf", all}}, at);
      if (v) alts.push_back(seq({quoted(regex_to_expr(p, rx_)), punct(':'), ref(*v)}));
    }
  }
  const Json add = s.value("additionalProperties", Json(true));
  if (!(add.is_boolean() && !add.get<bool>())) {
    const Json both = pats.empty() ? add : Json{{"allOf", Json::array({add, all_pats})}};
    Expr key = other_key(s);
    if (s.contains("propertyNames")) {  // the keys of additional members (json_schema_cond.cpp)
      if (native_) unsupported("'propertyNames' in native tool syntax", path + "/propertyNames");
      else key = string_expr(s["propertyNames"], path + "/propertyNames");
    }
    if (pats.empty() && add.is_boolean()) alts.push_back(seq({key, punct(':'), any_value()}));
    else if (auto v = value_rule(both, path + "/additionalProperties")) alts.push_back(seq({key, punct(':'), ref(*v)}));
  }
  if (alts.empty()) return std::nullopt;
  return alt(std::move(alts));
}

// The object's members: named ones in order (optional ones may be skipped), then any
// number of extra ones, with minProperties/maxProperties counted and dependentRequired
// tracked along the way. tail(k, c, w): members from index k on, c members written so far
// (saturating at the largest count that still matters), w the set of written members that
// take part in a dependency (a bit each; a trigger's later dependents become required, its
// earlier ones must be in w).
Expr SchemaCompiler::members_expr(const Json& s, const std::string& path, const Members& m,
                                  const std::optional<Expr>& extra) {
  const size_t lo = s.contains("minProperties") ? as_count(s, "minProperties", path) : 0;
  const size_t hi = s.contains("maxProperties") ? as_count(s, "maxProperties", path) : SIZE_MAX;
  if (lo > hi) fail("json schema: minProperties > maxProperties at %s", path.c_str());
  const size_t n = m.members.size();
  const size_t cap = std::max<size_t>(1, hi == SIZE_MAX ? lo : hi);  // counts past cap behave alike
  std::vector<int> bit(n, -1);
  int n_bits = 0;
  for (size_t t = 0; t < n; ++t)
    for (size_t d : m.deps[t])
      for (size_t x : {t, d})
        if (bit[x] < 0) bit[x] = n_bits++;
  if (n_bits > 6) fail("json schema: 'dependentRequired' at %s involves more than 6 names (limit)", path.c_str());
  const size_t n_sets = size_t{1} << n_bits;
  if ((n + 1) * (cap + 1) * n_sets > opts_.limits.max_rules / 4 || cap > opts_.limits.max_repeat)
    fail("json schema: the member counts at %s need too many rules (limit max_rules)", path.c_str());
  auto has = [&](size_t w, size_t j) { return bit[j] >= 0 && ((w >> bit[j]) & 1); };
  auto forced = [&](size_t w, size_t j) {
    if (m.required[j]) return true;
    for (size_t t = 0; t < n; ++t)
      if (has(w, t) && std::find(m.deps[t].begin(), m.deps[t].end(), j) != m.deps[t].end()) return true;
    return false;
  };
  auto may_write = [&](size_t w, size_t j) {
    for (size_t d : m.deps[j])
      if (d < j && !has(w, d)) return false;
    return true;
  };
  constexpr uint32_t kDead = UINT32_MAX;  // no way to finish from there
  std::vector<uint32_t> tail((n + 1) * (cap + 1) * n_sets, kDead);
  auto at = [&](size_t k, size_t c, size_t w) -> uint32_t& { return tail[(k * (cap + 1) + c) * n_sets + w]; };
  for (size_t k = n + 1; k-- > 0;) {
    for (size_t c = 0; c <= cap; ++c) {
      for (size_t w = 0; w < n_sets; ++w) {
        const Expr sep = c == 0 ? empty() : punct(',');
        std::vector<Expr> alts;
        bool open_end = true;  // nothing forced from k on
        for (size_t j = k; j < n; ++j) {
          const size_t w2 = bit[j] >= 0 ? w | (size_t{1} << bit[j]) : w;
          const uint32_t next = at(j + 1, std::min(c + 1, cap), w2);
          if (m.members[j] && c + 1 <= hi && next != kDead && may_write(w, j))
            alts.push_back(seq({sep, *m.members[j], ref(next)}));
          if (forced(w, j)) {
            open_end = false;
            break;
          }
        }
        if (open_end) {
          const size_t need = lo > c ? lo - c : 0;
          const size_t room = hi == SIZE_MAX ? SIZE_MAX : hi - std::min(hi, c);
          if (need == 0) alts.push_back(empty());
          if (extra && room > 0 && need <= room) {
            const uint32_t more_max = room == SIZE_MAX ? kInf : static_cast<uint32_t>(room - 1);
            const uint32_t more_min = need > 0 ? static_cast<uint32_t>(need - 1) : 0;
            alts.push_back(seq({sep, *extra, repeat(seq({punct(','), *extra}), more_min, more_max)}));
          }
        }
        if (!alts.empty()) at(k, c, w) = b_.add("obj" + std::to_string(k), alt(std::move(alts)));
      }
    }
  }
  if (at(0, 0, 0) == kDead) fail("json schema: no object at %s meets its member counts", path.c_str());
  return seq({lit("{"), ws(), ref(at(0, 0, 0)), ws(), lit("}")});
}

// uniqueItems is checked by the matcher when an item ends; that never leaves the model
// without a token only if a value equal to an earlier item can always grow into a different
// one before it ends: strings without maxLength, format or value limits, whose pattern (if
// any) gives every prefix infinitely many completions (regex_always_extends), numbers
// without bounds or multipleOf (more digits: they are generated within ±1e17, which drops
// the exponent, whose 3 digits could run out), integers without bounds or multipleOf (within
// ±(1e17 - 1); the matcher refuses a prefix that can only become a written one), objects that take any further member,
// arrays that take any number of further items (no maxItems, uniqueItems or maxContains; items not false).
// Items of any type are narrowed to those (literals and arrays could run out). False: some item schema is outside this
// set.
bool SchemaCompiler::unique_items_may_differ(const Json& s, const std::string& path, std::optional<Expr>& item) {
  auto may_differ = [&](const Json& x0, const std::string& at) {
    const Json x = normalize(x0, at);
    if (x == false) return true;
    if (!x.is_object() || !x.contains("type") || !x["type"].is_string()) return false;
    const std::string t = x["type"].get<std::string>();
    std::vector<const char*> limits{"enum", "const", "anyOf", "not"};
    if (t == "string") limits.insert(limits.end(), {"maxLength", "format"});
    else if (t == "number" || t == "integer")
      limits.insert(limits.end(), {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"});
    else if (t == "object") limits.insert(limits.end(), {"maxProperties", "propertyNames"});
    else if (t == "array") limits.insert(limits.end(), {"maxItems", "uniqueItems", "maxContains"});
    else return false;
    for (const char* k : limits)
      if (x.contains(k)) return false;
    // A pattern every prefix of which still has infinitely many completions.
    if (t == "string" && x.contains("pattern"))
      return x["pattern"].is_string() && regex_always_extends(x["pattern"].get<std::string>(), rx_);
    // An array that takes any number of further items grows past every written one.
    if (t == "array") return normalize(x.value("items", Json(true)), at + "/items") != false;
    return t != "object" || x.value("additionalProperties", Json(true)) == true;
  };
  if (s.contains("prefixItems"))
    for (size_t i = 0; i < s["prefixItems"].size(); ++i)
      if (!may_differ(s["prefixItems"][i], path + "/prefixItems/" + std::to_string(i))) return false;
  const Json items = s.value("items", Json(true));
  const Json bounds{{"minimum", -100000000000000000}, {"maximum", 100000000000000000}};
  if (trivially_true(items)) {
    const Json number = Json{{"type", "number"}, {"minimum", bounds["minimum"]}, {"maximum", bounds["maximum"]}};
    item = ref(rule_for(Json{{"anyOf", Json::array({Json{{"type", "string"}}, number, Json{{"type", "object"}}})}},
                        path + "/items"));
    return true;
  }
  if (!may_differ(items, path + "/items")) return false;
  const Json type = normalize(items, path + "/items").value("type", Json());
  if (type == "number") item = ref(rule_for(Json{{"allOf", Json::array({items, bounds})}}, path + "/items"));
  // Integers: at most kUniqueIntegerDigits digits, each prefix of which the matcher refuses
  // once every integer it could become is written (ItemTracker::dead_integer_prefix).
  const int64_t int_max = 99999999999999999;  // 10^kUniqueIntegerDigits - 1
  if (type == "integer")
    item = ref(rule_for(Json{{"allOf", Json::array({items, Json{{"minimum", -int_max}, {"maximum", int_max}}})}},
                        path + "/items"));
  return true;
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
    if (normalize(it, path + "/items") == false) item.reset();
    else item = ref(rule_for(it, path + "/items"));
  }
  const size_t lo = s.contains("minItems") ? as_count(s, "minItems", path) : 0;
  const size_t hi = s.contains("maxItems") ? as_count(s, "maxItems", path) : SIZE_MAX;
  if (lo > hi) fail("json schema: minItems > maxItems at %s", path.c_str());
  // uniqueItems: the delimiters that close an item are marked; the matcher drops a parse at
  // one of them when the item equals an earlier one (ItemTracker).
  Expr comma = punct(','), close = seq({ws(), lit("]")});  // close: whitespace, then ']'
  if (s.value("uniqueItems", false) == true && hi > 1) {
    constexpr size_t kGrammarValues = 8;  // unique_values_expr: 2^8 rules
    const auto values = unique_value_list(s, path);
    if (values && values->size() <= kGrammarValues) return unique_values_expr(*values, path, lo, hi);
    if (values && native_) {
      unsupported("'uniqueItems' over more than 8 values in native tool syntax", path);
    } else if (values) {
      item = unique_value_items(*values, path, lo, comma);
    } else if (!unique_items_may_differ(s, path, item)) {
      unsupported("'uniqueItems' over items that may run out of different values (see docs)", path);
    } else if (native_) {
      unsupported("'uniqueItems' in native tool syntax", path);
    } else {
      if (!u_comma_) {
        u_comma_ = b_.add("unique-comma", seq({ws(), lit(",")}));
        u_close_ = b_.add("unique-close", seq({ws(), lit("]")}));
        b_.mark_unique_close(u_comma_);
        b_.mark_unique_close(u_close_);
      }
      comma = seq({ref(u_comma_), ws()});
      close = ref(u_close_);
    }
  }
  if (s.contains("contains")) {
    if (!s.contains("prefixItems")) return contains_expr(s, path, lo, hi, comma, close);
    unsupported("'contains' beside 'prefixItems'", path + "/contains");
  }
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
    const Expr more = seq({comma, *item});
    if (i == 0 && need == 0 && max == kInf) {
      // "]" | item ("," item)* "]" as a loop that calls the item from one place:
      // each ::= item next; next ::= "," each | "]".
      const uint32_t each = b_.declare("items"), next = b_.declare("items-next");
      b_.define(each, seq({*item, ref(next)}));
      b_.define(next, alt({seq({comma, ref(each)}), close}));
      return alt({close, ref(each)});
    }
    if (i > 0) return repeat(more, static_cast<uint32_t>(need), max);
    Expr some = seq({*item, repeat(more, need ? static_cast<uint32_t>(need - 1) : 0, max == kInf ? kInf : max - 1)});
    return need ? some : opt(std::move(some));
  };
  if (k == 0 && item && lo == 0 && hi == SIZE_MAX) return seq({lit("["), ws(), rest(0)});  // the loop closes itself
  Expr body = rest(k);
  for (size_t i = k; i-- > 0;) {
    Expr next = seq({i ? comma : empty(), prefix[i], std::move(body)});
    body = i + 1 > lo ? opt(std::move(next)) : std::move(next);
  }
  return seq({lit("["), ws(), std::move(body), close});
}

}  // namespace detail

uint32_t add_json_schema(GrammarBuilder& b, const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts) {
  detail::SchemaCompiler c(b, schema, opts);
  return c.rule_for(schema, "#");
}

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts) {
  const double t0 = thread_cpu_ms();  // the compile's budget is thread CPU time
  GrammarBuilder b(opts.limits);
  detail::SchemaCompiler c(b, schema, opts);
  const uint32_t root = c.rule_for(schema, "#");
  Grammar g = b.finish(root);
  g.warnings = c.dropped();
  g.build_ms = thread_cpu_ms() - t0;
  return g;
}

Grammar json_schema_grammar_text(std::string_view text, const JsonSchemaOptions& opts) {
  if (text.size() > opts.limits.max_schema_bytes)
    throw Error(schema_size_error(text.size(), opts.limits.max_schema_bytes));
  nlohmann::ordered_json schema;
  try {
    schema = read_json<nlohmann::ordered_json>(text, JsonLimits{}, "the schema");
  } catch (const JsonReadError& e) {
    fail("json schema: %s", e.what());
  }
  return json_schema_grammar(schema, opts);
}

std::string schema_size_error(size_t bytes, size_t limit) {
  return strfmt("json schema: %zu bytes, over the limit of %zu (limit max_schema_bytes)", bytes, limit);
}

std::string json_schema_cache_key(const nlohmann::ordered_json& schema, const JsonSchemaOptions& opts) {
  std::string text = schema.dump();
  if (text.size() > opts.limits.max_schema_bytes)
    throw Error(schema_size_error(text.size(), opts.limits.max_schema_bytes));
  return strfmt("json:%d:%d:%d:%d:", static_cast<int>(opts.syntax), opts.any_whitespace ? 1 : 0,
                opts.native_quote_token, opts.lenient ? 1 : 0) +
         text;
}

}  // namespace sluice::grammar
