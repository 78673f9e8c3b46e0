// The vocabulary as the grammar engine sees it: each token's bytes, sorted into a trie that
// is walked in one pass (prefix sharing), plus the ids that end generation.
//
// Tokens whose text is not plain bytes (CONTROL/UNKNOWN/UNUSED tokens, e.g. `<|tool_call>`,
// `<eos>`) are left out of the trie: a grammar reaches them only through token terminals,
// and the end-of-generation ids only when the grammar is complete. Built once per model
// (the bytes of 262,144 tokens) and shared read-only by every compiled grammar and matcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {
class Tokenizer;
}

namespace sluice::grammar {

class TokenVocab {
 public:
  // pieces[id]: the token's bytes, or empty for a token the byte grammar never produces.
  TokenVocab(std::vector<std::string> pieces, std::vector<int32_t> eog_ids);
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tok);

  // Trie node in depth-first order (node 0 is the root, the empty prefix). The subtree of
  // node i is [i, end); `byte` is the edge into the node; tokens [tok_begin, tok_end) of
  // `trie_tokens` have exactly this node's prefix as their bytes.
  struct Node {
    uint32_t end;
    uint32_t tok_begin, tok_end;
    uint16_t depth;
    uint8_t byte;
  };

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  std::string_view piece(int32_t id) const { return pieces_[id]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  bool is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && eog_flag_[id]; }
  size_t mask_words() const { return (pieces_.size() + 63) / 64; }
  // A hash of every piece and end id: compiled grammars are cached per (grammar, vocab).
  uint64_t fingerprint() const { return fingerprint_; }
  // For uniqueItems (Matcher, ItemTracker), classified once per vocabulary rather than per
  // compiled grammar (a scan of every piece): tokens whose bytes hold one of kItemEndBytes (may
  // end an array item); tokens holding one of kIntegerBytes and none of those (may start or grow
  // an integer item); bits of the tokens that start with whitespace and hold another byte (may
  // reach an item's first byte after a ',').
  const std::vector<int32_t>& delimiter_tokens() const { return delimiter_tokens_; }
  const std::vector<int32_t>& integer_tokens() const { return integer_tokens_; }
  const std::vector<uint64_t>& ws_led_tokens() const { return ws_led_tokens_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  std::vector<uint8_t> eog_flag_;
  std::vector<Node> nodes_;
  std::vector<int32_t> trie_tokens_;
  uint64_t fingerprint_ = 0;
  std::vector<int32_t> delimiter_tokens_, integer_tokens_;
  std::vector<uint64_t> ws_led_tokens_;
  void classify_for_items();
};

}  // namespace sluice::grammar
