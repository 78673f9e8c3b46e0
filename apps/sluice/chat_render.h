// Conversation → prompt text with the model's chat template (the file's
// tokenizer.chat_template, or the built-in Gemma 3 / Gemma 4 template when it has none).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sluice {
class Tokenizer;
namespace gguf {
class GgufFile;
}
}  // namespace sluice

namespace sluice::app {

struct ChatHistory {
  std::vector<std::pair<std::string, std::string>> messages;  // (role, content)
  void add(std::string role, std::string content) { messages.emplace_back(std::move(role), std::move(content)); }
};

std::string render_chat(const gguf::GgufFile& f, const Tokenizer& tok, const ChatHistory& h,
                        bool add_generation_prompt);

}  // namespace sluice::app
