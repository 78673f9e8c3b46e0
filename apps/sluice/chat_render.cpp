#include "apps/sluice/chat_render.h"

#include <nlohmann/json.hpp>

#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

std::string render_chat(const gguf::GgufFile& f, const Tokenizer& tok, const ChatHistory& h,
                        bool add_generation_prompt) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& [role, content] : h.messages) messages.push_back({{"role", role}, {"content", content}});
  // The file's own template when it has one; otherwise the built-in one for its architecture.
  std::string source(f.get_string_or("tokenizer.chat_template", ""));
  if (source.empty()) source = chat::builtin_template(chat::chat_arch_from_gguf(f.get_string("general.architecture")));
  const std::string bos = tok.bos() >= 0 ? std::string(tok.token_text(tok.bos())) : "";
  const std::string eos = tok.eos() >= 0 ? std::string(tok.token_text(tok.eos())) : "";
  const chat::ChatTemplate tmpl(source, bos, eos);
  return tmpl.render(messages, add_generation_prompt);
}

}  // namespace sluice::app
