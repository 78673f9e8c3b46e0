#include "server/openai_responses.h"

#include "base/random_id.h"
#include "server/api_error.h"

namespace sluice::server {

using nlohmann::json;

std::string new_response_id(const char* prefix) { return random_id(prefix); }

json usage_json(const Generation& g) {
  return {{"prompt_tokens", g.n_prompt()},
          {"completion_tokens", g.n_completion_tokens()},
          {"total_tokens", g.n_prompt() + g.n_completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", g.n_cached()}}}};
}

json timings_json(const Generation& g) {
  const GenerationTimings t = g.timings();
  auto per_second = [](double n, double ms) { return ms > 0 ? n * 1e3 / ms : 0.0; };
  return {{"prompt_n", t.prompt_n},
          {"prompt_ms", t.prompt_ms},
          {"prompt_per_second", per_second(t.prompt_n, t.prompt_ms)},
          {"predicted_n", t.predicted_n},
          {"predicted_ms", t.predicted_ms},
          {"predicted_per_second", per_second(static_cast<double>(t.predicted_n), t.predicted_ms)},
          {"draft_n", t.draft_n},
          {"draft_n_accepted", t.draft_n_accepted}};
}

static json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json chat_logprobs_json(const std::vector<LogprobItem>& items, const Tokenizer& tok) {
  json content = json::array();
  for (const LogprobItem& it : items) {
    const std::string piece = tok.token_to_piece(it.token, true);
    json top = json::array();
    for (const auto& t : it.top) {
      const std::string p = tok.token_to_piece(t.token, true);
      top.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}});
    }
    content.push_back({{"token", piece}, {"logprob", it.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs_json(const std::vector<LogprobItem>& items, const Tokenizer& tok, int64_t text_offset0) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  int64_t off = text_offset0;
  for (const LogprobItem& it : items) {
    const std::string piece = tok.token_to_piece(it.token, true);
    tokens.push_back(piece);
    lps.push_back(it.logprob);
    json top = json::object();
    for (const auto& t : it.top) top[tok.token_to_piece(t.token, true)] = t.logprob;
    tops.push_back(top);
    offsets.push_back(off);
    off += static_cast<int64_t>(piece.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::string sse_data(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

}  // namespace sluice::server
