// What the HTTP layer knows about the served model: its name, tokenizer, chat template,
// context and the sampling defaults from the GGUF (general.sampling.*). Built once at start;
// read-only afterwards, so every HTTP thread may use it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "chat/format.h"
#include "grammar/compiled.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace sluice::gguf {
class GgufFile;
}

namespace sluice::server {

struct ImageInput;
struct AudioInput;

// general.sampling.* of the file, each only if present.
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repeat_penalty;
  std::optional<int32_t> top_k, penalty_last_n;
  static SamplingDefaults from_gguf(const gguf::GgufFile& f);

  // Calls f(GGUF key, request/props name, field) for each field of `d` (a SamplingDefaults,
  // const or not): the one table of how the file's and the API's names map.
  template <class D, class F>
  static void for_each_field(D& d, F&& f) {
    f("general.sampling.temp", "temperature", d.temperature);
    f("general.sampling.top_k", "top_k", d.top_k);
    f("general.sampling.top_p", "top_p", d.top_p);
    f("general.sampling.min_p", "min_p", d.min_p);
    f("general.sampling.penalty_repeat", "repetition_penalty", d.repeat_penalty);
    f("general.sampling.penalty_last_n", "penalty_last_n", d.penalty_last_n);
  }
};

class ModelContext {
 public:
  // `alias` empty: general.name of the file (or its architecture when it has none).
  ModelContext(const gguf::GgufFile& f, const Tokenizer& tok, std::string alias, int32_t ctx_size,
               int32_t max_tokens_cap);

  const std::string& alias() const { return alias_; }
  const Tokenizer& tokenizer() const { return tok_; }
  // The chat format: markup ids, tool-call format, reasoning (resolved once, here).
  const chat::ChatFormat& format() const { return format_; }
  int32_t ctx_size() const { return ctx_size_; }
  int32_t max_tokens_cap() const { return max_tokens_cap_; }  // 0: none
  const SamplingDefaults& defaults() const { return defaults_; }
  int64_t created() const { return created_; }
  bool has_file_template() const { return file_template_; }         // tokenizer.chat_template present
  bool template_mentions_tools() const { return template_tools_; }  // the template renders `tools`
  // The template reads tool results from the assistant message's `tool_responses`.
  bool template_reads_tool_responses() const { return template_tool_responses_; }

  // The image input (sluice serve --mmproj, server/content_parts.h); null: text only. Set once
  // before the server starts.
  const ImageInput* images() const { return images_.get(); }
  void set_images(std::shared_ptr<const ImageInput> in) { images_ = std::move(in); }
  // The audio input (an mmproj with an audio tower, server/audio_parts.h); null: no audio.
  const AudioInput* audio() const { return audio_.get(); }
  void set_audio(std::shared_ptr<const AudioInput> in) { audio_ = std::move(in); }

  // The chat prompt (file's template, else the built-in one). Throws sluice::Error when the
  // template rejects the conversation (e.g. roles that do not alternate).
  std::string render_chat(const nlohmann::json& messages, const nlohmann::json& template_kwargs) const;

  // Compiled grammars for this model's vocabulary (structured output). Built on first use: the
  // vocabulary trie takes a moment for 262k tokens, which a server never asked for a grammar
  // does not pay. Thread-safe.
  grammar::GrammarCache& grammars() const;

  // The fewest tokens `bytes` of text can encode to: no token stands for more text than the
  // vocabulary's longest token text. A text whose lower bound is already over a limit is
  // refused without tokenizing it (8 MiB took seconds).
  int64_t min_tokens(size_t bytes) const {
    return static_cast<int64_t>((bytes + max_token_bytes_ - 1) / max_token_bytes_);
  }

 private:
  const Tokenizer& tok_;
  std::string alias_;
  chat::ChatFormat format_;
  int32_t ctx_size_, max_tokens_cap_;
  SamplingDefaults defaults_;
  std::unique_ptr<chat::ChatTemplate> tmpl_;
  mutable std::mutex tmpl_mu_;  // rendering is cheap; one at a time keeps the interpreter simple
  int64_t created_;
  size_t max_token_bytes_ = 1;
  bool file_template_ = false, template_tools_ = false, template_tool_responses_ = false;
  std::shared_ptr<const ImageInput> images_;
  std::shared_ptr<const AudioInput> audio_;
  mutable std::once_flag grammars_once_;
  mutable std::unique_ptr<grammar::GrammarCache> grammars_;
};

}  // namespace sluice::server
