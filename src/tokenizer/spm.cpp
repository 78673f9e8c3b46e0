// Gemma 3 tokenizer: SentencePiece-style BPE driven by piece scores (spec §6,
// llama.cpp `llm_tokenizer_spm_session`).
//
// Symbols are byte ranges of the (space-escaped) fragment in a doubly linked list. A
// candidate is an adjacent pair whose concatenation is a token; the best candidate (highest
// score of the merged token, then leftmost) merges first. Merging never moves bytes — the
// left symbol just grows over the right one — so a candidate is stale exactly when the two
// symbols' lengths no longer add up to the length recorded at push time. With a binary heap
// this is O(n log n) per segment: the fragment is cut where two adjacent characters meet at
// a byte pair no token holds, since no merge can ever join them, so each stretch between
// such cuts merges on its own with the same result (candidates in one never touch another).
#include <queue>

#include "base/error.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace sluice::tok {

namespace {

struct Symbol {
  int32_t prev, next;
  uint32_t start, len;  // byte range in the fragment
};

struct Candidate {
  float score;
  int32_t left, right;
  uint32_t size;
};

// std::priority_queue pops the "largest": highest score, then the smallest left index.
struct CandidateLess {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void build_byte_pairs(Vocab& v) {
  v.byte_pairs.assign(65536 / 64, 0);
  for (int32_t id = 0; id < v.n_vocab; ++id) {
    const std::string_view t = v.text(id);
    for (size_t i = 1; i < t.size(); ++i) {
      const uint32_t bit = uint32_t{static_cast<uint8_t>(t[i - 1])} << 8 | static_cast<uint8_t>(t[i]);
      v.byte_pairs[bit >> 6] |= uint64_t{1} << (bit & 63);
    }
  }
}

void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;

  // Spec §6.1 step 2: one symbol per "character", length from the lead byte, clipped; no
  // validation (a stray continuation byte is a 1-byte symbol).
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (uint32_t off = 0; off < text.size();) {
    const auto len = static_cast<uint32_t>(
        std::min<size_t>(utf8_len_from_lead(static_cast<uint8_t>(text[off])), text.size() - off));
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateLess> queue;
  // Merges may form a token of any type (spec §12.1): the whole vocabulary is searched.
  auto try_push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = sym[l].len + sym[r].len;
    const int32_t id = v.find(text.substr(sym[l].start, size));
    if (id == kNoToken) return;
    queue.push({v.scores[id], l, r, size});
  };
  auto joinable = [&](int32_t i) {  // can any merge ever join symbols i - 1 and i?
    return v.pair_in_vocab(static_cast<uint8_t>(text[sym[i].start - 1]), static_cast<uint8_t>(text[sym[i].start]));
  };
  const auto n_sym = static_cast<int32_t>(sym.size());
  for (int32_t begin = 0, end; begin < n_sym; begin = end) {
    for (end = begin + 1; end < n_sym && joinable(end);) ++end;
    for (int32_t i = begin + 1; i < end; ++i) try_push(i - 1, i);
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      Symbol& l = sym[c.left];
      Symbol& r = sym[c.right];
      if (l.len == 0 || r.len == 0 || l.len + r.len != c.size) continue;  // stale
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      try_push(l.prev, c.left);
      try_push(c.left, l.next);
    }
  }

  // Emit. A merged symbol is always a token; a leftover single character that is not a
  // token falls back to one byte token per byte: "<0xXX>", else the raw one-byte token.
  for (int32_t i = 0; i != -1; i = sym[i].next) {
    const std::string_view s = text.substr(sym[i].start, sym[i].len);
    const int32_t id = v.find(s);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char ch : s) {
      const auto b = static_cast<uint8_t>(ch);
      int32_t bid = v.byte_hex_id[b];
      if (bid == kNoToken) bid = v.byte_raw_id[b];
      // llama.cpp throws here (a failed map lookup); Gemma has all 256 byte tokens.
      if (bid == kNoToken)
        fail("%s: cannot tokenize byte 0x%02X: the vocabulary has neither <0x%02X> nor the raw byte", v.name.c_str(), b,
             b);
      out.push_back(bid);
    }
  }
}

}  // namespace sluice::tok
