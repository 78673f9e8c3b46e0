#include "chat/format.h"

#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::chat {

std::optional<int32_t> single_token(const Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text, false, true);
  if (ids.size() == 1 && tok.token_to_piece(ids[0], true) == text) return ids[0];
  return std::nullopt;
}

namespace {

int32_t id_of(const Tokenizer& tok, std::string_view text) { return single_token(tok, text).value_or(-1); }

MediaMarkers media(const Tokenizer& tok, std::string_view placeholder, std::string_view begin, std::string_view end) {
  return {id_of(tok, placeholder), id_of(tok, begin), id_of(tok, end)};
}

}  // namespace

ChatFormat chat_format(ChatArch arch, const Tokenizer& tok) {
  ChatFormat f;
  f.arch = arch;
  const bool gemma4 = arch == ChatArch::Gemma4;
  f.tool_format = gemma4 ? ToolFormat::kGemma4Native : ToolFormat::kJson;
  f.reasoning = gemma4 ? ReasoningFormat::kGemma4Channel : ReasoningFormat::kNone;
  f.turn_open = id_of(tok, gemma4 ? "<|turn>" : "<start_of_turn>");
  f.turn_close = id_of(tok, gemma4 ? "<turn|>" : "<end_of_turn>");
  f.channel_open = id_of(tok, "<|channel>");
  f.channel_close = id_of(tok, "<channel|>");
  f.tool = {id_of(tok, "<|tool_call>"), id_of(tok, "<tool_call|>"), id_of(tok, "<|\"|>")};
  f.image = media(tok, "<|image|>", "<|image>", "<image|>");
  f.audio = media(tok, "<|audio|>", "<|audio>", "<audio|>");
  return f;
}

}  // namespace sluice::chat
