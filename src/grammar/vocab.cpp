#include "grammar/vocab.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "base/error.h"
#include "grammar/item_tracker.h"
#include "tokenizer/tokenizer.h"

namespace sluice::grammar {

namespace {

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace

TokenVocab::TokenVocab(std::vector<std::string> pieces, std::vector<int32_t> eog_ids)
    : pieces_(std::move(pieces)), eog_(std::move(eog_ids)), eog_flag_(pieces_.size(), 0) {
  if (pieces_.empty()) fail("grammar vocab: no tokens");
  std::sort(eog_.begin(), eog_.end());
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t id : eog_) {
    if (id < 0 || id >= n_vocab()) fail("grammar vocab: end-of-generation id %d out of range", id);
    eog_flag_[id] = 1;
    h = fnv1a(h, std::to_string(id));
  }
  std::vector<int32_t> order;
  for (int32_t id = 0; id < n_vocab(); ++id) {
    h = fnv1a(fnv1a(h, pieces_[id]), std::string_view("\xff", 1));
    if (!pieces_[id].empty() && pieces_[id].size() < UINT16_MAX) order.push_back(id);
  }
  fingerprint_ = h;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces_[a] < pieces_[b]; });
  // Depth-first trie from the sorted pieces: a path of open nodes, closed when a piece
  // leaves their prefix.
  nodes_.push_back(Node{0, 0, 0, 0, 0});
  std::vector<uint32_t> path{0};
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = pieces_[id];
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    while (path.size() > common + 1) {
      nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      const auto t = static_cast<uint32_t>(trie_tokens_.size());
      nodes_.push_back(Node{0, t, t, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    Node& leaf = nodes_[path.back()];
    if (leaf.tok_end != trie_tokens_.size()) leaf.tok_begin = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);
    leaf.tok_end = static_cast<uint32_t>(trie_tokens_.size());
    prev = s;
  }
  for (uint32_t n : path) nodes_[n].end = static_cast<uint32_t>(nodes_.size());
  classify_for_items();
}

void TokenVocab::classify_for_items() {
  enum : uint8_t { kEnd = 1, kInteger = 2, kSpace = 4 };
  std::array<uint8_t, 256> cls{};
  for (char c : kItemEndBytes) cls[static_cast<uint8_t>(c)] |= kEnd;
  for (char c : kIntegerBytes) cls[static_cast<uint8_t>(c)] |= kInteger;
  for (char c : kWhitespaceBytes) cls[static_cast<uint8_t>(c)] |= kSpace;
  ws_led_tokens_.assign(mask_words(), 0);
  for (int32_t id : trie_tokens_) {
    uint8_t any = 0;
    bool all_space = true;
    for (unsigned char c : pieces_[id]) {
      any |= cls[c];
      all_space = all_space && (cls[c] & kSpace);
    }
    if (any & kEnd) delimiter_tokens_.push_back(id);
    else if (any & kInteger) integer_tokens_.push_back(id);
    if ((cls[static_cast<uint8_t>(pieces_[id][0])] & kSpace) && !all_space)
      ws_led_tokens_[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tok) {
  std::vector<std::string> pieces(static_cast<size_t>(tok.n_vocab()));
  const uint32_t text_free = kAttrControl | kAttrUnknown | kAttrUnused | kAttrUndefined;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const uint32_t a = tok.token_attr(id);
    if ((a & text_free) || a == kAttrUndefined) continue;
    pieces[id] = tok.token_to_piece(id, false);
  }
  return std::make_shared<const TokenVocab>(std::move(pieces), tok.eog_ids());
}

}  // namespace sluice::grammar
