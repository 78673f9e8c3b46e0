// JSON Schema front end against the `jsonschema` package: every value it finds valid (in
// canonical serialisation) is a complete match, every value it finds invalid is rejected
// (tests/data/grammar/json_cases.json, written by python/make_grammar_cases.py).
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/compiled.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar_checks.h"
#include "test_vocab.h"

namespace sluice::grammar {
namespace {

using test::matches;

TEST(JsonSchema, AgreesWithTheJsonschemaPackageOnTheCorpus) {
  const auto data = test::load_cases("json_cases.json");
  auto vocab = test::byte_vocab(false);
  size_t n_valid = 0, n_invalid = 0;
  ASSERT_GE(data["cases"].size(), 60u);
  for (const auto& c : data["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto g = std::make_shared<const CompiledGrammar>(json_schema_grammar_text(c["schema"].dump()), vocab);
    for (const auto& v : c["valid"]) {
      EXPECT_TRUE(matches(g, v.get<std::string>())) << "valid value rejected: " << v.get<std::string>();
      ++n_valid;
    }
    for (const auto& v : c["invalid"]) {
      EXPECT_FALSE(matches(g, v.get<std::string>())) << "invalid value accepted: " << v.get<std::string>();
      ++n_invalid;
    }
  }
  EXPECT_GT(n_valid, 300u);
  EXPECT_GT(n_invalid, 300u);
}

// A value in Gemma 4's native argument syntax, as token ids: bytes as single-byte tokens,
// string delimiters as the `quote` token. Returns false for strings holding '|' (outside
// the native subset).
bool native_tokens(const nlohmann::ordered_json& v, int32_t quote, std::vector<int32_t>& out) {
  auto text = [&](const std::string& s) {
    for (unsigned char c : s) out.push_back(1 + c);
  };
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.find('|') != std::string::npos) return false;
    out.push_back(quote);
    text(s);
    out.push_back(quote);
  } else if (v.is_object()) {
    text("{");
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) text(",");
      first = false;
      text(k + ":");
      if (!native_tokens(x, quote, out)) return false;
    }
    text("}");
  } else if (v.is_array()) {
    text("[");
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) text(",");
      if (!native_tokens(v[i], quote, out)) return false;
    }
    text("]");
  } else {
    text(v.dump());
  }
  return true;
}

TEST(JsonSchema, NativeSyntaxAcceptsTheValidValues) {
  const auto data = test::load_cases("json_cases.json");
  auto vocab = test::byte_vocab();
  const int32_t quote = vocab->n_vocab() - 7;
  JsonSchemaOptions o;
  o.syntax = JsonSchemaOptions::Syntax::kGemmaNative;
  o.native_quote_token = quote;
  size_t checked = 0;
  for (const auto& c : data["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    // Pattern-named members have no native spelling (keys are identifiers there).
    if (c["schema"].contains("patternProperties") || c["name"] == "79_not") continue;
    auto g = std::make_shared<const CompiledGrammar>(json_schema_grammar(c["schema"], o), vocab);
    for (const auto& v : c["valid"]) {
      std::vector<int32_t> ids;
      if (!native_tokens(nlohmann::ordered_json::parse(v.get<std::string>()), quote, ids)) continue;
      Matcher m(g);
      bool ok = true;
      for (int32_t id : ids) ok = ok && m.advance(id);
      EXPECT_TRUE(ok && m.is_complete()) << v.get<std::string>();
      ++checked;
    }
  }
  EXPECT_GT(checked, 300u);
}

bool schema_matches(const std::string& schema, const std::string& text);

void expect_error(const std::string& schema, const std::string& needle) {
  test::expect_error_naming([](const std::string& s) { return json_schema_grammar_text(s); }, schema, needle);
}

TEST(JsonSchema, UnsupportedAssertionsAreErrorsNamingThemAndWhere) {
  expect_error(R"({"type":"array","items":{"type":"integer"},"contains":{"const":5},"maxContains":1})",
               "'maxContains' over a 'contains' that is not decided by types and values at #/contains");
  expect_error(R"({"properties":{"a":{}},"propertyNames":{"maxLength":3}})",
               "'propertyNames' beside declared properties or patternProperties at #/propertyNames");
  expect_error(R"({"if":{"properties":{"n":{"const":1}}},"then":{"required":["a"]}})",
               "'if' that is not decided by types, values and required names at #/if");
  expect_error(R"({"dependentSchemas":{"a":{"required":["b"]}}})", "'dependentSchemas' at #/dependentSchemas/a");
  expect_error(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})",
               "'oneOf' whose branches 0 and 1 may overlap at #/oneOf");
  expect_error(R"({"type":"number","multipleOf":0.3})", "'multipleOf' 0.3");
  expect_error(R"({"type":"string","pattern":"(a)\\1"})", "pattern");
  expect_error(R"({"type":"string","pattern":"a","maxLength":3})", "'pattern' with 'minLength'/'maxLength' at #");
  expect_error(R"({"$ref":"http://example.com/s.json"})", "local '$ref'");
  expect_error(R"({"allOf":[{"type":"string"},{"type":"integer"}]})", "admits no value");
  expect_error(R"({"type":"integer","minimum":5,"maximum":4})", "no integer");
  expect_error(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})",
               "left-recursive");
  expect_error("{not json", "not valid JSON");
}

// Keywords that constrain nothing never refuse: the annotation vocabulary, vendor x-*
// keywords, unknown keywords, unknown formats, no-op assertions — at every level.
TEST(JsonSchema, AnnotationsAndUnknownKeywordsAreIgnoredEverywhere) {
  const std::string ann =
      R"("title":"t","description":"d","default":1,"examples":[1],"$comment":"c","deprecated":true,"readOnly":true,)"
      R"("writeOnly":false,"contentMediaType":"text/plain","contentEncoding":"base64","$schema":"x","$id":"y","id":"z",)"
      R"("$anchor":"a","x-kubernetes-group-version-kind":[{"kind":"Pod"}],"self":{},"preferredOrder":["a"],)"
      R"("_format":"f","_uniqueItems":true,"uniqueItems":false,"propertyNames":true,"unevaluatedItems":{},)";
  const std::string schema = "{" + ann + R"("type":"object","properties":{"a":{)" + ann +
                             R"("type":"array","items":{)" + ann +
                             R"("type":"string","format":"int-or-string","maxLength":2}},)" +
                             R"("b":{"$ref":"#/$defs/B",)" + ann + R"("x-extra":1}},"required":["a"],)" +
                             R"("additionalProperties":false,"$defs":{"B":{)" + ann + R"("type":"boolean"}}})";
  EXPECT_TRUE(schema_matches(schema, R"({"a":["xy",""],"b":true})"));
  EXPECT_FALSE(schema_matches(schema, R"({"a":["xyz"]})"));
  EXPECT_FALSE(schema_matches(schema, R"({"b":true})"));
}

}  // namespace
}  // namespace sluice::grammar

namespace sluice::grammar {
namespace {

bool schema_matches(const std::string& schema, const std::string& text) {
  static auto vocab = test::byte_vocab(false);
  return matches(std::make_shared<const CompiledGrammar>(json_schema_grammar_text(schema), vocab), text);
}

TEST(JsonSchema, PatternsDescribeTheDecodedString) {
  // A quote or backslash in the pattern is written escaped in the JSON text.
  EXPECT_TRUE(schema_matches(R"({"type":"string","pattern":"^a\"b\\\\c$"})", R"("a\"b\\c")"));
  EXPECT_FALSE(schema_matches(R"({"type":"string","pattern":"^a\"b\\\\c$"})", R"("a"b\c")"));
  // Unanchored patterns search; anchored ones match the whole string.
  EXPECT_TRUE(schema_matches(R"({"type":"string","pattern":"b+"})", R"("abbbc")"));
  EXPECT_FALSE(schema_matches(R"({"type":"string","pattern":"^b+$"})", R"("abbbc")"));
  // A negated class admits escapes and non-ASCII characters.
  EXPECT_TRUE(schema_matches(R"({"type":"string","pattern":"^[^x]{3}$"})", "\"\\n\xC3\xA9y\""));
  EXPECT_FALSE(schema_matches(R"({"type":"string","pattern":"^[^x]{3}$"})", R"("axy")"));
  EXPECT_TRUE(schema_matches(R"({"type":"string","pattern":"^(ab|cd){2}\\d?$"})", R"("abcd7")"));
  EXPECT_FALSE(schema_matches(R"({"type":"string","pattern":"^(ab|cd){2}\\d?$"})", R"("abc")"));
}

TEST(JsonSchema, LengthCountsCharactersNotBytes) {
  const std::string s = R"({"type":"string","minLength":2,"maxLength":2})";
  EXPECT_TRUE(schema_matches(s, "\"\xE6\x97\xA5\xE6\x9C\xAC\""));  // two 3-byte characters
  EXPECT_TRUE(schema_matches(s, R"("\n\"")"));                     // two escapes
  EXPECT_FALSE(schema_matches(s, R"("abc")"));
  EXPECT_FALSE(schema_matches(s, "\"\xE6\x97\xA5\""));
}

TEST(JsonSchema, NumberBoundsAreExact) {
  const std::string s = R"({"type":"number","exclusiveMinimum":-2,"maximum":3})";
  for (const char* ok : {"-1.999", "-1", "0", "-0.5", "2.75", "3", "3.000"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {"-2", "-2.0", "3.001", "4", "1e2", "-2.5", "03"}) EXPECT_FALSE(schema_matches(s, bad)) << bad;
  const std::string i = R"({"type":"integer","minimum":-15,"exclusiveMaximum":120})";
  for (const char* ok : {"-15", "-9", "0", "99", "119"}) EXPECT_TRUE(schema_matches(i, ok)) << ok;
  for (const char* bad : {"-16", "120", "1000", "-0", "1.0"}) EXPECT_FALSE(schema_matches(i, bad)) << bad;
}

// Caps stricter than the schema (docs/structured-output.md): what a double, RFC 3339
// nanoseconds and RFC 5321/1035 allow. One past each cap is rejected.
TEST(JsonSchema, DigitsAndFormatsStopAtRealWorldLimits) {
  const std::string f20 = "0." + std::string(19, '0') + "1", f21 = "0." + std::string(20, '0') + "1";
  for (const char* s : {R"({"type":"number"})", R"({"type":"number","minimum":0,"maximum":1})",
                        R"({"type":"number","exclusiveMinimum":0})"}) {
    EXPECT_TRUE(schema_matches(s, f20)) << s;
    EXPECT_FALSE(schema_matches(s, f21)) << s;
  }
  EXPECT_TRUE(schema_matches(R"({"type":"number","minimum":0,"maximum":1})", "0." + std::string(20, '0')));
  EXPECT_FALSE(schema_matches(R"({"type":"number","minimum":0,"maximum":1})", "0." + std::string(21, '0')));
  EXPECT_TRUE(schema_matches(R"({"type":"number"})", "1.5e-308"));
  EXPECT_FALSE(schema_matches(R"({"type":"number"})", "1.5e-0308"));
  const std::string t = R"({"type":"string","format":"time"})";
  EXPECT_TRUE(schema_matches(t, R"("12:00:00.123456789Z")"));
  EXPECT_FALSE(schema_matches(t, R"("12:00:00.1234567890Z")"));
  const std::string e = R"({"type":"string","format":"email"})";
  const std::string l63(63, 'a'), l64(64, 'a');
  EXPECT_TRUE(schema_matches(e, "\"" + l64 + "@" + l63 + "." + l63 + "." + l63 + "." + l63 + "\""));
  EXPECT_FALSE(schema_matches(e, "\"" + l64 + "x@b.co\""));
  EXPECT_FALSE(schema_matches(e, "\"a@" + l64 + ".co\""));
  EXPECT_FALSE(schema_matches(e, R"("a@b.c.d.e.f")"));  // five labels
}

std::string objects_union(int n) {
  nlohmann::json branches = nlohmann::json::array();
  for (int i = 0; i < n; ++i)
    branches.push_back({{"type", "object"},
                        {"properties", {{"k" + std::to_string(i), {{"type", "integer"}}}}},
                        {"required", {"k" + std::to_string(i)}},
                        {"additionalProperties", false}});
  return nlohmann::json{{"anyOf", branches}}.dump();
}

// A union too wide for the matcher is refused when the schema compiles (a 400), naming the
// limit — never a failure in the middle of generation; one within the limit runs.
TEST(JsonSchema, TooWideUnionsAreRefusedAtCompileTime) {
  expect_error(objects_union(2000), "(limit max_union_branches)");
  nlohmann::json values = nlohmann::json::array();
  for (int i = 0; i < 1500; ++i) values.push_back("v" + std::to_string(i));
  expect_error(nlohmann::json{{"enum", values}}.dump(), "'enum' at # makes 1500 alternatives");
  // Unions nested directly in unions multiply; one behind a key does not.
  const auto nested = nlohmann::json{
      {"anyOf", {nlohmann::json::parse(objects_union(600)), {{"type", "null"}}}}};  // 2 x 600
  expect_error(nested.dump(), "'anyOf' at #/anyOf/0 makes 1200 alternatives");
  const auto keyed = nlohmann::json{
      {"anyOf",
       {{{"type", "object"}, {"properties", {{"a", nlohmann::json::parse(objects_union(600))}}}}, {{"type", "null"}}}}};
  EXPECT_TRUE(schema_matches(keyed.dump(), R"({"a":{"k5":1}})"));
  const std::string ok = objects_union(1000);
  EXPECT_TRUE(schema_matches(ok, R"({"k999":-12})"));
  EXPECT_FALSE(schema_matches(ok, R"({"k1000":1})"));
}

// An additional member never reuses a declared name (a duplicate key would be a second value
// for the declared member); names that merely share a prefix are fine.
TEST(JsonSchema, AdditionalMembersDoNotReuseDeclaredNames) {
  const std::string s = R"({"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"null"}}})";
  for (const char* ok :
       {R"({"a":1,"abc":"x"})", R"({"b":true})", R"({"ab":null,"a2":[]})", R"({"":1})", R"({"a":1,"\n":2})"})
    EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {R"({"a":1,"a":"x"})", R"({"ab":null,"ab":1})", R"({"x":1,"a":2})", R"({"\u0061":"x"})"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
}

// Under the wildcard the compile-time analysis follows every call site of a shared rule at
// once; past max_stacks_per_state it leaves those tokens to the run-time check instead of
// failing the grammar (a real stack has one caller).
TEST(JsonSchema, AnalysisPastTheStackLimitDefersToTheRealStack) {
  const std::string s =
      R"({"type":"object","properties":{"a":{},"b":{"type":"array","items":{}},"c":{"anyOf":[{},{"type":"null"}]},)"
      R"("d":{"type":"object","additionalProperties":{}},"e":{}}})";
  Limits tight;
  tight.max_stacks_per_state = 24;
  tight.eager_compile_ms = 1e9;  // analyse every position at compile
  auto vocab = test::byte_vocab(true);
  auto g = std::make_shared<const CompiledGrammar>(json_schema_grammar_text(s), vocab, tight);
  EXPECT_TRUE(matches(g, R"({"a":{"x":[1,{"y":null}]},"b":[{},[]],"d":{"k":"v"},"e":"s","z":true})"));
  EXPECT_FALSE(matches(g, R"({"a":1,"a":2})"));
  EXPECT_FALSE(matches(g, R"({"b":{}})"));
}

// not over types and over null/boolean/string values (anyOf inside: each excluded).
TEST(JsonSchema, NotExcludesTypesAndValues) {
  const std::string s =
      R"({"type":["string","boolean","null"],"not":{"anyOf":[{"enum":["a","ab",null]},{"const":true}]}})";
  for (const char* ok : {R"("")", R"("b")", R"("abc")", R"("a\n")", "false", R"("\"")"})
    EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {R"("a")", R"("ab")", "null", "true", R"("\u0061")"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_TRUE(schema_matches(R"({"not":{"type":["string","object"]}})", "[1]"));
  EXPECT_FALSE(schema_matches(R"({"not":{"type":["string","object"]}})", R"({"a":1})"));
  expect_error(R"({"type":"integer","not":{"const":3}})", "'not' at #/not");
  expect_error(R"({"type":"string","maxLength":3,"not":{"const":"x"}})", "'not' of strings beside");
}

// After `prefix` (single-byte tokens), whether the mask allows the token spelled `piece`
// (the byte vocabulary with its multi-byte tokens: `"}`, `",` ...).
bool allowed_after(const std::string& schema, const std::string& prefix, const std::string& piece) {
  static auto vocab = test::byte_vocab(true);
  Matcher m(std::make_shared<const CompiledGrammar>(json_schema_grammar_text(schema), vocab));
  for (unsigned char c : prefix)
    if (!m.advance(1 + c)) throw std::runtime_error("prefix rejected at '" + std::string(1, c) + "': " + prefix);
  std::vector<uint64_t> mask(vocab->mask_words());
  m.fill_mask(mask);
  for (int32_t id = 0; id < vocab->n_vocab(); ++id)
    if (vocab->piece(id) == piece) return (mask[id >> 6] >> (id & 63)) & 1;
  throw std::runtime_error("no token " + piece);
}

TEST(JsonSchema, NotMasksExcludedValues) {
  const std::string s = R"({"type":"object","properties":{"k":{"type":"string","not":{"enum":["ab","x"]}}}})";
  EXPECT_TRUE(allowed_after(s, R"({"k":"a)", "b"));
  EXPECT_FALSE(allowed_after(s, R"({"k":"ab)", "\"}"));  // closes the excluded "ab"
  EXPECT_TRUE(allowed_after(s, R"({"k":"a)", "\"}"));
  EXPECT_FALSE(allowed_after(R"({"not":{"type":["string","null"]}})", "", "\""));
}

TEST(JsonSchema, DependentRequiredMasksTheEarlyClose) {
  const std::string s =
      R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"}},"dependentRequired":{"a":["b"]}})";
  for (const char* ok : {"{}", R"({"b":null})", R"({"a":null,"b":null})"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  EXPECT_FALSE(schema_matches(s, R"({"a":null})"));
  EXPECT_FALSE(allowed_after(s, R"({"a":null)", "}"));
  EXPECT_TRUE(allowed_after(s, R"({"a":null)", ","));
}

// if/then/else decided by a property's value: the branch not taken is masked as soon as the
// value is written.
TEST(JsonSchema, IfThenElseFollowsTheDecidingProperty) {
  const std::string s =
      R"({"type":"object","properties":{"kind":{"enum":["a","b"]},"n":{"type":"integer"},"s":{"type":"string"}},)"
      R"("required":["kind"],"additionalProperties":false,"if":{"properties":{"kind":{"const":"a"}}},)"
      R"("then":{"required":["n"]},"else":{"required":["s"],"properties":{"n":false}}})";
  for (const char* ok : {R"({"kind":"a","n":1})", R"({"kind":"a","n":1,"s":""})", R"({"kind":"b","s":"x"})"})
    EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {R"({"kind":"a"})", R"({"kind":"a","s":"x"})", R"({"kind":"b","n":1,"s":"x"})",
                          R"({"kind":"b"})", R"({"kind":"c","s":"x"})"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, R"({"kind":"b")", "}"));
  EXPECT_FALSE(allowed_after(s, R"({"kind":"b",")", "n"));
  EXPECT_TRUE(allowed_after(s, R"({"kind":"b",")", "s"));
  EXPECT_FALSE(allowed_after(s, R"({"kind":"a",")", "s"));
  EXPECT_FALSE(allowed_after(s, R"({"kind":"a)", "\"}"));
  // `required` in the if: the else applies when the name is absent.
  const std::string r = R"({"type":"object","properties":{"x":{"type":"null"},"y":{"type":"boolean"}},)"
                        R"("if":{"required":["x"]},"then":{"required":["y"]},"else":{"properties":{"y":false}}})";
  for (const char* ok : {"{}", R"({"x":null,"y":true})"}) EXPECT_TRUE(schema_matches(r, ok)) << ok;
  for (const char* bad : {R"({"x":null})", R"({"y":true})"}) EXPECT_FALSE(schema_matches(r, bad)) << bad;
}

// contains with minContains/maxContains and the item counts: an item list that counts hits.
TEST(JsonSchema, ContainsCountsTheItemsThatMeetIt) {
  const std::string s = R"({"type":"array","items":{"enum":["a","b","c"]},"contains":{"const":"a"},)"
                        R"("minContains":1,"maxContains":2,"maxItems":4})";
  for (const char* ok : {R"(["a"])", R"(["b","a"])", R"(["a","c","a"])", R"(["b","a","c","a"])"})
    EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {"[]", R"(["b"])", R"(["a","a","a"])", R"(["a","b","c","b","b"])"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, R"(["b")", "]"));
  EXPECT_FALSE(allowed_after(s, R"(["b",)", "]"));
  EXPECT_FALSE(allowed_after(s, R"(["a","a",")", "a"));  // a third "a"
  EXPECT_TRUE(allowed_after(s, R"(["a","a",")", "b"));
  const std::string t = R"({"type":"array","contains":{"type":"integer"},"minItems":2})";
  for (const char* ok : {R"([1,"x"])", R"(["x",[],2])", "[1,2]"}) EXPECT_TRUE(schema_matches(t, ok)) << ok;
  for (const char* bad : {R"(["x","y"])", "[1]", "[]"}) EXPECT_FALSE(schema_matches(t, bad)) << bad;
  EXPECT_FALSE(allowed_after(t, R"(["x",true)", "]"));
}

// propertyNames: a key grammar for additional members; an enum of names becomes the only names.
TEST(JsonSchema, PropertyNamesConstrainTheKeys) {
  const std::string s =
      R"({"type":"object","propertyNames":{"pattern":"^[a-z]+$","maxLength":3},"additionalProperties":{"type":"integer"}})";
  for (const char* ok : {"{}", R"({"ab":1,"xyz":2})"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {R"({"abcd":1})", R"({"A":1})", R"({"":1})"}) EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, R"({"abc)", "d"));
  EXPECT_TRUE(allowed_after(s, R"({"abc)", "\":"));
  EXPECT_FALSE(allowed_after(s, R"({")", "A"));
  const std::string e = R"({"type":"object","properties":{"x":{"type":"integer"},"z":{"type":"null"}},)"
                        R"("propertyNames":{"enum":["x","y"]}})";
  for (const char* ok : {R"({"x":1,"y":[true]})", R"({"y":null})"}) EXPECT_TRUE(schema_matches(e, ok)) << ok;
  for (const char* bad : {R"({"z":null})", R"({"x":1,"w":1})"}) EXPECT_FALSE(schema_matches(e, bad)) << bad;
  EXPECT_FALSE(allowed_after(e, R"({")", "z"));
  expect_error(R"({"properties":{"z":{}},"required":["z"],"propertyNames":{"enum":["x"]}})",
               "required property 'z' at # admits no value");
}

// uniqueItems: the matcher refuses the byte that completes an item equal to an earlier one
// (a string's closing quote, a container's closing bracket) or, for numbers, the delimiter
// after it; JSON equality (1 == 1.0, members in any order).
TEST(JsonSchema, UniqueItemsRefuseARepeatedItem) {
  const std::string s = R"({"type":"array","items":{"type":"string"},"uniqueItems":true})";
  for (const char* ok : {"[]", R"(["a"])", R"(["a","ab","b"])", R"(["a","\"a"])"})
    EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {R"(["a","a"])", R"(["a","b","a"])", R"(["a","\u0061"])"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, R"(["a","a)", "\""));
  EXPECT_FALSE(allowed_after(s, R"(["a","a)", "\"]"));
  EXPECT_FALSE(allowed_after(s, R"(["a","a)", "\","));
  EXPECT_TRUE(allowed_after(s, R"(["a","a)", "b"));
  EXPECT_TRUE(allowed_after(s, R"(["a","ab)", "\"]"));
  const std::string n = R"({"type":"array","items":{"type":"number"},"uniqueItems":true})";
  for (const char* ok : {"[1,10]", "[1,-1,1.5]"}) EXPECT_TRUE(schema_matches(n, ok)) << ok;
  for (const char* bad : {"[1,1.0]", "[2,1,2]", "[1E999,2e999]"}) EXPECT_FALSE(schema_matches(n, bad)) << bad;
  EXPECT_FALSE(allowed_after(n, "[1,1", ","));
  EXPECT_FALSE(allowed_after(n, "[1,1", "]"));
  EXPECT_TRUE(allowed_after(n, "[1,1", "0"));
  const std::string o = R"({"type":"array","items":{"type":"object"},"uniqueItems":true})";
  EXPECT_TRUE(schema_matches(o, R"([{"a":1},{"a":[1]},{}])"));
  EXPECT_FALSE(schema_matches(o, R"([{"a":1,"b":2},{"b":2,"a":1}])"));
  EXPECT_FALSE(allowed_after(o, R"([{"a":1},{"a":1)", "}"));
  // Only the arrays that say so: an inner unique array inside an outer one that is not.
  const std::string in = R"({"type":"array","items":{"type":"array","uniqueItems":true}})";
  EXPECT_TRUE(schema_matches(in, "[[1,2],[1,2]]"));
  EXPECT_FALSE(schema_matches(in, "[[1,1]]"));
  // Per parse: [1,1] is valid through the branch without uniqueItems.
  const std::string u = R"({"anyOf":[{"type":"array","items":{"type":"number"},"uniqueItems":true},)"
                        R"({"type":"array","items":{"type":"number"},"maxItems":2}]})";
  for (const char* ok : {"[1,1]", "[1,2,3]"}) EXPECT_TRUE(schema_matches(u, ok)) << ok;
  EXPECT_FALSE(schema_matches(u, "[1,2,1]"));
  // Items of any type are narrowed to strings, numbers and objects (each can still grow
  // into a different value); items that may run out of different values are refused.
  const std::string any = R"({"type":"array","uniqueItems":true})";
  EXPECT_TRUE(schema_matches(any, R"(["a",1,{}])"));
  EXPECT_FALSE(schema_matches(any, "[null]"));
  for (const char* items : {R"({"type":"integer","maximum":5})", R"({"type":"string","maxLength":2})",
                            R"({"type":"object","additionalProperties":false})"})
    expect_error(std::string(R"({"type":"array","uniqueItems":true,"items":)") + items + "}",
                 "'uniqueItems' over items that may run out of different values (see docs) at #");
}

// Random walks through a unique array's grammar that favour the pieces `liked` picks (9 steps
// in 10, so repeats are tried often): the mask is never empty, a token it allows is accepted,
// and each finished array has distinct items, at least min_items. Returns the finished arrays.
std::vector<nlohmann::json> unique_walks(const std::shared_ptr<const CompiledGrammar>& g,
                                         const std::function<bool(std::string_view)>& liked, uint32_t seed,
                                         size_t min_items = 0, int walks = 40, int steps = 400) {
  const TokenVocab& vocab = g->vocab();
  std::mt19937 rng(seed);
  std::vector<uint64_t> mask(vocab.mask_words());
  std::vector<nlohmann::json> done;
  for (int walk = 0; walk < walks; ++walk) {
    Matcher m(g);
    std::string text;
    for (int step = 0; step < steps && !m.is_complete(); ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed, favoured;
      for (int32_t id = 0; id < vocab.n_vocab(); ++id) {
        if (!((mask[id >> 6] >> (id & 63)) & 1) || vocab.is_eog(id)) continue;
        allowed.push_back(id);
        if (liked(vocab.piece(id))) favoured.push_back(id);
      }
      if (allowed.empty()) {
        ADD_FAILURE() << "no token after " << text;
        return done;
      }
      const auto& from = !favoured.empty() && rng() % 10 ? favoured : allowed;
      const int32_t t = from[rng() % from.size()];
      if (!m.advance(t)) {
        ADD_FAILURE() << "the mask allowed a token advance refuses after " << text;
        return done;
      }
      text += vocab.piece(t);
    }
    if (!m.is_complete()) continue;
    const auto v = nlohmann::json::parse(text);
    std::set<nlohmann::json> seen;
    for (const auto& x : v) EXPECT_TRUE(seen.insert(x).second) << "repeated " << x.dump() << " in " << text;
    EXPECT_GE(v.size(), min_items) << text;
    done.push_back(v);
  }
  return done;
}

// uniqueItems over integers (at most 17 digits): the byte that makes a prefix whose every
// integer completion is already written is refused, so an item never reaches a point where
// only a duplicate could end it (the mask read after each prefix, as the engine reads it).
TEST(JsonSchema, UniqueIntegersRefuseAPrefixThatCanOnlyRepeat) {
  const std::string s = R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})";
  for (const char* ok : {"[0,1,10,-1]", "[5,55,-5]", "[99999999999999999]"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {"[0,0]", "[7,1,7]", "[100000000000000000]"}) EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, "[0,", "0"));  // 0 can only end as 0
  EXPECT_TRUE(allowed_after(s, "[0,", "1"));
  EXPECT_TRUE(allowed_after(s, "[0,", "-"));
  EXPECT_TRUE(allowed_after(s, "[5,", "5"));  // 5 can still grow into 55
  EXPECT_FALSE(allowed_after(s, "[5,5", ","));
  EXPECT_FALSE(allowed_after(s, "[5,5", "]"));
  EXPECT_TRUE(allowed_after(s, "[5,5", "0"));
  // 17 digits: no longer form exists, so a written one is refused at its last digit.
  const std::string big = "12345678901234567";
  EXPECT_FALSE(allowed_after(s, "[" + big + "," + big.substr(0, 16), "7"));
  EXPECT_TRUE(allowed_after(s, "[" + big + "," + big.substr(0, 16), "8"));
  // A 16-digit prefix whose own value and all ten 17-digit forms are written is refused too.
  const std::string p = "1234567890123456";
  std::string all = "[" + p;
  for (char d = '0'; d <= '9'; ++d) all += "," + p + d;
  EXPECT_FALSE(allowed_after(s, all + "," + p.substr(0, 15), "6"));
  EXPECT_TRUE(allowed_after(s, all + "," + p.substr(0, 15), "7"));
  EXPECT_TRUE(
      allowed_after(s, all.substr(0, all.size() - 18) + "," + p.substr(0, 15), "6"));  // 1234567890123456 9 free
}

// Walks that favour repeats (few digits, many items) never meet an empty mask, and what they
// write has no repeated integer.
TEST(JsonSchema, UniqueIntegerWalksNeverRunOutOfTokens) {
  auto g = std::make_shared<const CompiledGrammar>(
      json_schema_grammar_text(R"({"type":"array","items":{"type":"integer"},"uniqueItems":true,"minItems":30})"),
      test::byte_vocab(true));
  auto liked = [](std::string_view p) { return p == "0" || p == "1" || p == "-" || p == "," || p == "[" || p == "]"; };
  EXPECT_GT(unique_walks(g, liked, 7).size(), 20u);
}

// uniqueItems over a few values: a rule per set of values written, so a repeated value is
// masked as soon as it would start, and no item is left without a different value.
TEST(JsonSchema, UniqueItemsOverAFewValuesAreExactInTheGrammar) {
  const std::string s = R"({"type":"array","items":{"enum":["a","b",1]},"uniqueItems":true,"minItems":1})";
  for (const char* ok : {R"(["a"])", R"(["b","a",1])", R"([1,"b"])"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {"[]", R"(["a","a"])", R"([1,"a",1])", R"(["c"])"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, R"(["a",")", "a"));
  EXPECT_TRUE(allowed_after(s, R"(["a",")", "b"));
  EXPECT_FALSE(allowed_after(s, R"(["b",1,)", "1"));
  EXPECT_FALSE(allowed_after(s, R"(["a","b",1)", ","));  // no value left
  const std::string b = R"({"type":"array","items":{"type":"boolean"},"uniqueItems":true})";
  EXPECT_TRUE(schema_matches(b, "[false,true]"));
  EXPECT_FALSE(schema_matches(b, "[true,true]"));
  expect_error(R"({"type":"array","items":{"const":1},"uniqueItems":true,"minItems":2})",
               "no array at # has minItems different values");
}

// uniqueItems over more values than the grammar lists sets of (here 12, mixed types, values
// that share prefixes): the matcher drops a written value's parse at its first byte and the
// ',' once every value is written. Masks read after each prefix, multi-byte tokens too.
const char* kManyValues =
    R"({"type":"array","uniqueItems":true,"items":{"enum":["abc","abd","ab","x",1,12,-1,true,null,)"
    R"({"k":1},[1,2],2.5]}})";

// The byte vocabulary plus tokens that cross an item's start: whitespace-led ones (they walk
// from the whitespace's parse into the item) and a ',' with a whole value.
std::shared_ptr<const TokenVocab> crossing_vocab() {
  std::vector<std::string> pieces{""};
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"abc", "12", "true", "null", " true", " \"abc\"", " 12", ",\"abc\"", ", true", "\"ab", "  "})
    pieces.push_back(p);
  return std::make_shared<const TokenVocab>(std::move(pieces), std::vector<int32_t>{test::kEos});
}

// Whether the mask after `prefix` (single-byte tokens) allows the token spelled `piece`.
bool allowed_with(const std::shared_ptr<const CompiledGrammar>& g, const std::string& prefix,
                  const std::string& piece) {
  Matcher m(g);
  for (unsigned char c : prefix)
    if (!m.advance(1 + c)) throw std::runtime_error("prefix rejected at '" + std::string(1, c) + "': " + prefix);
  std::vector<uint64_t> mask(g->vocab().mask_words());
  m.fill_mask(mask);
  for (int32_t id = 0; id < g->vocab().n_vocab(); ++id)
    if (g->vocab().piece(id) == piece) return (mask[id >> 6] >> (id & 63)) & 1;
  throw std::runtime_error("no token " + piece);
}

TEST(JsonSchema, UniqueItemsOverManyValuesMaskAWrittenValue) {
  const std::string s = kManyValues;
  for (const char* ok : {"[]", R"(["abc","abd","ab"])", R"([1,12,-1,2.5,true,null,{"k":1},[1,2],"x"])"})
    EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {R"(["abc","abc"])", R"([12,1,12])", R"([null,true,null])", R"([{"k":1},{"k":1}])",
                          "[[1,2],[1,2]]", R"(["abe"])", "[2]"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, R"(["x",")", "x"));   // "x is only "x"
  EXPECT_TRUE(allowed_after(s, R"(["abc",")", "a"));  // "abd" and "ab" are left
  EXPECT_FALSE(allowed_after(s, R"(["abc","ab)", "c"));
  EXPECT_TRUE(allowed_after(s, R"(["abc","ab)", "d"));
  EXPECT_FALSE(allowed_after(s, R"(["abc",")", "abc"));  // multi-byte
  EXPECT_FALSE(allowed_after(s, "[true,", "true"));
  EXPECT_TRUE(allowed_after(s, "[true,", "null"));
  EXPECT_FALSE(allowed_after(s, "[12,", "12"));
  EXPECT_TRUE(allowed_after(s, "[12,", "1"));  // 1 is left
  EXPECT_FALSE(allowed_after(s, "[12,1,", "1"));
  EXPECT_TRUE(allowed_after(s, "[12,1,", "-1"));
  EXPECT_FALSE(allowed_after(s, R"([{"k":1},)", "{\""));
  EXPECT_FALSE(allowed_after(s, "[[1,2],", "["));
  EXPECT_FALSE(allowed_after(s, R"(["ab","abd",")", "ab\""));
  EXPECT_TRUE(allowed_after(s, R"(["abd",")", "ab\""));
  // Every value written: no ',' (nothing could follow it), only ']'.
  const std::string all = R"(["abc","abd","ab","x",1,12,-1,true,null,{"k":1},[1,2],2.5)";
  EXPECT_FALSE(allowed_after(s, all, ","));
  EXPECT_TRUE(allowed_after(s, all, "]"));
  EXPECT_TRUE(allowed_after(s, all.substr(0, all.size() - 4), ","));
  // Tokens that cross an item's start: after ',' with whitespace, and a ',' with a value.
  JsonSchemaOptions ws;
  ws.any_whitespace = true;
  const auto g = std::make_shared<const CompiledGrammar>(json_schema_grammar_text(s, ws), crossing_vocab());
  EXPECT_FALSE(allowed_with(g, R"(["abc",)", " \"abc\""));
  EXPECT_TRUE(allowed_with(g, R"(["abd",)", " \"abc\""));
  EXPECT_FALSE(allowed_with(g, "[true,", " true"));
  EXPECT_TRUE(allowed_with(g, "[null,", " true"));
  EXPECT_FALSE(allowed_with(g, "[12, ", "12"));
  EXPECT_FALSE(allowed_with(g, "[12,", " 12"));
  EXPECT_TRUE(allowed_with(g, "[1,", " 12"));
  EXPECT_FALSE(allowed_with(g, R"(["abc")", ",\"abc\""));
  EXPECT_FALSE(allowed_with(g, "[true", ", true"));
  EXPECT_TRUE(allowed_with(g, "[null", ", true"));
  EXPECT_TRUE(allowed_with(g, R"(["abc",)", "\"ab"));  // "ab" and "abd" are left
  EXPECT_FALSE(allowed_with(g, all, ","));             // whitespace could follow it, but no value
  EXPECT_FALSE(allowed_with(g, all + " ", ","));
  // More values than minItems asks for is an error at compile time.
  expect_error(R"({"type":"array","uniqueItems":true,"minItems":10,"items":{"enum":[1,2,3,4,5,6,7,8,9]}})",
               "no array at # has minItems different values");
  // Equal values are one value: 9 written, 8 distinct.
  expect_error(R"({"type":"array","uniqueItems":true,"minItems":9,"items":{"enum":[1,2,3,4,5,6,7,8,8.0]}})",
               "no array at # has minItems different values");
}

// Random walks that favour repeats (the values' first bytes, ',' and whitespace) never meet
// an empty mask, and every finished array has distinct values of the enum; with minItems at
// the number of values, each walk must write every value.
TEST(JsonSchema, UniqueValueWalksNeverRunOutOfTokens) {
  JsonSchemaOptions ws;
  ws.any_whitespace = true;
  const auto base = nlohmann::ordered_json::parse(kManyValues);
  const std::vector<nlohmann::json> values(base["items"]["enum"].begin(), base["items"]["enum"].end());
  for (const bool all : {false, true}) {
    auto schema = base;
    if (all) schema["minItems"] = values.size();
    auto g = std::make_shared<const CompiledGrammar>(json_schema_grammar(schema, ws), crossing_vocab());
    const auto arrays = unique_walks(
        g, [](std::string_view p) { return p.find(']') == std::string_view::npos; }, all ? 11 : 5, 0, 60, 300);
    EXPECT_GT(arrays.size(), 40u) << "all=" << all;
    for (const auto& v : arrays) {
      for (const auto& x : v) EXPECT_NE(std::find(values.begin(), values.end(), x), values.end()) << v.dump();
      if (all) EXPECT_EQ(v.size(), values.size()) << v.dump();
    }
  }
}

// uniqueItems over pattern strings whose every prefix has infinitely many completions (an
// unanchored end, or a last part repeated without bound): a repeat is refused at its closing
// quote, and the string can always grow into a new one.
TEST(JsonSchema, UniqueItemsOverStringsThatAlwaysExtend) {
  const std::string s = R"({"type":"array","uniqueItems":true,"items":{"type":"string","pattern":"^[a-c][a-c0-9]*$"}})";
  for (const char* ok : {R"(["a","ab","b1"])", R"(["abc"])"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {R"(["a","a"])", R"(["ab","b","ab"])", R"(["d"])"})
    EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, R"(["ab","ab)", "\""));
  EXPECT_FALSE(allowed_after(s, R"(["ab","ab)", "\"]"));  // multi-byte
  EXPECT_FALSE(allowed_after(s, R"(["ab","ab)", "\","));
  EXPECT_FALSE(allowed_after(s, R"(["ab",")", "ab\""));
  EXPECT_TRUE(allowed_after(s, R"(["ab","ab)", "c"));
  EXPECT_TRUE(allowed_after(s, R"(["ab","a)", "\"]"));
  // Unanchored: any characters may follow the match; minLength keeps the last part unbounded.
  const std::string u = R"({"type":"array","uniqueItems":true,"items":{"type":"string","pattern":"^x-"}})";
  EXPECT_TRUE(schema_matches(u, R"(["x-","x-a"])"));
  EXPECT_TRUE(allowed_after(u, R"(["x-","x)", "-"));  // "x- can still grow
  EXPECT_FALSE(allowed_after(u, R"(["x-","x-)", "\"]"));
  EXPECT_TRUE(allowed_after(u, R"(["x-","x-)", "ab\""));
  const std::string m =
      R"({"type":"array","uniqueItems":true,"items":{"type":"string","pattern":"^[a-z]+$","minLength":2}})";
  EXPECT_TRUE(schema_matches(m, R"(["ab","abc"])"));
  EXPECT_FALSE(schema_matches(m, R"(["ab","ab"])"));
  // Patterns with a prefix that can only end one way, and length or format limits: refused.
  for (const char* items :
       {R"({"type":"string","pattern":"^(a|b+)$"})", R"({"type":"string","pattern":"^a*b$"})",
        R"({"type":"string","pattern":"^[a-z]{1,3}$"})", R"({"type":"string","pattern":"^[a-z]+$","maxLength":9})",
        R"({"type":"string","format":"date"})"})
    expect_error(std::string(R"({"type":"array","uniqueItems":true,"items":)") + items + "}",
                 "'uniqueItems' over items that may run out of different values (see docs) at #");
}

// Walks over a two-letter pattern that favour closing strings (so repeats are tried often)
// never meet an empty mask, and what they write has no repeated string.
TEST(JsonSchema, UniquePatternWalksNeverRunOutOfTokens) {
  auto g = std::make_shared<const CompiledGrammar>(
      json_schema_grammar_text(
          R"({"type":"array","uniqueItems":true,"minItems":12,"items":{"type":"string","pattern":"^[ab][ab]*$"}})"),
      test::byte_vocab(true));
  auto liked = [](std::string_view p) { return p == "\"" || p == "\"," || p == "a" || p == "b" || p == "ab\""; };
  EXPECT_GT(unique_walks(g, liked, 3, 12).size(), 20u);
}

// uniqueItems over arrays that take any number of further items: a repeat is refused at its
// closing ']', and the array can always grow past every written one.
TEST(JsonSchema, UniqueItemsOverArraysThatCanGrow) {
  const std::string s =
      R"({"type":"array","uniqueItems":true,"items":{"type":"array","items":{"type":"integer","minimum":0,"maximum":1}}})";
  for (const char* ok : {"[[],[0],[0,1],[1,0]]", "[[0,0],[0]]"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {"[[],[]]", "[[0,1],[1],[0,1]]", "[[2]]"}) EXPECT_FALSE(schema_matches(s, bad)) << bad;
  EXPECT_FALSE(allowed_after(s, "[[0],[0", "]"));
  EXPECT_FALSE(allowed_after(s, "[[0],[0", "],"));  // multi-byte
  EXPECT_TRUE(allowed_after(s, "[[0],[0", ","));
  EXPECT_FALSE(allowed_after(s, "[[],[", "]"));
  EXPECT_TRUE(allowed_after(s, "[[0],[1", "],"));
  // Arrays that may run out of new values: refused.
  for (const char* items : {R"({"type":"array","maxItems":3})", R"({"type":"array","items":false})",
                            R"({"type":"array","uniqueItems":true,"items":{"type":"boolean"}})",
                            R"({"type":"array","prefixItems":[{"type":"null"}],"items":false})"})
    expect_error(std::string(R"({"type":"array","uniqueItems":true,"items":)") + items + "}",
                 "'uniqueItems' over items that may run out of different values (see docs) at #");
}

// Walks that favour short inner arrays of two values (so repeats are tried often) never meet
// an empty mask, and what they write has no repeated array.
TEST(JsonSchema, UniqueArrayWalksNeverRunOutOfTokens) {
  auto g = std::make_shared<const CompiledGrammar>(
      json_schema_grammar_text(R"({"type":"array","uniqueItems":true,"minItems":10,)"
                               R"("items":{"type":"array","items":{"enum":[0,1]}}})"),
      test::byte_vocab(true));
  auto liked = [](std::string_view p) { return p == "]" || p == "]," || p == "[" || p == "0" || p == ","; };
  EXPECT_GT(unique_walks(g, liked, 9, 10).size(), 20u);
}

// An array without uniqueItems beside a unique one keeps its repeats (the matcher's checks
// apply to unique arrays only), and is never left without a token.
TEST(JsonSchema, ArraysWithoutUniqueItemsBesideAUniqueOneKeepRepeats) {
  const std::string s =
      R"({"type":"object","properties":{"u":{"type":"array","items":{"type":"integer"},)"
      R"("uniqueItems":true},"v":{"type":"array","items":{"type":"integer","minimum":0,"maximum":0}},)"
      R"("w":{"type":"array","items":{"type":"string"}}}})";
  for (const char* ok : {R"({"v":[0,0]})", R"({"w":["a","a"]})", R"({"u":[0,1],"v":[0,0,0]})"})
    EXPECT_TRUE(schema_matches(s, ok)) << ok;
  EXPECT_FALSE(schema_matches(s, R"({"u":[0,0]})"));
  EXPECT_TRUE(allowed_after(s, R"({"v":[0,)", "0"));
}

// Rollback returns the tracker to the earlier text too.
TEST(JsonSchema, UniqueItemsSurviveRollback) {
  auto vocab = test::byte_vocab(false);
  Matcher m(std::make_shared<const CompiledGrammar>(
      json_schema_grammar_text(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})"), vocab));
  for (unsigned char c : std::string(R"(["a","b)")) ASSERT_TRUE(m.advance(1 + c));
  ASSERT_TRUE(m.advance(1 + '"'));
  m.rollback(2);  // back to ["a","
  ASSERT_TRUE(m.advance(1 + 'a'));
  EXPECT_FALSE(m.accepts(1 + '"'));
  m.rollback(1);
  ASSERT_TRUE(m.advance(1 + 'c'));
  EXPECT_TRUE(m.accepts(1 + '"'));
  // The array known unique from its first ',' stays so after a rollback (0 once 0 is written).
  Matcher n(std::make_shared<const CompiledGrammar>(
      json_schema_grammar_text(R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})"), vocab));
  for (unsigned char c : std::string("[0,1")) ASSERT_TRUE(n.advance(1 + c));
  n.rollback(1);
  EXPECT_FALSE(n.accepts(1 + '0'));
  EXPECT_TRUE(n.accepts(1 + '2'));
}

}  // namespace
}  // namespace sluice::grammar
