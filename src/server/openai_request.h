// OpenAI request bodies → native, validated structs (the only place request JSON is read).
// Every problem is an ApiError naming the parameter; nothing here touches the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/model_context.h"

namespace sluice::server {

// What /v1/completions and /v1/chat/completions share.
struct GenerationParams {
  SamplingParams sampling;  // request values over GGUF defaults over OpenAI defaults
  bool seed_given = false;
  std::optional<int32_t> max_tokens;  // max_completion_tokens, else max_tokens
  int32_t min_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;
  int32_t top_logprobs = -1;  // -1: no logprobs
  // "speculative": {"n_max": K} (or the flat "speculative.n_max"): at most K drafts a step
  // for this request, clamped to the server's --draft-max; 0, false or {"enabled": false}:
  // none. Unset: the server's setting.
  std::optional<int32_t> draft_max;
};

struct CompletionRequest {
  std::vector<int32_t> prompt;  // token ids (text prompts are tokenized here, with BOS)
  GenerationParams gen;
};

struct ChatRequest {
  nlohmann::json messages;         // normalized: [{role, content: string}], developer -> system
  nlohmann::json template_kwargs;  // chat_template_kwargs, enable_thinking defaulted to false
  bool enable_thinking = false;
  GenerationParams gen;
};

inline constexpr int32_t kMaxN = 16;
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr size_t kMaxStops = 16;
inline constexpr int kMaxJsonDepth = 128;  // arrays and objects in a request body, the body itself included

// Parses the body text (400 on bad JSON, on nesting deeper than kMaxJsonDepth, or a body
// that is not an object) and checks the model name (404 for another model).
nlohmann::json parse_body(const std::string& body, const ModelContext& m, bool need_model);

CompletionRequest parse_completion_request(const nlohmann::json& j, const ModelContext& m);
// Takes the body by rvalue: chat_template_kwargs is moved out of it, never copied.
ChatRequest parse_chat_request(nlohmann::json&& j, const ModelContext& m);

}  // namespace sluice::server
