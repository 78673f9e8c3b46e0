// Chat prompt rendering: the Jinja template stored in a GGUF (or a built-in one), rendered
// the way Hugging Face `apply_chat_template` renders it, byte for byte.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/interp.h"

namespace sluice::jinja {
class Template;
}

namespace sluice::chat {

class ChatTemplate {
 public:
  // Parses `source` now; throws sluice::Error with line/column on a syntax error.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token, const jinja::Limits& limits = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders `messages` (OpenAI-style {role, content}; content a string or a list of parts)
  // with the context HF passes: messages, add_generation_prompt, bos_token, eos_token,
  // tools=None, documents=None, then every key of `extra_kwargs` (enable_thinking, tools, ...).
  // Throws sluice::Error for template errors, raise_exception() included.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra_kwargs = nlohmann::json::object()) const;
  // Same, keeping the caller's key order (what `tojson` and `.items()` then show, as in Python).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra_kwargs) const;

  // strftime_now() sees this time instead of the wall clock (tests, reproducible prompts).
  void set_fixed_time(const std::tm& local_time, int microseconds = 0);

  const std::string& source() const { return source_; }

 private:
  std::string source_, bos_, eos_;
  std::shared_ptr<const jinja::Template> tmpl_;
  std::optional<jinja::Clock> fixed_time_;

  template <class J>
  std::string render_impl(const J& messages, bool add_generation_prompt, const J& extra) const;
};

}  // namespace sluice::chat
