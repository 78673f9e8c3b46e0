#include "server/openai_service.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "base/error.h"
#include "chat/tool_grammar.h"
#include "chat/tool_prompt.h"
#include "grammar/compiled.h"
#include "server/api_error.h"
#include "server/audio_parts.h"
#include "server/content_parts.h"
#include "server/generation.h"
#include "server/openai_request.h"
#include "server/openai_responses.h"
#include "server/schema_precheck.h"
#include "server/structured_output.h"
#include "server/transcribe.h"

namespace sluice::server {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

Reply json_reply(const json& j, int status = 200) {
  Reply r;
  r.status = status;
  r.body = dump_json(j);
  return r;
}

// A fresh grammar's deferred positions are analysed before the request reaches the engine, on
// the grammar cache's low-priority worker while this request waits: the engine's step, which
// every stream waits for, then meets few positions to analyse first, and the analysis takes
// only the CPU the engine leaves. Past the budget (thread CPU time) the rest is left to first use.
constexpr double kGrammarWarmMs = 1000;

void warm(const ModelContext& model, const std::shared_ptr<const grammar::CompiledGrammar>& g) {
  if (g) model.grammars().warm(g, kGrammarWarmMs);
}

Reply json_reply_text(std::string body) {
  Reply r;
  r.body = std::move(body);
  return r;
}

// /tokenize and /detokenize answer for at most a context's worth of tokens: the reply grows
// with the count (up to ~30 bytes a token with pieces), so the count is what bounds it.
void check_token_count(const char* param, size_t n, int32_t ctx_size) {
  if (n > static_cast<size_t>(ctx_size))
    bad_param(param, std::to_string(n) + " tokens, over the limit of " + std::to_string(ctx_size) +
                         " (the server's context size) a request may tokenize or detokenize");
}

// {"tokens":[ids]} or {"tokens":[{"id":..,"piece":..}]}, written straight into the reply text
// (the same bytes dump_json writes for that value, without a value per token).
std::string tokens_json(const std::vector<int32_t>& ids, const Tokenizer* pieces) {
  std::string out = "{\"tokens\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    if (!pieces) {
      out += std::to_string(ids[i]);
      continue;
    }
    out += "{\"id\":" + std::to_string(ids[i]) + ",\"piece\":";
    out += dump_json(json(pieces->token_to_piece(ids[i], true)));
    out += '}';
  }
  out += "]}";
  return out;
}

Reply api_error_reply(const ApiError& e) {
  Reply r = json_reply(e.to_json(), e.status());
  if (e.status() == 429) r.headers.emplace_back("Retry-After", "1");
  return r;
}

// A stream that ends badly (engine shutdown, failed step): an error event, as OpenAI's
// servers send one; the SDK raises it as an APIError.
std::string sse_error(const std::string& message) {
  return sse_data(
      json{{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
}

constexpr auto kPoll = 1000ms;  // with no output for this long (queued, a long prefill), a stream
                                // writes a `: ping` comment: proxies see bytes, and a vanished
                                // client is noticed
constexpr const char* kEndedByServer = "the request was ended by the server (shutting down)";

// A generation that failed (a grammar or the engine step): 500 naming the cause.
std::string failed_message(const std::string& why) { return "generation failed: " + why; }

json envelope(const ResponseMeta& m, const char* object, json choices) {
  return {{"id", m.id},
          {"object", object},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "sluice"},
          {"choices", std::move(choices)}};
}

// One choice's whole output, for a reply that is not streamed.
struct Collected {
  std::string content, reasoning, finish = "stop";
  std::vector<LogprobItem> logprobs;
  std::vector<ToolCall> calls;
};

std::vector<Collected> collect(Generation& gen) {
  std::vector<Collected> got(gen.n_choices());
  bool aborted = false;
  std::optional<std::string> error;
  while (!gen.done())
    for (ChoiceEvent& ev : gen.poll(kPoll)) {
      Collected& c = got[ev.index];
      c.content += ev.text.content;
      c.reasoning += ev.text.reasoning;
      for (const ToolCall& t : ev.text.tool_calls) {
        if (t.first || c.calls.empty()) c.calls.push_back(t);
        else c.calls.back().arguments += t.arguments;  // calls do not interleave
      }
      c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
      if (ev.finish_reason) c.finish = *ev.finish_reason;
      aborted |= ev.aborted;
      if (ev.error && !error) error = ev.error;
    }
  if (error) throw ApiError(500, failed_message(*error), "server_error");
  if (aborted) throw ApiError(503, kEndedByServer, "server_error");
  return got;
}

json whole_choice(const Collected& c, int32_t index, const ReplyShape& shape, const GenerationParams& gp,
                  const Tokenizer& tok) {
  const bool lp = gp.top_logprobs >= 0;
  if (!shape.chat)
    return {{"index", index},
            {"text", c.content},
            {"logprobs", lp ? completion_logprobs_json(c.logprobs, tok, 0) : json(nullptr)},
            {"finish_reason", c.finish}};
  json msg = {{"role", "assistant"}, {"content", c.content}};
  if (!c.reasoning.empty()) msg["reasoning_content"] = c.reasoning;
  if (!c.calls.empty()) {
    if (c.content.empty()) msg["content"] = nullptr;
    msg["tool_calls"] = json::array();
    for (const ToolCall& t : c.calls)
      msg["tool_calls"].push_back(
          {{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
  }
  return {{"index", index},
          {"message", std::move(msg)},
          {"logprobs", lp ? chat_logprobs_json(c.logprobs, tok) : json(nullptr)},
          {"finish_reason", c.finish}};
}

// A streamed tool call, as OpenAI sends one: a delta with its index, id, type, name and empty
// arguments, then the arguments in one or more fragments.
void tool_call_deltas(const std::vector<ToolCall>& calls, int32_t index, int32_t& n_calls, std::vector<json>& out) {
  auto chunk = [&](json call) {
    out.push_back({{"index", index},
                   {"delta", {{"tool_calls", json::array({std::move(call)})}}},
                   {"logprobs", nullptr},
                   {"finish_reason", nullptr}});
  };
  for (const ToolCall& t : calls) {
    if (t.first)
      chunk({{"index", n_calls++},
             {"id", t.id},
             {"type", "function"},
             {"function", {{"name", t.name}, {"arguments", ""}}}});
    if (!t.arguments.empty()) chunk({{"index", n_calls - 1}, {"function", {{"arguments", t.arguments}}}});
  }
}

// The stream chunks' choices one event becomes. Completions: one, the finish reason inline.
// Chat: a delta when there is text or logprobs, the tool calls, then the finish reason in a
// chunk of its own.
std::vector<json> delta_choices(const ChoiceEvent& ev, const ReplyShape& shape, const GenerationParams& gp,
                                const Tokenizer& tok, int64_t& text_offset, int32_t& n_calls) {
  const bool lp = gp.top_logprobs >= 0 && !ev.logprobs.empty();
  const json finish = ev.finish_reason ? json(*ev.finish_reason) : json(nullptr);
  std::vector<json> out;
  if (!shape.chat) {
    out.push_back({{"index", ev.index},
                   {"text", ev.text.content},
                   {"logprobs", lp ? completion_logprobs_json(ev.logprobs, tok, text_offset) : json(nullptr)},
                   {"finish_reason", finish}});
    text_offset += static_cast<int64_t>(ev.text.content.size());
    return out;
  }
  json delta = json::object();
  if (!ev.text.reasoning.empty()) delta["reasoning_content"] = ev.text.reasoning;
  if (!ev.text.content.empty()) delta["content"] = ev.text.content;
  if (!delta.empty() || lp)
    out.push_back({{"index", ev.index},
                   {"delta", std::move(delta)},
                   {"logprobs", lp ? chat_logprobs_json(ev.logprobs, tok) : json(nullptr)},
                   {"finish_reason", nullptr}});
  tool_call_deltas(ev.text.tool_calls, ev.index, n_calls, out);
  if (ev.finish_reason)
    out.push_back({{"index", ev.index}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}});
  return out;
}

// Who a request is for, when the client said so (X-Session-ID, the body's `user`): one log line,
// so a session's requests can be followed across replicas. Values are printed as JSON strings.
void log_session(const char* endpoint, const RequestMeta& meta, const nlohmann::ordered_json& body) {
  const auto user = body.is_object() ? body.find("user") : body.end();
  const bool has_user = user != body.end() && user->is_string();
  if (meta.session_id.empty() && !has_user) return;
  std::fprintf(stderr, "sluice serve: %s session=%s user=%s\n", endpoint, json(meta.session_id).dump().c_str(),
               has_user ? user->dump(-1, ' ', true, json::error_handler_t::replace).c_str() : "null");
}

}  // namespace

OpenAiService::OpenAiService(api::Engine& engine, const ModelContext& model, Metrics& metrics)
    : engine_(engine), model_(model), metrics_(metrics) {}

Reply OpenAiService::error_reply(int status, const std::string& message, const std::string& type) {
  return api_error_reply(ApiError(status, message, type));
}

template <class Fn>
Reply OpenAiService::guarded(const char* endpoint, Fn&& fn) {
  Reply r;
  try {
    r = fn();
  } catch (const ApiError& e) {
    r = api_error_reply(e);
  } catch (const chat::ToolError& e) {  // tools or tool messages the chat format cannot take
    r = api_error_reply(ApiError(400, e.message(), "invalid_request_error", e.param()));
  } catch (const Error& e) {  // tokenizer, template: the input was at fault
    r = api_error_reply(ApiError(400, e.what()));
  } catch (const std::exception& e) {
    r = api_error_reply(ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
  metrics_.count_request(endpoint, r.status);
  return r;
}

template <class Fn>
Reply OpenAiService::admitted(const char* endpoint, Fn&& fn) {
  std::shared_ptr<void> token = lifecycle_.enter();
  if (!token) {
    metrics_.count_request(endpoint, 503);
    Reply r = error_reply(503, "the server is shutting down; send the request to another replica", "server_error");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  Reply r = fn();
  if (r.stream) r.stream = [inner = std::move(r.stream), token](const StreamWriter& w) { inner(w); };
  return r;
}

Reply OpenAiService::not_ready(const char* what) const {
  const bool starting = lifecycle_.state() == Lifecycle::State::kStarting;
  Reply r = error_reply(503,
                        std::string(what) + (starting ? ": the model is still warming up" : ": the server is draining"),
                        "server_error");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

Reply OpenAiService::completions(const std::string& body, const RequestMeta& meta) {
  return admitted("/v1/completions", [&] { return run_completions(body, meta); });
}

Reply OpenAiService::run_completions(const std::string& body, const RequestMeta& meta) {
  return guarded("/v1/completions", [&]() -> Reply {
    refuse_oversized_schema(body, model_);  // before any value is built
    const nlohmann::ordered_json j = parse_body(body, model_, true);
    log_session("/v1/completions", meta, j);
    CompletionRequest req = parse_completion_request(j, model_);
    req.gen.grammar = parse_structured_output(j, model_);
    warm(model_, req.gen.grammar);
    auto gen = std::make_shared<Generation>(engine_, model_, std::move(req.prompt), req.gen, false);
    return respond(std::move(gen), req.gen, kCompletionShape);
  });
}

std::string OpenAiService::render_prompt(ChatRequest& req) const {
  const bool merge = !model_.has_file_template() || model_.template_reads_tool_responses();
  const json messages = chat::template_input(req.messages, req.tools, model_.format().tool_format, merge,
                                             req.template_kwargs);
  try {
    return model_.render_chat(messages, req.template_kwargs);
  } catch (const Error& e) {
    throw ApiError(400, std::string("messages: the chat template rejected the conversation: ") + e.what(),
                   "invalid_request_error", "messages");
  }
}

Reply OpenAiService::chat_completions(const std::string& body, const RequestMeta& meta) {
  return admitted("/v1/chat/completions", [&] { return run_chat(body, meta); });
}

Reply OpenAiService::transcriptions(const std::string& body, const RequestMeta& meta) {
  constexpr const char* kEndpoint = "/v1/audio/transcriptions";
  return admitted(kEndpoint, [&] {
    return guarded(kEndpoint, [&] { return transcribe(engine_, model_, metrics_, body, meta.content_type); });
  });
}

Reply OpenAiService::run_chat(const std::string& body, const RequestMeta& meta) {
  return guarded("/v1/chat/completions", [&]() -> Reply {
    refuse_oversized_schema(body, model_);  // before any value is built
    nlohmann::ordered_json j = parse_body(body, model_, true);
    log_session("/v1/chat/completions", meta, j);
    std::shared_ptr<const grammar::CompiledGrammar> grammar = parse_structured_output(j, model_);
    ChatRequest req = parse_chat_request(std::move(j), model_);
    req.gen.grammar = std::move(grammar);
    const std::string prompt_text = render_prompt(req);
    check_prompt_bytes(prompt_text.size(), model_);
    // The template writes <bos> itself: tokenize without adding specials, parsing them.
    std::vector<int32_t> prompt = model_.tokenizer().encode(prompt_text, false, true);
    // Images: decoded and encoded here, on this HTTP worker, not in the engine's step.
    ImagePrompt images;
    if (!req.images.empty()) images = expand_images(std::move(prompt), req.images, *model_.images(), engine_);
    else images.ids = std::move(prompt);
    // Audio likewise, after the images (their soft rows first).
    if (!req.audio.empty()) images = add_audio(std::move(images), req.audio, *model_.audio(), engine_);
    const chat::ChatFormat& format = model_.format();
    // Thinking on: the model reasons freely; the constraint starts once it closes the channel.
    if (req.gen.grammar && format.reasons() && req.enable_thinking && format.channel_close >= 0)
      req.gen.grammar_trigger = format.channel_close;
    ToolGeneration tools;
    if (req.tools.active()) {
      tools.format = format.tool_format;
      tools.single_call = !req.tools.parallel;
    }
    tools.constraint = chat::tool_constraint(
        req.tools, format, [this]() -> grammar::GrammarCache& { return model_.grammars(); }, req.enable_thinking);
    // Native calls stream as they are generated, enforced or not (as llama-server and vLLM
    // stream them); the JSON convention's go out whole once they parse.
    tools.incremental = format.tool_format == chat::ToolFormat::kGemma4Native;
    if (tools.constraint.grammar && req.gen.grammar)
      throw ApiError(
          400,
          "tools: an enforced tool call (required, named or a strict tool) cannot be combined with response_format, "
          "json_schema or grammar (one constraint per request)",
          "invalid_request_error", "tool_choice");
    warm(model_, req.gen.grammar);
    warm(model_, tools.constraint.grammar);
    auto gen = std::make_shared<Generation>(engine_, model_, std::move(images.ids), req.gen, format.reasons(), tools,
                                            images.soft);
    return respond(std::move(gen), req.gen, kChatShape);
  });
}

namespace {

json rendered(const std::vector<int32_t>& ids, const std::string& model) {
  return {{"request_id", new_response_id("render-")}, {"model", model}, {"token_ids", ids}};
}

}  // namespace

Reply OpenAiService::render_completions(const std::string& body) {
  return guarded("/v1/completions/render", [&]() -> Reply {
    const CompletionRequest req = parse_completion_request(parse_body(body, model_, false), model_);
    return json_reply(json::array({rendered(req.prompt, model_.alias())}));
  });
}

Reply OpenAiService::render_chat(const std::string& body) {
  return guarded("/v1/chat/completions/render", [&]() -> Reply {
    ChatRequest req = parse_chat_request(parse_body(body, model_, false), model_);
    if (!req.images.empty())
      throw ApiError(400, "messages: image parts are not rendered by this endpoint (their token count needs the image)",
                     "invalid_request_error", "messages");
    if (!req.audio.empty())
      throw ApiError(400, "messages: audio parts are not rendered by this endpoint (their token count needs the audio)",
                     "invalid_request_error", "messages");
    const std::string prompt_text = render_prompt(req);
    check_prompt_bytes(prompt_text.size(), model_);  // as run_chat: refused before tokenizing
    // As run_chat tokenizes: the template writes <bos> itself.
    return json_reply(rendered(model_.tokenizer().encode(prompt_text, false, true), model_.alias()));
  });
}

Reply OpenAiService::apply_template(const std::string& body) {
  return guarded("/apply-template", [&]() -> Reply {
    ChatRequest req = parse_chat_request(parse_body(body, model_, false), model_);
    return json_reply({{"prompt", render_prompt(req)}});
  });
}

Reply OpenAiService::respond(std::shared_ptr<Generation> gen, const GenerationParams& gp, const ReplyShape& shape) {
  ResponseMeta meta{new_response_id(shape.id_prefix), static_cast<int64_t>(std::time(nullptr)), model_.alias()};
  const Tokenizer& tok = model_.tokenizer();
  if (!gp.stream) {
    const std::vector<Collected> got = collect(*gen);
    json choices = json::array();
    for (int32_t i = 0; i < gen->n_choices(); ++i) choices.push_back(whole_choice(got[i], i, shape, gp, tok));
    metrics_.add_tokens(gen->n_prompt(), gen->n_completion_tokens());
    json j = envelope(meta, shape.object, std::move(choices));
    j["usage"] = usage_json(*gen);
    j["timings"] = timings_json(*gen);
    if (gp.grammar && !gp.grammar->grammar().warnings.empty()) j["warnings"] = dropped_warnings(*gp.grammar);
    Reply r = json_reply(j);
    add_dropped_header(r.headers, gp.grammar.get());
    return r;
  }
  Reply r;
  add_dropped_header(r.headers, gp.grammar.get());
  r.content_type = "text/event-stream";
  r.stream = [gen, meta, gp, &shape, &tok, this](const StreamWriter& write) {
    // The last chunk before [DONE] carries the timings: the usage chunk, or the last choice's.
    auto send = [&](json choice, bool last = false) {
      json c = envelope(meta, shape.chunk_object, json::array({std::move(choice)}));
      if (gp.include_usage) c["usage"] = nullptr;
      if (last && !gp.include_usage) c["timings"] = timings_json(*gen);
      return write(sse_data(c));
    };
    // Chat: the role comes first, once per choice, in a delta of its own.
    for (int32_t i = 0; shape.chat && i < gen->n_choices(); ++i)
      if (!send({{"index", i},
                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}}))
        return;
    std::vector<int64_t> offset(gen->n_choices(), 0);
    std::vector<int32_t> n_calls(gen->n_choices(), 0);
    while (!gen->done()) {
      std::vector<ChoiceEvent> evs = gen->poll(kPoll);
      if (evs.empty() && !write(": ping\n\n")) return;  // client gone: ~Generation cancels
      for (ChoiceEvent& ev : evs) {
        if (ev.error || ev.aborted) {
          write(sse_error(ev.error ? failed_message(*ev.error) : kEndedByServer));
          return;
        }
        std::vector<json> chunks = delta_choices(ev, shape, gp, tok, offset[ev.index], n_calls[ev.index]);
        for (size_t k = 0; k < chunks.size(); ++k)
          if (!send(std::move(chunks[k]), gen->done() && &ev == &evs.back() && k + 1 == chunks.size())) return;
      }
    }
    metrics_.add_tokens(gen->n_prompt(), gen->n_completion_tokens());
    if (gp.include_usage) {
      json u = envelope(meta, shape.chunk_object, json::array());
      u["usage"] = usage_json(*gen);
      u["timings"] = timings_json(*gen);
      if (!write(sse_data(u))) return;
    }
    write("data: [DONE]\n\n");
  };
  return r;
}

namespace {
// What the model reads: ["text"], or ["text", "image"] with a vision projector (--mmproj).
json modalities(const ModelContext& m) {
  json out = json::array({"text"});
  if (m.images()) out.push_back("image");
  if (m.audio()) out.push_back("audio");
  return out;
}
}  // namespace

Reply OpenAiService::models() const {
  if (!lifecycle_.ready()) return not_ready("/v1/models");
  json m = {{"id", model_.alias()},
            {"object", "model"},
            {"created", model_.created()},
            {"owned_by", "sluice"},
            {"modalities", modalities(model_)}};
  return json_reply({{"object", "list"}, {"data", json::array({m})}});
}

Reply OpenAiService::model(const std::string& id) const {
  if (!lifecycle_.ready()) return not_ready("/v1/models");
  if (id != model_.alias())
    return api_error_reply(
        ApiError(404, "The model '" + id + "' does not exist", "invalid_request_error", "model", "model_not_found"));
  return json_reply({{"id", model_.alias()},
                     {"object", "model"},
                     {"created", model_.created()},
                     {"owned_by", "sluice"},
                     {"modalities", modalities(model_)}});
}

Reply OpenAiService::tokenize(const std::string& body) const {
  try {
    const nlohmann::ordered_json j = parse_body(body, model_, false);
    if (!j.contains("content") || !j.at("content").is_string()) bad_param("content", "is required (a string)");
    bool add_special = true, with_pieces = false;
    if (j.contains("add_special")) {
      if (!j.at("add_special").is_boolean()) bad_param("add_special", "must be true or false");
      add_special = j.at("add_special").get<bool>();
    }
    if (j.contains("with_pieces")) {
      if (!j.at("with_pieces").is_boolean()) bad_param("with_pieces", "must be true or false");
      with_pieces = j.at("with_pieces").get<bool>();
    }
    const Tokenizer& tok = model_.tokenizer();
    const std::string& content = j.at("content").get_ref<const std::string&>();
    if (model_.min_tokens(content.size()) > model_.ctx_size())
      bad_param("content",
                strfmt("%zu bytes make at least %lld tokens, over the limit of %d (the server's context "
                       "size) a request may tokenize or detokenize",
                       content.size(), static_cast<long long>(model_.min_tokens(content.size())), model_.ctx_size()));
    const auto ids = tok.encode(content, add_special, true);
    check_token_count("content", ids.size(), model_.ctx_size());
    return json_reply_text(tokens_json(ids, with_pieces ? &tok : nullptr));
  } catch (const ApiError& e) {
    return api_error_reply(e);
  }
}

Reply OpenAiService::detokenize(const std::string& body) const {
  try {
    const nlohmann::ordered_json j = parse_body(body, model_, false);
    if (!j.contains("tokens") || !j.at("tokens").is_array()) bad_param("tokens", "is required (an array of token ids)");
    const Tokenizer& tok = model_.tokenizer();
    check_token_count("tokens", j.at("tokens").size(), model_.ctx_size());
    std::vector<int32_t> ids;
    ids.reserve(j.at("tokens").size());
    for (const nlohmann::ordered_json& x : j.at("tokens")) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= tok.n_vocab())
        bad_param("tokens", "token ids must be integers below " + std::to_string(tok.n_vocab()));
      ids.push_back(x.get<int32_t>());
    }
    return json_reply({{"content", tok.decode(ids, false, false)}});
  } catch (const ApiError& e) {
    return api_error_reply(e);
  }
}

Reply OpenAiService::health() const { return json_reply({{"status", "ok"}}); }

Reply OpenAiService::ready() const {
  if (!lifecycle_.ready()) return not_ready("/ready");
  return json_reply({{"status", "ready"}});
}

Reply OpenAiService::metrics() const {
  Reply r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics_.render(engine_.snapshot(), engine_.config().sched.max_running);
  return r;
}

}  // namespace sluice::server
