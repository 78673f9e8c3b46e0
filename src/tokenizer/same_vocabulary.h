// Whether two GGUF files hold the same vocabulary (a draft model must share its target's token
// ids and texts: speculation compares ids only). The engine sees ids, never token texts, so the
// comparison lives here, next to the other readers of tokenizer.ggml.* metadata.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace sluice::gguf {
class GgufFile;
}

namespace sluice::tok {

// The first token id whose text differs between the two lists, or -1 when they are equal
// (a shorter list differs at its end).
int64_t first_vocab_difference(std::span<const std::string_view> a, std::span<const std::string_view> b);
// Throws sluice::Error unless both files hold the same tokenizer.ggml.tokens (count and every
// text), naming the first differing id and both texts.
void check_same_vocabulary(const gguf::GgufFile& target, const gguf::GgufFile& draft);

}  // namespace sluice::tok
