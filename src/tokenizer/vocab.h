// Internal vocabulary tables of the tokenizer, built once by load_vocab() (vocab.cpp) and
// read-only afterwards. Not part of the module's API; include tokenizer/tokenizer.h.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sluice::gguf {
class GgufFile;
}

namespace sluice::tok {

inline constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581 '▁'

// A merge pair "A B" -> rank (spec §7.1); the views point into Vocab::merge_arena.
struct MergeKey {
  std::string_view a, b;
  bool operator==(const MergeKey& o) const { return a == o.a && b == o.b; }
};
struct MergeKeyHash {
  size_t operator()(const MergeKey& k) const {
    const size_t ha = std::hash<std::string_view>{}(k.a);
    const size_t hb = std::hash<std::string_view>{}(k.b);
    return ha ^ (hb + 0x9E3779B97F4A7C15ull + (ha << 6) + (ha >> 2));
  }
};

// Byte trie over the special tokens' texts, so that one pass over the input finds every
// occurrence of every special token (special_split.cpp). Each node lists, in matching
// order, the special tokens whose text ends there (several when texts are duplicated).
struct SpecialTrie {
  struct Node {
    uint32_t edge_begin = 0, edge_count = 0;  // into edges, sorted by byte
    uint32_t term_begin = 0, term_count = 0;  // into terms
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  std::vector<Node> nodes;  // nodes[0] is the root
  std::vector<Edge> edges;
  std::vector<uint32_t> terms;             // indices into Vocab::special (matching order)
  std::array<uint32_t, 256> root_child{};  // child(0, byte), as a table
  size_t max_depth = 0;

  // Child of `node` for `byte`, or 0 (the root is never a child).
  uint32_t child(uint32_t node, uint8_t byte) const;
};

struct Vocab {
  std::string name;  // file name, for messages
  TokenizerModel model = TokenizerModel::kSpm;
  int32_t n_vocab = 0;

  // Token texts back to back; text(i) = arena[off[i], off[i+1]).
  std::string arena;
  std::vector<uint32_t> text_off;
  std::vector<float> scores;
  std::vector<uint32_t> attrs;                               // TokenAttr bits
  std::unordered_map<std::string_view, int32_t> text_to_id;  // first id wins
  size_t n_duplicates = 0;

  // Pieces for token_to_piece(id, special = true), built after attributes are final.
  std::string piece_arena;
  std::vector<uint32_t> piece_off;

  std::array<int32_t, 256> byte_hex_id{};  // "<0xXX>" token per byte, kNoToken if absent
  std::array<int32_t, 256> byte_raw_id{};  // token whose text is the single raw byte

  // Gemma 4 merges.
  std::string merge_arena;
  std::unordered_map<MergeKey, int32_t, MergeKeyHash> merge_rank;

  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, unk = kNoToken, pad = kNoToken,
          sep = kNoToken, mask = kNoToken, linefeed = kNoToken;
  int32_t fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken, fim_pad = kNoToken, fim_rep = kNoToken,
          fim_sep = kNoToken;
  bool add_bos = false, add_eos = false, add_sep = false;
  bool add_space_prefix = false;
  bool clean_spaces = false;

  std::vector<int32_t> eog;       // ascending
  std::vector<uint8_t> eog_flag;  // per id
  std::vector<int32_t> special;   // CONTROL|USER_DEFINED|UNKNOWN, longest first
  SpecialTrie trie;

  // Bit a * 256 + b: some token's text holds byte a followed by byte b. SPM merges never
  // cross two adjacent characters whose boundary bytes are not such a pair (spm.cpp).
  std::vector<uint64_t> byte_pairs;
  bool pair_in_vocab(uint8_t a, uint8_t b) const {
    const uint32_t bit = uint32_t{a} << 8 | b;
    return (byte_pairs[bit >> 6] >> (bit & 63)) & 1;
  }

  std::string_view text(int32_t id) const {
    return std::string_view(arena).substr(text_off[id], text_off[id + 1] - text_off[id]);
  }
  std::string_view piece(int32_t id) const {
    return std::string_view(piece_arena).substr(piece_off[id], piece_off[id + 1] - piece_off[id]);
  }
  int32_t find(std::string_view s) const {
    auto it = text_to_id.find(s);
    return it == text_to_id.end() ? kNoToken : it->second;
  }
  int32_t find_merge(std::string_view a, std::string_view b) const {
    auto it = merge_rank.find(MergeKey{a, b});
    return it == merge_rank.end() ? -1 : it->second;
  }
  bool valid_id(int32_t id) const { return id >= 0 && id < n_vocab; }
};

// vocab.cpp: reads and validates tokenizer.ggml.*, then runs the post-processing below.
std::unique_ptr<Vocab> load_vocab(const gguf::GgufFile& file);
// bpe.cpp: parses tokenizer.ggml.merges into merge_rank.
void load_merges(Vocab& v, const gguf::GgufFile& file);
// stop_tokens.cpp: llama.cpp's load-time rules keyed on token text (spec §2.1, §11):
// EOT/EOM/FIM detection, "unused" marking, the EOG set and its exceptions.
void derive_special_tokens(Vocab& v);
// special_split.cpp: the sorted special-token list and its trie.
void build_special_index(Vocab& v);
// spm.cpp: byte_pairs.
void build_byte_pairs(Vocab& v);
// detokenize.cpp: the piece cache.
void build_pieces(Vocab& v);

// One piece of the input after special-token splitting (spec §5).
struct Fragment {
  int32_t token;  // kNoToken for raw text
  uint32_t offset, length;
};
// What one split cost, in steps that each take constant time (tests check it grows
// linearly with the text, whatever the text).
struct SplitWork {
  uint64_t trie_steps = 0;  // trie nodes visited while finding occurrences
  uint64_t runs = 0;        // runs of consecutive occurrences recorded
  uint64_t checks = 0;      // bytes and jumps looked at while replaying
};
void split_special(const Vocab& v, std::string_view text, bool parse_special, std::vector<Fragment>& out,
                   SplitWork* work = nullptr);

// Tokenizers of one raw fragment whose spaces are already escaped to U+2581.
void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);
void bpe_gemma4_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

}  // namespace sluice::tok
