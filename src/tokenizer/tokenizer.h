// Gemma 3 / Gemma 4 tokenizer read from GGUF metadata (docs/spec/tokenizer.md).
//
// Goal: byte-for-byte the ids of llama.cpp's `llama_tokenize` and the text of
// `llama_token_to_piece` / `llama_detokenize` for the two tokenizer models Gemma ships:
//   * "llama"  — Gemma 3, SentencePiece-style BPE driven by piece scores (spec §6);
//   * "gemma4" — Gemma 4, rank-ordered BPE merges with a newline-run pre-split (spec §7).
// Everything the algorithms need (text -> id map, merge ranks, special-token trie, pieces)
// is built once at load; encode/decode are const and safe to call from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::gguf {
class GgufFile;
}

namespace sluice {

namespace tok {
struct Vocab;
}

enum class TokenizerModel : uint8_t {
  kSpm,        // tokenizer.ggml.model "llama" (Gemma 3): score-ordered merges, spec §6
  kGemma4Bpe,  // tokenizer.ggml.model "gemma4": rank-ordered merges, spec §7
};

// llama.cpp's per-token attribute bits (spec §2.1). A token can carry several: e.g. Gemma's
// "<unused0>" is CONTROL|UNUSED, and a USER_DEFINED token named in the stop list becomes
// USER_DEFINED|CONTROL.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

inline constexpr int32_t kNoToken = -1;

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from the file. Throws sluice::Error naming the file and the key
  // for missing/ill-typed metadata, an empty token list, scores/token_type shorter than the
  // token list, a special-token id >= n_vocab, or an unknown tokenizer model.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // llama.cpp `tokenize(text, add_special, parse_special)` (spec §4):
  //   add_special   — apply the vocab's BOS/EOS rules (Gemma: prepend BOS);
  //   parse_special — match CONTROL/UNKNOWN token texts in `text` (USER_DEFINED always match).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Text of one token (spec §9.1): CONTROL/UNKNOWN only when `special`; USER_DEFINED always;
  // NORMAL with U+2581 -> ' '; BYTE as its raw byte; UNUSED/UNDEFINED empty.
  // The result may be an incomplete UTF-8 sequence (byte tokens). Throws on a bad id.
  std::string token_to_piece(int32_t id, bool special) const;

  // llama.cpp `detokenize(ids, remove_special, unparse_special)` (spec §9.2), including the
  // "clean spaces" passes that llama.cpp applies to BPE vocabularies (Gemma 4).
  std::string decode(std::span<const int32_t> ids, bool remove_special, bool unparse_special) const;
  // Same, with the clean-up passes forced on or off (spec §9.2 recommends off for Gemma 4
  // unless byte parity with llama_detokenize is wanted).
  std::string decode(std::span<const int32_t> ids, bool remove_special, bool unparse_special, bool clean_spaces) const;

  TokenizerModel model() const;
  int32_t n_vocab() const;
  // Special ids; kNoToken where the vocab has none.
  int32_t bos() const;
  int32_t eos() const;
  int32_t eot() const;  // end of turn: key tokenizer.ggml.eot_token_id, else found by text
  int32_t eom() const;
  int32_t unk() const;
  int32_t pad() const;
  int32_t sep() const;
  int32_t mask() const;
  int32_t linefeed() const;  // llama.cpp's "newline token"
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  bool clean_spaces() const;  // llama.cpp's default for decode(): true for BPE (Gemma 4)

  // End-of-generation set built by llama.cpp's rules (spec §11): stop when sampled.
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;  // ascending

  uint32_t token_attr(int32_t id) const;          // TokenAttr bits; throws on a bad id
  std::string_view token_text(int32_t id) const;  // raw text as stored; throws on a bad id
  float token_score(int32_t id) const;
  int32_t token_id(std::string_view text) const;  // first id with this text, or kNoToken
  // Special-token matching order (CONTROL|USER_DEFINED|UNKNOWN, longest text first).
  const std::vector<int32_t>& special_tokens() const;
  size_t n_duplicate_texts() const;  // token strings seen more than once

 private:
  explicit Tokenizer(std::unique_ptr<tok::Vocab> v);
  std::unique_ptr<tok::Vocab> v_;
};

// Streaming detokenizer for generated tokens (spec §9.3). push() returns the text that is
// complete so far and never ends inside a UTF-8 sequence: bytes that begin a character whose
// continuation has not arrived yet (e.g. the first byte-fallback token of an emoji) are held
// back. Bytes that can never form a valid character are replaced by U+FFFD. No clean-up
// passes, like llama.cpp's per-token streaming.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false) : tok_(tok), special_(special) {}
  std::string push(int32_t id);
  // End of stream: returns what was held back, an unfinished character as U+FFFD.
  std::string flush();
  size_t n_pending() const { return pending_.size(); }

 private:
  const Tokenizer& tok_;
  bool special_;
  std::string pending_;
};

}  // namespace sluice
