// One request's n choices in flight, seen from the HTTP thread: submits them to the engine,
// then turns each choice's token outputs into text deltas (ChoiceText), logprob items and
// finish reasons. Destroying it cancels every choice that has not finished.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/engine.h"
#include "chat/tools.h"
#include "server/choice_text.h"
#include "server/model_context.h"
#include "server/openai_request.h"

namespace sluice::server {

struct LogprobItem {
  int32_t token = 0;
  float logprob = 0;
  std::vector<api::TokenLogprob> top;
};

struct ChoiceEvent {
  int32_t index = 0;
  TextDelta text;
  std::vector<LogprobItem> logprobs;
  std::optional<std::string> finish_reason;  // "stop" | "length" | "tool_calls" on the choice's last event
  bool aborted = false;                      // the engine ended it (shutting down)
  std::optional<std::string> error;          // generation failed (a grammar, the engine step): why
};

// What a chat request with tools adds to its generation.
struct ToolGeneration {
  std::optional<chat::ToolFormat> format;  // parse calls in this format out of the content
  bool single_call = false;                // parallel_tool_calls false: a choice ends after its first call
  chat::ToolConstraint constraint;         // tool_choice enforced by a grammar, banned opener
  bool incremental = false;                // stream arguments as they come (Gemma 4's native calls)
};

// llama-server's per-request `timings`, measured on the HTTP thread as outputs arrive:
// prompt_ms from submission to the first generated token (queueing and prefill), predicted_ms
// from there to the last output; prompt_n counts the prompt tokens computed (cache hits
// excluded). Drafts are summed over the request's choices.
struct GenerationTimings {
  int32_t prompt_n = 0;
  double prompt_ms = 0;
  int64_t predicted_n = 0;
  double predicted_ms = 0;
  int64_t draft_n = 0, draft_n_accepted = 0;
};

class Generation {
 public:
  // Queues all n choices at once or none. Throws ApiError: 400 (prompt too long for the
  // context or the KV memory, bad sampling values, n above what the server can ever hold),
  // 429 (no room in the waiting queue for all n now), 503 (shutting down).
  // `soft`: the prompt's image rows (server/content_parts.h), or null.
  Generation(api::Engine& engine, const ModelContext& m, std::vector<int32_t> prompt, const GenerationParams& p,
             bool split_reasoning, const ToolGeneration& tools = {},
             std::shared_ptr<const api::SoftTokens> soft = nullptr);
  ~Generation();

  // Waits up to `timeout` for outputs of any choice; returns the events they made.
  std::vector<ChoiceEvent> poll(std::chrono::milliseconds timeout);
  bool done() const { return n_alive_ == 0; }
  void cancel_all();

  int32_t n_prompt() const { return n_prompt_; }
  int32_t n_cached() const { return n_cached_; }
  int64_t n_completion_tokens() const { return n_completion_; }
  int32_t n_choices() const { return static_cast<int32_t>(choices_.size()); }
  GenerationTimings timings() const;  // meaningful once done()

 private:
  struct Choice {
    std::unique_ptr<api::RequestHandle> handle;
    std::unique_ptr<ChoiceText> text;
    bool finished = false;
    int32_t n_calls = 0;
    std::string first_call;  // id of the first call (parallel_tool_calls false: the only one)
    bool first_done = false;
    int32_t n_drafted = 0, n_accepted = 0;
  };
  void absorb(int32_t index, std::vector<api::TokenOutput>& outs, std::vector<ChoiceEvent>& events);

  std::vector<Choice> choices_;
  int32_t n_alive_ = 0, n_prompt_ = 0, n_cached_ = 0;
  int64_t n_completion_ = 0;
  bool want_logprobs_ = false;
  bool single_call_ = false;
  std::chrono::steady_clock::time_point t_submit_, t_first_, t_done_;
};

}  // namespace sluice::server
