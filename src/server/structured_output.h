// The structured-output parameters of /v1/completions and /v1/chat/completions, compiled into
// a grammar the engine enforces while decoding (docs/structured-output.md):
//   response_format  {"type": "text" | "json_object" | "json_schema",
//                     "json_schema": {"name": ..., "schema": {...}, "strict": ...}}  (OpenAI)
//   json_schema      a schema object at the top level                      (llama-server)
//   grammar          GBNF text                                             (llama-server)
// At most one of them constrains a request. `strict: false` compiles leniently: assertions the
// grammar cannot enforce are dropped and listed in the grammar's warnings, which the reply
// reports (a "warnings" field and an X-Sluice-Schema-Dropped header). Compiled grammars are cached per model by the
// schema's canonical text (or the GBNF text). Every problem — an unsupported keyword, a limit,
// a GBNF syntax error — is a 400 naming the parameter and, from the grammar module, the
// keyword or limit.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/model_context.h"

namespace sluice::grammar {
class CompiledGrammar;
}

namespace sluice::server {

// Null when the request asks for no constraint. `j` is the body as parse_body read it, keys in
// document order (property order decides the output's).
std::shared_ptr<const grammar::CompiledGrammar> parse_structured_output(const nlohmann::ordered_json& j,
                                                                        const ModelContext& m);

// What a lenient compile dropped, as "schema: dropped <assertion> at <pointer>" lines.
std::vector<std::string> dropped_warnings(const grammar::CompiledGrammar& g);
// Adds X-Sluice-Schema-Dropped (the dropped assertions, "; "-separated, printable ASCII)
// when `g` dropped any.
void add_dropped_header(std::vector<std::pair<std::string, std::string>>& headers, const grammar::CompiledGrammar* g);

}  // namespace sluice::server
