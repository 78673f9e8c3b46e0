#include "server/openai_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "base/error.h"
#include "base/json_read.h"
#include "grammar/grammar.h"
#include "server/api_error.h"

namespace sluice::server {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

bool present(const ojson& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

std::optional<double> get_number(const ojson& j, const char* key) {
  if (!present(j, key)) return std::nullopt;
  const ojson& v = j.at(key);
  if (!v.is_number() || v.is_boolean()) bad_param(key, "must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_param(key, "is out of range (beyond a 64-bit float)");  // 1e400 parses as inf
  return d;
}

// A number the sampler keeps as a 32-bit float: beyond its range it would become infinite.
std::optional<float> get_float(const ojson& j, const char* key) {
  const auto d = get_number(j, key);
  if (!d) return std::nullopt;
  if (std::fabs(*d) > std::numeric_limits<float>::max())
    bad_param(key, strfmt("%g is out of range (at most %g)", *d, double{std::numeric_limits<float>::max()}));
  return static_cast<float>(*d);
}

// Integers beyond int64 (up to 2^64 - 1, or integral floats like 1e300) saturate: every
// caller bounds the value, so the message names the real limit instead of a wrapped value.
std::optional<int64_t> get_int(const ojson& j, const char* key) {
  if (!present(j, key)) return std::nullopt;
  const ojson& v = j.at(key);
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::floor(d)) {
      if (d >= 0x1p63) return INT64_MAX;
      if (d < -0x1p63) return INT64_MIN;
      return static_cast<int64_t>(d);
    }
  }
  bad_param(key, "must be an integer");
}

std::optional<bool> get_bool(const ojson& j, const char* key) {
  if (!present(j, key)) return std::nullopt;
  if (!j.at(key).is_boolean()) bad_param(key, "must be true or false");
  return j.at(key).get<bool>();
}

void reject_unsupported(const ojson& j) {
  for (const char* k : {"functions", "function_call"})
    if (present(j, k))
      throw ApiError(400, std::string(k) + ": the legacy function-call fields are not supported; use tools",
                     "invalid_request_error", k);
  if (present(j, "logit_bias") && !(j.at("logit_bias").is_object() && j.at("logit_bias").empty()))
    throw ApiError(400, "logit_bias is not supported yet", "invalid_request_error", "logit_bias");
}

int32_t bounded_int(const ojson& j, const char* key, int64_t lo, int64_t hi, int32_t def) {
  const auto v = get_int(j, key);
  if (!v) return def;
  if (*v < lo || *v > hi) bad_param(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return static_cast<int32_t>(*v);
}

// llama-server's per-request speculation fields; n_min and p_min are accepted and ignored
// (the engine's policy chooses the length, and the n-gram drafter has no confidence).
std::optional<int32_t> parse_speculative(const ojson& j) {
  std::optional<int32_t> k;
  if (present(j, "speculative.n_max")) k = bounded_int(j, "speculative.n_max", 0, 1 << 20, 0);
  if (!present(j, "speculative")) return k;
  const ojson& sp = j.at("speculative");
  if (sp.is_boolean()) return sp.get<bool>() ? k : std::optional<int32_t>(0);
  if (!sp.is_object()) bad_param("speculative", "must be true, false or an object {\"n_max\": K, \"enabled\": bool}");
  for (const auto& [key, v] : sp.items())
    if (key != "n_max" && key != "enabled" && key != "n_min" && key != "p_min")
      bad_param("speculative", "unknown field '" + key + "' (expected n_max, enabled, n_min, p_min)");
  if (present(sp, "n_max")) {  // the integer rule every other count follows (4.0 is 4)
    const ojson& n = sp.at("n_max");
    const double v = n.is_number() ? n.get<double>() : -1;
    if (v != std::floor(v) || v < 0 || v > (1 << 20))
      bad_param("speculative", "n_max must be an integer between 0 and " + std::to_string(1 << 20));
    k = static_cast<int32_t>(v);
  }
  if (present(sp, "enabled")) {
    if (!sp.at("enabled").is_boolean()) bad_param("speculative", "enabled must be true or false");
    if (!sp.at("enabled").get<bool>()) k = 0;
  }
  return k;
}

// Request value, else the file's recommendation, else OpenAI's default.
SamplingParams parse_sampling(const ojson& j, const SamplingDefaults& d) {
  SamplingParams s;
  s.temperature = get_float(j, "temperature").value_or(d.temperature.value_or(1.0f));
  if (s.temperature < 0) bad_param("temperature", "must be >= 0");
  s.top_p = get_float(j, "top_p").value_or(d.top_p.value_or(1.0f));
  if (!(s.top_p > 0 && s.top_p <= 1)) bad_param("top_p", "must be in (0, 1]");
  s.min_p = get_float(j, "min_p").value_or(d.min_p.value_or(0.0f));
  if (!(s.min_p >= 0 && s.min_p <= 1)) bad_param("min_p", "must be in [0, 1]");
  const int64_t top_k = get_int(j, "top_k").value_or(d.top_k.value_or(0));
  if (top_k < -1) bad_param("top_k", "must be -1 or 0 (off) or positive");
  s.top_k = top_k <= 0 ? 0 : static_cast<int32_t>(std::min<int64_t>(top_k, 1 << 30));
  s.presence_penalty = get_float(j, "presence_penalty").value_or(0.0f);
  s.frequency_penalty = get_float(j, "frequency_penalty").value_or(0.0f);
  if (std::fabs(s.presence_penalty) > 2) bad_param("presence_penalty", "must be between -2 and 2");
  if (std::fabs(s.frequency_penalty) > 2) bad_param("frequency_penalty", "must be between -2 and 2");
  s.repeat_penalty = get_float(j, "repetition_penalty").value_or(d.repeat_penalty.value_or(1.0f));
  if (!(s.repeat_penalty > 0)) bad_param("repetition_penalty", "must be > 0");
  s.penalty_last_n = d.penalty_last_n.value_or(64);
  return s;
}

// The request's seed into `seed` (true), else a random one (false).
bool parse_seed(const ojson& j, uint64_t& seed) {
  if (present(j, "seed") && j.at("seed").is_number_unsigned()) {  // any 64-bit seed, 2^64 - 1 included
    seed = j.at("seed").get<uint64_t>();
    return true;
  }
  if (const auto given = get_int(j, "seed")) {
    seed = static_cast<uint64_t>(*given);
    return true;
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  seed = rng();
  return false;
}

// max_completion_tokens, else max_tokens.
std::optional<int32_t> parse_max_tokens(const ojson& j) {
  std::optional<int64_t> mt = get_int(j, "max_completion_tokens");
  const char* mt_name = "max_completion_tokens";
  if (!mt) {
    mt = get_int(j, "max_tokens");
    mt_name = "max_tokens";
  }
  if (!mt) return std::nullopt;
  if (*mt < 1) bad_param(mt_name, "must be at least 1");
  return static_cast<int32_t>(std::min<int64_t>(*mt, 1 << 30));
}

std::vector<std::string> parse_stop(const ojson& j) {
  std::vector<std::string> stop;
  if (!present(j, "stop")) return stop;
  const ojson& st = j.at("stop");
  if (st.is_string()) stop.push_back(st.get<std::string>());
  else if (st.is_array()) {
    if (st.size() > kMaxStops) bad_param("stop", "at most " + std::to_string(kMaxStops) + " stop strings");
    for (const ojson& x : st) {
      if (!x.is_string()) bad_param("stop", "must be a string or an array of strings");
      stop.push_back(x.get<std::string>());
    }
  } else {
    bad_param("stop", "must be a string or an array of strings");
  }
  for (const auto& x : stop)
    if (x.empty()) bad_param("stop", "stop strings must not be empty");
  return stop;
}

std::vector<int32_t> parse_stop_token_ids(const ojson& j, int32_t n_vocab) {
  std::vector<int32_t> ids;
  if (!present(j, "stop_token_ids")) return ids;
  const ojson& st = j.at("stop_token_ids");
  if (!st.is_array()) bad_param("stop_token_ids", "must be an array of token ids");
  for (const ojson& x : st) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= n_vocab)
      bad_param("stop_token_ids", "must hold token ids below " + std::to_string(n_vocab));
    ids.push_back(x.get<int32_t>());
  }
  return ids;
}

// stream, and stream_options (only with stream: true).
void parse_stream(const ojson& j, GenerationParams& g) {
  g.stream = get_bool(j, "stream").value_or(false);
  if (!present(j, "stream_options")) return;
  const ojson& so = j.at("stream_options");
  if (!so.is_object()) bad_param("stream_options", "must be an object");
  if (!g.stream) bad_param("stream_options", "is only allowed with stream: true");
  g.include_usage = get_bool(so, "include_usage").value_or(false);
}

// The fields are read in this order, so a request with several faults gets the first one's 400.
GenerationParams parse_generation(const ojson& j, const ModelContext& m) {
  reject_unsupported(j);
  GenerationParams g;
  g.sampling = parse_sampling(j, m.defaults());
  g.seed_given = parse_seed(j, g.sampling.seed);
  g.max_tokens = parse_max_tokens(j);
  g.min_tokens = bounded_int(j, "min_tokens", 0, 1 << 30, 0);
  g.stop = parse_stop(j);
  g.stop_token_ids = parse_stop_token_ids(j, m.tokenizer().n_vocab());
  g.ignore_eos = get_bool(j, "ignore_eos").value_or(false);
  g.n = bounded_int(j, "n", 1, kMaxN, 1);
  if (present(j, "best_of") && bounded_int(j, "best_of", 1, kMaxN, 1) != g.n)
    bad_param("best_of", "is not supported (only best_of == n)");
  parse_stream(j, g);
  g.draft_max = parse_speculative(j);
  return g;
}

// A message's content: a string (the text, or its concatenated text parts), or, for a user
// message with image parts, [{type: "text", text} | {type: "image"}] with the images' parts
// appended to `images`. `where` is the message's place ("messages[3]").
json message_content(const ojson& msg, const std::string& role, const std::string& where, const ModelContext& m,
                     std::vector<ImagePart>& images, std::vector<AudioPart>& audio) {
  static const ojson kNone;
  const ojson& c = msg.contains("content") ? msg.at("content") : kNone;
  if (c.is_string()) return c.get_ref<const std::string&>();
  if (!c.is_array()) {
    if (!(c.is_null() && role == "assistant"))
      bad_param("messages", "content must be a string or an array of text, image_url and input_audio parts");
    return "";
  }
  std::string text;
  json parts = json::array();
  for (size_t k = 0; k < c.size(); ++k) {
    const ojson& part = c[k];
    if (!part.is_object() || !part.contains("type") || !part.at("type").is_string())
      bad_param("messages", "content parts need a string 'type'");
    const std::string& type = part.at("type").get_ref<const std::string&>();
    const std::string at = where + ".content[" + std::to_string(k) + "]";
    if (type == "image_url") {
      if (role != "user") bad_param("messages", at + ": image parts are only allowed in user messages");
      images.push_back(parse_image_part(part, at, m.images()));
      parts.push_back({{"type", "image"}});
      continue;
    }
    if (type == "input_audio") {
      if (role != "user") bad_param("messages", at + ": audio parts are only allowed in user messages");
      audio.push_back(parse_audio_part(part, at, m.audio()));
      parts.push_back({{"type", "audio"}});
      continue;
    }
    if (type != "text")
      bad_param("messages",
                at + ": content part type '" + type + "' is not supported (text, image_url and input_audio are)");
    if (!part.contains("text") || !part.at("text").is_string())
      bad_param("messages", "a text part needs a string 'text'");
    text += part.at("text").get<std::string>();
    parts.push_back({{"type", "text"}, {"text", part.at("text")}});
  }
  const bool has_media = std::any_of(parts.begin(), parts.end(), [](const json& p) { return p.at("type") != "text"; });
  if (has_media) return parts;
  return text;
}

bool valid_tool_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

// JSON text inside a request string (a tool call's arguments), read with the body's limits.
// nullopt for text that is not JSON; a 400 naming the field for text over a limit.
std::optional<json> read_embedded_json(const std::string& text, const std::string& field) {
  try {
    return read_json<json>(text, request_json_limits(), field);
  } catch (const JsonReadError& e) {
    if (e.limit()) throw ApiError(400, e.what(), "invalid_request_error", "messages");
    return std::nullopt;
  }
}

// An assistant message's tool_calls, arguments parsed from their JSON text into objects (as
// the templates read them, keys sorted). `names` maps each call id to its function, for tool
// messages; `where` is the message's place ("messages[3]") for errors.
json parse_assistant_calls(const ojson& calls, std::map<std::string, std::string>& names, const std::string& where) {
  if (!calls.is_array()) bad_param("messages", "tool_calls must be an array");
  json out = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const ojson& c = calls[k];
    if (!c.is_object() || !c.contains("function") || !c.at("function").is_object())
      bad_param("messages", "each tool call needs a 'function' object");
    const ojson& fn = c.at("function");
    if (!fn.contains("name") || !fn.at("name").is_string() || !valid_tool_name(fn.at("name").get<std::string>()))
      bad_param("messages", "a tool call's function.name must be 1-64 letters, digits, '_', '-' or '.'");
    json args = json::object();
    if (present(fn, "arguments")) {
      const ojson& a = fn.at("arguments");
      const std::string field = where + ".tool_calls[" + std::to_string(k) + "].function.arguments";
      args = a.is_string() ? read_embedded_json(a.get_ref<const std::string&>(), field).value_or(json())
                           : convert_json<json>(a);
      if (!args.is_object()) bad_param("messages", "a tool call's function.arguments must be a JSON object (as text)");
    }
    const std::string id = c.contains("id") && c.at("id").is_string() ? c.at("id").get<std::string>() : "";
    const std::string name = fn.at("name").get<std::string>();
    if (!id.empty()) names[id] = name;
    out.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(args)}}}});
  }
  return out;
}

json normalize_messages(const ojson& in, const ModelContext& mctx, std::vector<ImagePart>& images,
                        std::vector<AudioPart>& audio) {
  if (!in.is_array() || in.empty()) bad_param("messages", "must be a non-empty array");
  json out = json::array();
  std::map<std::string, std::string> call_names;  // tool_call id -> function name
  for (size_t i = 0; i < in.size(); ++i) {
    const ojson& msg = in[i];
    if (!msg.is_object() || !msg.contains("role") || !msg.at("role").is_string())
      bad_param("messages", "each message needs a string 'role'");
    std::string role = msg.at("role").get<std::string>();
    if (role == "developer") role = "system";  // the Gemma templates know only system
    if (role == "function") bad_param("messages", "role 'function' is the legacy form; use role 'tool'");
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad_param("messages", "unknown role '" + role + "' (system, developer, user, assistant, tool)");
    const std::string where = "messages[" + std::to_string(i) + "]";
    json m = {{"role", role}, {"content", message_content(msg, role, where, mctx, images, audio)}};
    if (present(msg, "tool_calls")) {
      if (role != "assistant") bad_param("messages", "only assistant messages may carry tool_calls");
      m["tool_calls"] = parse_assistant_calls(msg.at("tool_calls"), call_names, where);
    }
    if (role == "tool") {
      std::string id, name;
      if (present(msg, "tool_call_id") && msg.at("tool_call_id").is_string()) id = msg.at("tool_call_id");
      if (auto it = call_names.find(id); it != call_names.end()) name = it->second;
      else if (present(msg, "name") && msg.at("name").is_string()) name = msg.at("name");
      if (name.empty())
        bad_param("messages", "a tool message's tool_call_id ('" + id + "') matches no earlier assistant tool call");
      m["tool_call_id"] = id;
      m["name"] = name;
    }
    out.push_back(std::move(m));
  }
  return out;
}

ToolSpec parse_tool(const ojson& t) {
  if (!t.is_object() || !t.contains("type") || t.at("type") != "function" || !t.contains("function") ||
      !t.at("function").is_object())
    bad_param("tools", "each tool must be {\"type\": \"function\", \"function\": {...}}");
  const ojson& fn = t.at("function");
  ToolSpec s;
  if (!fn.contains("name") || !fn.at("name").is_string() || !valid_tool_name(fn.at("name").get<std::string>()))
    bad_param("tools", "function.name must be 1-64 letters, digits, '_', '-' or '.'");
  s.name = fn.at("name").get<std::string>();
  if (present(fn, "description")) {
    if (!fn.at("description").is_string()) bad_param("tools", "function.description must be a string");
    s.description = fn.at("description").get<std::string>();
  }
  if (present(fn, "parameters")) {
    if (!fn.at("parameters").is_object()) bad_param("tools", "function.parameters must be a JSON Schema object");
    s.parameters = fn.at("parameters");  // document order, as the body was read
    // The schema's text is what the prompt and the grammar are made of: its size is checked
    // before either is built.
    const size_t bytes = s.parameters.dump().size();
    if (bytes > grammar::Limits{}.max_schema_bytes)
      bad_param("tools", "function '" + s.name + "': the parameters schema is " + std::to_string(bytes) +
                             " bytes, over the limit of " + std::to_string(grammar::Limits{}.max_schema_bytes));
  }
  s.strict = get_bool(fn, "strict").value_or(false);
  return s;
}

ToolsParams parse_tools(const ojson& j) {
  ToolsParams p;
  if (present(j, "tools")) {
    const ojson& ts = j.at("tools");
    if (!ts.is_array()) bad_param("tools", "must be an array");
    if (ts.size() > kMaxTools) bad_param("tools", "at most " + std::to_string(kMaxTools) + " tools");
    for (const ojson& t : ts) {
      p.tools.push_back(parse_tool(t));
      for (size_t i = 0; i + 1 < p.tools.size(); ++i)
        if (p.tools[i].name == p.tools.back().name) bad_param("tools", "two tools are named '" + p.tools[i].name + "'");
    }
  }
  if (present(j, "tool_choice")) {
    const ojson& c = j.at("tool_choice");
    if (c == "auto") p.choice = ToolChoice::kAuto;
    else if (c == "none") p.choice = ToolChoice::kNone;
    else if (c == "required") p.choice = ToolChoice::kRequired;
    else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") &&
             c.at("function").is_object() && c.at("function").contains("name") &&
             c.at("function").at("name").is_string()) {
      p.choice = ToolChoice::kNamed;
      p.named = c.at("function").at("name").get<std::string>();
      bool found = false;
      for (const ToolSpec& t : p.tools) found |= t.name == p.named;
      if (!found) bad_param("tool_choice", "names function '" + p.named + "', which is not in tools");
    } else {
      bad_param("tool_choice",
                "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (p.tools.empty() && p.choice != ToolChoice::kNone) bad_param("tool_choice", "needs tools");
  }
  p.parallel = get_bool(j, "parallel_tool_calls").value_or(true);
  return p;
}

}  // namespace

void check_prompt_bytes(size_t bytes, const ModelContext& m) {
  const int64_t at_least = m.min_tokens(bytes);
  if (at_least >= m.ctx_size())
    throw ApiError(400,
                   strfmt("the prompt is %zu bytes, at least %lld tokens, but the context holds %d (prompt plus at "
                          "least one generated token)",
                          bytes, static_cast<long long>(at_least), m.ctx_size()),
                   "invalid_request_error", "messages", "context_length_exceeded");
}

ojson parse_body(const std::string& body, const ModelContext& m, bool need_model) {
  // Depth and value count are checked while parsing, so a deeper value is never built:
  // copying or converting one recurses once per level and would overflow the stack.
  ojson j;
  try {
    j = read_json<ojson>(body, request_json_limits(), "the request body");
  } catch (const JsonReadError& e) {
    throw ApiError(400, e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  if (need_model) {
    if (!present(j, "model") || !j.at("model").is_string()) bad_param("model", "is required (a string)");
    const std::string& name = j.at("model").get_ref<const std::string&>();
    if (name != m.alias())
      throw ApiError(404, "The model '" + name + "' does not exist (this server serves '" + m.alias() + "')",
                     "invalid_request_error", "model", "model_not_found");
  }
  return j;
}

CompletionRequest parse_completion_request(const ojson& j, const ModelContext& m) {
  CompletionRequest r;
  r.gen = parse_generation(j, m);
  if (get_bool(j, "echo").value_or(false)) bad_param("echo", "is not supported");
  if (present(j, "suffix")) bad_param("suffix", "is not supported");
  if (present(j, "logprobs")) r.gen.top_logprobs = bounded_int(j, "logprobs", 0, kMaxTopLogprobs, 0);
  if (!present(j, "prompt")) bad_param("prompt", "is required");
  const ojson* p = &j.at("prompt");
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
    p = &(*p)[0];  // one prompt in a list
  const Tokenizer& tok = m.tokenizer();
  if (p->is_string()) {
    check_prompt_bytes(p->get_ref<const std::string&>().size(), m);
    r.prompt = tok.encode(p->get_ref<const std::string&>(), true, true);  // as `sluice run` does: BOS, specials parsed
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    for (const ojson& x : *p) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= tok.n_vocab())
        bad_param("prompt", "token ids must be integers from 0 to " + std::to_string(tok.n_vocab() - 1));
      r.prompt.push_back(x.get<int32_t>());
    }
  } else if (p->is_array() && p->size() > 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    bad_param("prompt", "several prompts in one request are not supported; send one request per prompt");
  } else {
    bad_param("prompt", "must be a string or an array of token ids");
  }
  if (r.prompt.empty()) bad_param("prompt", "is empty");
  return r;
}

ChatRequest parse_chat_request(ojson&& j, const ModelContext& m) {
  ChatRequest r;
  r.gen = parse_generation(j, m);
  if (get_bool(j, "logprobs").value_or(false))
    r.gen.top_logprobs = bounded_int(j, "top_logprobs", 0, kMaxTopLogprobs, 0);
  else if (present(j, "top_logprobs")) bad_param("top_logprobs", "needs logprobs: true");
  if (!present(j, "messages")) bad_param("messages", "must be a non-empty array");
  r.messages = normalize_messages(j.at("messages"), m, r.images, r.audio);
  r.tools = parse_tools(j);
  r.template_kwargs = json::object();
  if (present(j, "chat_template_kwargs")) {
    if (!j.at("chat_template_kwargs").is_object()) bad_param("chat_template_kwargs", "must be an object");
    // The templates see sorted keys, as before the body kept its order (depth <= kMaxJsonDepth).
    r.template_kwargs = convert_json<json>(j.at("chat_template_kwargs"));
  }
  if (r.template_kwargs.contains("enable_thinking")) {
    if (!r.template_kwargs.at("enable_thinking").is_boolean())
      bad_param("chat_template_kwargs.enable_thinking", "must be true or false");
    r.enable_thinking = r.template_kwargs.at("enable_thinking").get<bool>();
  }
  r.template_kwargs["enable_thinking"] = r.enable_thinking;  // thinking is off unless asked for
  return r;
}

}  // namespace sluice::server
