// The model's chat format as data (docs/tools.md, gemma4.md §4.3): one ChatFormat per ChatArch,
// resolved once at load against the vocabulary, so no request tokenizes markup again.
//
//   markup           Gemma 3                          Gemma 4
//   turn             <start_of_turn> <end_of_turn>    <|turn> <turn|>
//   thought channel  —                                <|channel> <channel|>
//   tool call        — (the JSON convention)          <|tool_call> <tool_call|>, quote <|"|>
//   image            —                                <|image> <|image|> <image|> (begin, soft, end)
//   audio            —                                <|audio> <|audio|> <audio|>
//
// Every id is looked up whatever the architecture and is -1 where the vocabulary has no single
// token for the text: a request that names a token the model lacks finds nothing to ban or arm.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "chat/builtin_templates.h"
#include "chat/media_expand.h"
#include "chat/tools.h"

namespace sluice {
class Tokenizer;
}

namespace sluice::chat {

// How the model writes its reasoning: not at all, or in Gemma 4's thought channel
// (reasoning.h's Gemma4OutputParser splits it from the content).
enum class ReasoningFormat { kNone, kGemma4Channel };

struct ChatFormat {
  ChatArch arch = ChatArch::Gemma3;
  ToolFormat tool_format = ToolFormat::kJson;
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  int32_t turn_open = -1, turn_close = -1;
  int32_t channel_open = -1, channel_close = -1;
  MarkupTokens tool;          // <|tool_call>, <tool_call|>, <|"|>
  MediaMarkers image, audio;  // placeholder (also each soft position's id), begin, end

  bool reasons() const { return reasoning != ReasoningFormat::kNone; }
};

// The format of `arch` with its markup ids in `tok`'s vocabulary.
ChatFormat chat_format(ChatArch arch, const Tokenizer& tok);

// The id of the one token whose text is `text`, if the vocabulary has one.
std::optional<int32_t> single_token(const Tokenizer& tok, std::string_view text);

}  // namespace sluice::chat
