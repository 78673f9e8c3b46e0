// JSON shapes of OpenAI responses: whole completions, stream chunks, logprobs, usage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace sluice::server {

struct ResponseMeta {
  std::string id;  // one id for every chunk of a response
  int64_t created = 0;
  std::string model;
};

std::string new_response_id(const char* prefix);  // prefix + 24 random hex digits

nlohmann::json usage_json(const Generation& g);
// llama-server's `timings`: prompt_n, prompt_ms, prompt_per_second, predicted_n, predicted_ms,
// predicted_per_second, draft_n, draft_n_accepted.
nlohmann::json timings_json(const Generation& g);
// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}
nlohmann::json chat_logprobs_json(const std::vector<LogprobItem>& items, const Tokenizer& tok);
// Completions: {tokens, token_logprobs, top_logprobs: [{text: lp}], text_offset}
nlohmann::json completion_logprobs_json(const std::vector<LogprobItem>& items, const Tokenizer& tok,
                                        int64_t text_offset0);

std::string sse_data(const nlohmann::json& j);  // "data: {...}\n\n"

}  // namespace sluice::server
