#include "chat/builtin_templates.h"

#include "base/error.h"

namespace sluice::chat {

ChatArch chat_arch_from_gguf(std::string_view arch) {
  if (arch == "gemma3") return ChatArch::Gemma3;
  if (arch == "gemma4") return ChatArch::Gemma4;
  fail("no built-in chat template for architecture '%.*s'", static_cast<int>(arch.size()), arch.data());
}

// The sources live in templates/*.jinja (embedded at build time, builtin_sources.cpp) so the
// Python golden generator renders exactly the same text with jinja2.
extern const char* const kGemma3Source;
extern const char* const kGemma4Source;

std::string builtin_template(ChatArch arch, const BuiltinOptions& opt) {
  if (arch == ChatArch::Gemma3) return kGemma3Source;
  std::string s = kGemma4Source;
  if (!opt.gemma4_empty_thought_block) {
    const std::string begin = "{#- begin empty thought block -#}", end = "{#- end empty thought block -#}";
    const size_t b = s.find(begin), e = s.find(end);
    if (b != std::string::npos && e != std::string::npos) s.erase(b, e + end.size() - b);
  }
  return s;
}

std::vector<std::string> stop_token_texts(ChatArch arch) {
  if (arch == ChatArch::Gemma3) return {"<eos>", "<end_of_turn>"};
  // `</s>` is ordinary text in Gemma 4 (llama.cpp drops it from the EOG set).
  return {"<eos>", "<turn|>", "<|tool_response>"};
}

std::optional<StopKind> stop_kind(ChatArch arch, std::string_view t) {
  if (t == "<eos>") return StopKind::EndOfText;
  if (arch == ChatArch::Gemma3) {
    if (t == "<end_of_turn>") return StopKind::EndOfTurn;
  } else {
    if (t == "<turn|>") return StopKind::EndOfTurn;
    if (t == "<|tool_response>") return StopKind::ToolCall;  // the model waits for a tool result
  }
  return std::nullopt;
}

}  // namespace sluice::chat
