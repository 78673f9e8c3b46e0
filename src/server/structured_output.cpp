#include "server/structured_output.h"

#include "base/error.h"
#include "grammar/compiled.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace sluice::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

bool present(const ordered_json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

// Where the request's schema is: the pointer into the body, the parameter name for errors.
struct SchemaAt {
  std::string pointer;  // JSON pointer into the body ("" for json_object: any object)
  std::string param;
  bool lenient = false;  // "strict": false — unsupported assertions dropped, not refused
};

// Checks response_format's shape; returns where its schema is, or nullopt for "text".
std::optional<SchemaAt> response_format_schema(const ordered_json& rf) {
  if (!rf.is_object() || !rf.contains("type") || !rf.at("type").is_string())
    bad_param("response_format", "must be an object with a string 'type'");
  const std::string& type = rf.at("type").get_ref<const std::string&>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return SchemaAt{"", "response_format"};
  if (type != "json_schema")
    bad_param("response_format", "unknown type '" + type + "' (text, json_object, json_schema)");
  if (!rf.contains("json_schema") || !rf.at("json_schema").is_object())
    bad_param("response_format", "type json_schema needs a 'json_schema' object");
  const ordered_json& js = rf.at("json_schema");
  if (js.contains("name") && !js.at("name").is_string())
    bad_param("response_format.json_schema.name", "must be a string");
  if (js.contains("strict") && !js.at("strict").is_boolean() && !js.at("strict").is_null())
    bad_param("response_format.json_schema.strict", "must be true or false");
  // No schema: any JSON object, as with json_object.
  if (!present(js, "schema")) return SchemaAt{"", "response_format.json_schema.schema"};
  if (!js.at("schema").is_object() && !js.at("schema").is_boolean())
    bad_param("response_format.json_schema.schema", "must be a JSON Schema object");
  const bool lenient = js.contains("strict") && js.at("strict").is_boolean() && !js.at("strict").get<bool>();
  return SchemaAt{"/response_format/json_schema/schema", "response_format.json_schema.schema", lenient};
}

std::shared_ptr<const grammar::CompiledGrammar> compile_schema(const ordered_json& body, const SchemaAt& at,
                                                               const ModelContext& m) {
  static const ordered_json kAnyObject = ordered_json{{"type", "object"}};
  const ordered_json& schema = at.pointer.empty() ? kAnyObject : body.at(ordered_json::json_pointer(at.pointer));
  grammar::JsonSchemaOptions opts;
  opts.lenient = at.lenient;
  try {
    // The cache key holds the schema's text, so its size is known before any compiling.
    const std::string key = grammar::json_schema_cache_key(schema, opts);
    return m.grammars().get(key, [&] { return grammar::json_schema_grammar(schema, opts); });
  } catch (const Error& e) {
    throw ApiError(400, at.param + ": " + e.what(), "invalid_request_error", at.param);
  }
}

// A token terminal naming an end-of-generation token would let the mask allow a token that
// ends the request before the grammar is complete: refused while compiling, not at run time.
void refuse_end_tokens(const grammar::Grammar& g, const Tokenizer& tok) {
  for (const grammar::Elem& e : g.elems)
    if (e.kind == grammar::Elem::kToken && tok.is_eog(static_cast<int32_t>(e.arg)))
      fail(
          "the token terminal <[%u]> is an end-of-generation token: generation stops there, so a grammar cannot "
          "name it (end the grammar instead)",
          e.arg);
}

}  // namespace

std::shared_ptr<const grammar::CompiledGrammar> parse_structured_output(const ordered_json& j, const ModelContext& m) {
  std::optional<SchemaAt> schema;
  int n_given = 0;
  if (present(j, "response_format")) {
    schema = response_format_schema(j.at("response_format"));
    n_given += schema ? 1 : 0;
  }
  if (present(j, "json_schema")) {
    if (!j.at("json_schema").is_object()) bad_param("json_schema", "must be a JSON Schema object");
    schema = SchemaAt{"/json_schema", "json_schema"};
    ++n_given;
  }
  if (present(j, "grammar")) {
    if (!j.at("grammar").is_string()) bad_param("grammar", "must be a string of GBNF text");
    ++n_given;
  }
  if (n_given > 1) bad_param("grammar", "give at most one of response_format (json), json_schema and grammar");
  if (schema) return compile_schema(j, *schema, m);
  if (!present(j, "grammar")) return nullptr;
  const std::string& text = j.at("grammar").get_ref<const std::string&>();
  try {
    return m.grammars().get("gbnf:" + text, [&] {
      grammar::Grammar g = grammar::gbnf_grammar(text);
      refuse_end_tokens(g, m.tokenizer());
      return g;
    });
  } catch (const Error& e) {
    throw ApiError(400, std::string("grammar: ") + e.what(), "invalid_request_error", "grammar");
  }
}

std::vector<std::string> dropped_warnings(const grammar::CompiledGrammar& g) {
  std::vector<std::string> out;
  for (const std::string& w : g.grammar().warnings) out.push_back("schema: dropped " + w);
  return out;
}

void add_dropped_header(std::vector<std::pair<std::string, std::string>>& headers, const grammar::CompiledGrammar* g) {
  if (!g || g->grammar().warnings.empty()) return;
  std::string v;
  for (const std::string& w : g->grammar().warnings) {
    if (!v.empty()) v += "; ";
    for (char c : w) v += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  headers.emplace_back("X-Sluice-Schema-Dropped", v);
}

}  // namespace sluice::server
