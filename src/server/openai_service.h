// The endpoints, independent of the HTTP library: each takes the request body and returns a
// Reply — a whole body, or a stream function the HTTP layer calls once the headers are out.
//
//   POST /v1/completions, /v1/chat/completions   (stream or not; n choices)
//   POST /v1/audio/transcriptions                (multipart; stream or not)
//   GET  /v1/models, /v1/models/{id}
//   POST /tokenize, /detokenize
//   GET  /health, /ready, /metrics
//   POST /v1/completions/render, /v1/chat/completions/render   (token ids, no generation)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/engine.h"
#include "server/lifecycle.h"
#include "server/metrics.h"
#include "server/model_context.h"

namespace sluice::server {

// Writes bytes to the client; false once the client is gone (the stream must then end).
using StreamWriter = std::function<bool(std::string_view)>;

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::function<void(const StreamWriter&)> stream;  // set: body is streamed as SSE
};

class Generation;
struct GenerationParams;
struct ChatRequest;

// What differs between the two generation endpoints' replies; the collect-or-stream path
// (OpenAiService::respond) is shared.
struct ReplyShape {
  bool chat;
  const char* id_prefix;     // "cmpl-" | "chatcmpl-"
  const char* object;        // the whole reply's object
  const char* chunk_object;  // stream chunks' object, the usage chunk's too
};
inline constexpr ReplyShape kCompletionShape{false, "cmpl-", "text_completion", "text_completion"};
inline constexpr ReplyShape kChatShape{true, "chatcmpl-", "chat.completion", "chat.completion.chunk"};

// What the HTTP layer knows of a request besides its body.
struct RequestMeta {
  std::string session_id;    // X-Session-ID, sanitized; echoed in the reply and logged
  std::string content_type;  // the body's (multipart/form-data for transcriptions)
};

class OpenAiService {
 public:
  OpenAiService(api::Engine& engine, const ModelContext& model, Metrics& metrics);

  // Generation: admitted only while lifecycle().admitting() (else 503 + Retry-After).
  Reply completions(const std::string& body, const RequestMeta& meta = {});
  Reply chat_completions(const std::string& body, const RequestMeta& meta = {});
  // POST /v1/audio/transcriptions (server/transcribe.h): a multipart form with the audio file.
  Reply transcriptions(const std::string& body, const RequestMeta& meta = {});
  // vLLM's render endpoints, which llm-d's tokenizer calls: the prompt token ids a generation
  // request would get, without generating (the model name is not checked: routers send their
  // own). Completions: [{"request_id", "model", "token_ids"}]; chat: one such object.
  Reply render_completions(const std::string& body);
  Reply render_chat(const std::string& body);
  // llama-server's POST /apply-template: the chat prompt a request would get, {"prompt": text}.
  Reply apply_template(const std::string& body);
  Reply models() const;
  Reply model(const std::string& id) const;
  Reply tokenize(const std::string& body) const;
  Reply detokenize(const std::string& body) const;
  Reply health() const;
  Reply ready() const;  // 200 once warm, 503 while starting or draining (lifecycle.h)
  Reply metrics() const;
  const ModelContext& model_context() const { return model_; }
  Lifecycle& lifecycle() { return lifecycle_; }

  // An ApiError (or any exception) as a JSON reply with its status.
  static Reply error_reply(int status, const std::string& message, const std::string& type = "invalid_request_error");

 private:
  template <class Fn>
  Reply guarded(const char* endpoint, Fn&& fn);
  // The reply for a generation that is running: collected whole, or a stream.
  Reply respond(std::shared_ptr<Generation> gen, const GenerationParams& gp, const ReplyShape& shape);
  // The chat prompt: tools and tool messages shaped for the template (chat/tool_prompt.h), rendered.
  std::string render_prompt(ChatRequest& req) const;
  // Runs a generation endpoint if requests are admitted; its reply (a stream too) holds an
  // admission token until it is complete.
  template <class Fn>
  Reply admitted(const char* endpoint, Fn&& fn);
  Reply run_completions(const std::string& body, const RequestMeta& meta);
  Reply run_chat(const std::string& body, const RequestMeta& meta);
  Reply not_ready(const char* what) const;

  api::Engine& engine_;
  const ModelContext& model_;
  Metrics& metrics_;
  Lifecycle lifecycle_;
};

}  // namespace sluice::server
