// Prompt formats for GGUF files that carry no `tokenizer.chat_template`, and the stop
// tokens of each format (tokenizer.md §10, §11; gemma4.md §4.4).
//
// The built-ins are Jinja sources run through the same engine as a file's own template, so
// there is one renderer. They reproduce the official templates for the cases §10 describes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::chat {

enum class ChatArch { Gemma3, Gemma4 };

// From GGUF `general.architecture` ("gemma3", "gemma4"); throws sluice::Error otherwise.
ChatArch chat_arch_from_gguf(std::string_view general_architecture);

struct BuiltinOptions {
  // Gemma 4 with thinking off: append the empty thought block "<|channel>thought\n<channel|>"
  // after the generation prompt, as llama.cpp's gemma4.jinja and the 26B/31B templates do.
  // E-series templates reportedly omit it (tokenizer.md §10.2).
  bool gemma4_empty_thought_block = true;
};

// Jinja source of the built-in template. Renders with bos_token, messages,
// add_generation_prompt, and for Gemma 4 also enable_thinking and tools.
std::string builtin_template(ChatArch arch, const BuiltinOptions& opt = {});

// Texts of the end-of-generation tokens (§11). Look their ids up in the vocabulary.
std::vector<std::string> stop_token_texts(ChatArch arch);

enum class StopKind { EndOfTurn, ToolCall, EndOfText };
// Why generation stopped on this token, or nullopt if the token is not a stop token.
// `<|turn>` (a turn opener) is never a stop.
std::optional<StopKind> stop_kind(ChatArch arch, std::string_view token_text);

}  // namespace sluice::chat
