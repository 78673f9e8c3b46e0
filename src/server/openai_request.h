// OpenAI request bodies → native, validated structs (the only place request JSON is read).
// Every problem is an ApiError naming the parameter; nothing here touches the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_read.h"
#include "chat/tools.h"
#include "server/audio_parts.h"
#include "server/content_parts.h"
#include "server/model_context.h"

namespace sluice::grammar {
class CompiledGrammar;
}

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
  // Structured output (server/structured_output.h): the grammar every choice must follow,
  // from the token after `grammar_trigger` when set (the end of the thought channel).
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::optional<int32_t> grammar_trigger;
  // "speculative": {"n_max": K} (or the flat "speculative.n_max"): at most K drafts a step
  // for this request, clamped to the server's --draft-max; 0, false or {"enabled": false}:
  // none. Unset: the server's setting.
  std::optional<int32_t> draft_max;
};

struct CompletionRequest {
  std::vector<int32_t> prompt;  // token ids (text prompts are tokenized here, with BOS)
  GenerationParams gen;
};

// The tools a chat request offers, in chat/'s types (the format turns them into prompt text,
// grammars and parsed calls).
using chat::ToolChoice;
using chat::ToolsParams;
using chat::ToolSpec;

struct ChatRequest {
  // normalized: [{role, content: string}], developer -> system; a user message with images has
  // content [{type: "text", text} | {type: "image"}] (as the chat templates read it), its
  // images in `images`, in order; assistant messages may carry
  // tool_calls [{id, type, function: {name, arguments: object}}]; tool messages
  // {role: "tool", tool_call_id, name, content: string}.
  nlohmann::json messages;
  std::vector<ImagePart> images;  // every image part, in the order the messages give them
  std::vector<AudioPart> audio;   // every input_audio part (content {type: "audio"}), in order
  ToolsParams tools;
  nlohmann::json template_kwargs;  // chat_template_kwargs, enable_thinking defaulted to false
  bool enable_thinking = false;
  GenerationParams gen;
};

inline constexpr int32_t kMaxN = 16;
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr size_t kMaxStops = 16;
inline constexpr size_t kMaxTools = 128;

// Parses the body text once, keys in document order (400 on bad JSON, on a limit of
// request_json_limits(), or a body that is not an object) and checks the model name (404 for
// another model). Every consumer of the request reads this value.
nlohmann::ordered_json parse_body(const std::string& body, const ModelContext& m, bool need_model);

// A prompt whose text alone makes at least the context's worth of tokens: 400
// context_length_exceeded before it is tokenized (the engine's admission says the same after).
void check_prompt_bytes(size_t bytes, const ModelContext& m);

CompletionRequest parse_completion_request(const nlohmann::ordered_json& j, const ModelContext& m);
ChatRequest parse_chat_request(nlohmann::ordered_json&& j, const ModelContext& m);

}  // namespace sluice::server
