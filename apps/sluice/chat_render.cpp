#include "apps/sluice/chat_render.h"

#include "base/error.h"

namespace sluice::app {

// Placeholder until the chat-template module lands: --chat and `sluice chat` need it.
std::string render_chat(const gguf::GgufFile&, const Tokenizer&, const ChatHistory&, bool) {
  fail("chat templates are not available in this build yet");
}

}  // namespace sluice::app
