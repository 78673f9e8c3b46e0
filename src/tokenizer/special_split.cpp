// Special-token splitting (spec §5, llama.cpp `tokenizer_st_partition`).
//
// llama.cpp's procedure: for each special token, longest text first, cut every
// left-to-right, non-overlapping occurrence out of every still-raw fragment. Done literally
// that is O(n_special * n) per call (Gemma 3 has ~6400 special tokens). sluice computes the
// same result in O(n * depth + m log m): one trie walk finds all m occurrences of all
// special tokens, then the occurrences are replayed in llama.cpp's token order. An
// occurrence is taken iff it does not overlap anything taken before, because:
//   * fragments only ever shrink, so "lies inside one raw fragment" == "overlaps no byte
//     already cut out", and
//   * within a fragment llama.cpp takes the leftmost match and resumes after its end, which
//     is exactly "leftmost first, skip what overlaps an earlier pick of the same token".
#include <algorithm>

#include "tokenizer/vocab.h"

namespace sluice::tok {

uint32_t SpecialTrie::child(uint32_t node, uint8_t byte) const {
  const Node& n = nodes[node];
  const Edge* lo = edges.data() + n.edge_begin;
  const Edge* hi = lo + n.edge_count;
  const Edge* it = std::lower_bound(lo, hi, byte, [](const Edge& e, uint8_t b) { return e.byte < b; });
  return (it != hi && it->byte == byte) ? it->child : 0;
}

void build_special_index(Vocab& v) {
  constexpr uint32_t kSpecialAttrs = kAttrControl | kAttrUserDefined | kAttrUnknown;
  v.special.clear();
  for (int32_t id = 0; id < v.n_vocab; ++id)
    if (v.attrs[id] & kSpecialAttrs) v.special.push_back(id);
  // Same input order (ascending id), comparator and algorithm as llama.cpp, so ties between
  // equal-length texts resolve the same way with the same standard library (libstdc++).
  std::sort(v.special.begin(), v.special.end(),
            [&](int32_t a, int32_t b) { return v.text(a).size() > v.text(b).size(); });

  // Build with per-node edge lists, then flatten into sorted edge arrays.
  struct BuildNode {
    std::vector<std::pair<uint8_t, uint32_t>> kids;
    std::vector<uint32_t> terms;
  };
  std::vector<BuildNode> b(1);
  size_t max_depth = 0;
  for (uint32_t k = 0; k < v.special.size(); ++k) {
    const std::string_view t = v.text(v.special[k]);
    max_depth = std::max(max_depth, t.size());
    uint32_t node = 0;
    for (char ch : t) {
      const auto byte = static_cast<uint8_t>(ch);
      uint32_t next = 0;
      for (const auto& [kb, kn] : b[node].kids)
        if (kb == byte) next = kn;
      if (!next) {
        next = static_cast<uint32_t>(b.size());
        b[node].kids.emplace_back(byte, next);
        b.emplace_back();
      }
      node = next;
    }
    b[node].terms.push_back(k);   // k ascending: terms are in matching order
  }

  SpecialTrie& trie = v.trie;
  trie.nodes.assign(b.size(), {});
  trie.edges.clear();
  trie.terms.clear();
  trie.max_depth = max_depth;
  for (size_t i = 0; i < b.size(); ++i) {
    auto& kids = b[i].kids;
    std::sort(kids.begin(), kids.end());
    trie.nodes[i].edge_begin = static_cast<uint32_t>(trie.edges.size());
    trie.nodes[i].edge_count = static_cast<uint32_t>(kids.size());
    for (const auto& [kb, kn] : kids) trie.edges.push_back({kb, kn});
    trie.nodes[i].term_begin = static_cast<uint32_t>(trie.terms.size());
    trie.nodes[i].term_count = static_cast<uint32_t>(b[i].terms.size());
    trie.terms.insert(trie.terms.end(), b[i].terms.begin(), b[i].terms.end());
  }
  for (int c = 0; c < 256; ++c) trie.root_child[c] = trie.child(0, static_cast<uint8_t>(c));
}

void split_special(const Vocab& v, std::string_view text, bool parse_special, std::vector<Fragment>& out) {
  out.clear();
  if (text.empty()) return;   // llama.cpp: empty text -> no fragments at all
  const auto n = static_cast<uint32_t>(text.size());
  const SpecialTrie& trie = v.trie;
  const uint32_t skip = parse_special ? 0u : (kAttrControl | kAttrUnknown);

  // 1. Every occurrence (order index k, start p) of an allowed special token. For several
  //    tokens with the same text only the first allowed one in matching order can ever be
  //    taken (it claims all occurrences before the others run), so only it is recorded.
  std::vector<std::pair<uint32_t, uint32_t>> occ;
  for (uint32_t p = 0; p < n; ++p) {
    uint32_t node = trie.root_child[static_cast<uint8_t>(text[p])];
    for (uint32_t q = p + 1; node; ++q) {
      const SpecialTrie::Node& nd = trie.nodes[node];
      for (uint32_t t = 0; t < nd.term_count; ++t) {
        const uint32_t k = trie.terms[nd.term_begin + t];
        if (v.attrs[v.special[k]] & skip) continue;
        occ.emplace_back(k, p);
        break;
      }
      if (q >= n) break;
      node = trie.child(node, static_cast<uint8_t>(text[q]));
    }
  }
  if (occ.empty()) {
    out.push_back({kNoToken, 0, n});
    return;
  }

  // 2. Replay in llama.cpp's order: token by token, left to right.
  std::sort(occ.begin(), occ.end());
  std::vector<uint8_t> used(n, 0);
  std::vector<std::pair<uint32_t, int32_t>> taken;   // (start, id)
  for (const auto& [k, p] : occ) {
    const int32_t id = v.special[k];
    const auto len = static_cast<uint32_t>(v.text(id).size());
    bool free = true;
    for (uint32_t i = p; i < p + len; ++i)
      if (used[i]) {
        free = false;
        break;
      }
    if (!free) continue;
    std::fill(used.begin() + p, used.begin() + p + len, 1);
    taken.emplace_back(p, id);
  }

  // 3. Fragments in text order.
  std::sort(taken.begin(), taken.end());
  uint32_t pos = 0;
  for (const auto& [p, id] : taken) {
    if (p > pos) out.push_back({kNoToken, pos, p - pos});
    out.push_back({id, p, static_cast<uint32_t>(v.text(id).size())});
    pos = p + static_cast<uint32_t>(v.text(id).size());
  }
  if (pos < n) out.push_back({kNoToken, pos, n - pos});
}

}  // namespace sluice::tok
