// Special-token splitting (spec §5, llama.cpp `tokenizer_st_partition`).
//
// llama.cpp's procedure: for each special token, longest text first, cut every
// left-to-right, non-overlapping occurrence out of every still-raw fragment. Done literally
// that is O(n_special * n) per call (Gemma 3 has ~6400 special tokens). sluice computes the
// same result in O(n * depth + r * len): one trie walk finds every occurrence of every
// special token, kept as r runs of consecutive starts, then the occurrences are replayed in
// llama.cpp's token order. An occurrence is taken iff it does not overlap anything taken
// before, because:
//   * fragments only ever shrink, so "lies inside one raw fragment" == "overlaps no byte
//     already cut out", and
//   * within a fragment llama.cpp takes the leftmost match and resumes after its end, which
//     is exactly "leftmost first, skip what overlaps an earlier pick of the same token".
#include <algorithm>
#include <array>

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
    b[node].terms.push_back(k);  // k ascending: terms are in matching order
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

namespace {

// Occurrences of special tokens, per token (its matching order index k) as runs of
// consecutive starts: a run of spaces holds an occurrence of every space token at every
// position, and as runs that is a few entries instead of ~30 per byte.
struct Occurrences {
  struct Run {
    uint32_t start, count;
    int32_t next;  // the next run of the same token, -1 at the end
  };
  std::vector<Run> runs;
  std::vector<int32_t> head, tail;  // per k: its first and last run (allocated at the first occurrence)
  std::vector<uint32_t> ks;         // the k that occur

  void record(size_t n_special, uint32_t k, uint32_t p, uint32_t count) {
    if (head.empty()) {
      head.assign(n_special, -1);
      tail.assign(n_special, -1);
    }
    if (tail[k] >= 0 && runs[tail[k]].start + runs[tail[k]].count == p) {
      runs[tail[k]].count += count;
      return;
    }
    const auto r = static_cast<int32_t>(runs.size());
    runs.push_back({p, count, -1});
    if (tail[k] >= 0) runs[tail[k]].next = r;
    else head[k] = r, ks.push_back(k);
    tail[k] = r;
  }
};

// 1. Every occurrence of an allowed special token. For several tokens with the same text
//    only the first allowed one in matching order can ever be taken (it claims all
//    occurrences before the others run): only it is recorded. The starts deep inside a run
//    of one byte are walked once for all.
Occurrences find_occurrences(const Vocab& v, std::string_view text, uint32_t skip, SplitWork& w) {
  const SpecialTrie& trie = v.trie;
  const auto n = static_cast<uint32_t>(text.size());
  Occurrences occ;
  auto first_allowed = [&](const SpecialTrie::Node& nd) -> int64_t {  // its k, or -1
    for (uint32_t t = 0; t < nd.term_count; ++t) {
      const uint32_t k = trie.terms[nd.term_begin + t];
      if (!(v.attrs[v.special[k]] & skip)) return k;
    }
    return -1;
  };
  // chain[c]: how many nodes the path c, cc, ccc, ... has in the trie (-1: not computed yet).
  std::array<int32_t, 256> chain;
  chain.fill(-1);
  auto chain_depth = [&](uint8_t c) {
    if (chain[c] < 0) {
      chain[c] = 0;
      for (uint32_t node = trie.root_child[c]; node; node = trie.child(node, c)) ++chain[c];
    }
    return static_cast<uint32_t>(chain[c]);
  };
  uint32_t run_end = 0;  // end of the run of equal bytes that holds p
  for (uint32_t p = 0; p < n;) {
    const auto c = static_cast<uint8_t>(text[p]);
    if (p >= run_end)
      for (run_end = p + 1; run_end < n && static_cast<uint8_t>(text[run_end]) == c;) ++run_end;
    const uint32_t depth = chain_depth(c);
    // Every start from p up to run_end - depth - 1 walks the same `depth` nodes and stops
    // inside the run: the same occurrences, recorded once for all of those starts.
    const uint32_t count = run_end - p > depth ? run_end - p - depth : 1;
    uint32_t node = trie.root_child[c];
    for (uint32_t q = p + 1; node; ++q) {
      ++w.trie_steps;
      if (const int64_t k = first_allowed(trie.nodes[node]); k >= 0)
        occ.record(v.special.size(), static_cast<uint32_t>(k), p, count);
      if (q >= n) break;
      node = trie.child(node, static_cast<uint8_t>(text[q]));
    }
    p += count;
  }
  w.runs = occ.runs.size();
  return occ;
}

// 2. Replay in llama.cpp's order: token by token, left to right; an occurrence is taken iff
//    none of its bytes is cut out yet. free_from[i] is the first position >= i still free
//    (path-halved), so a candidate on cut bytes skips the whole cut span at once; a window
//    with a cut byte u rules out every start up to u (each of them covers u).
std::vector<std::pair<uint32_t, int32_t>> replay(const Vocab& v, Occurrences& occ, uint32_t n, SplitWork& w) {
  std::sort(occ.ks.begin(), occ.ks.end());
  std::vector<uint32_t> free_from(n + 1);
  for (uint32_t i = 0; i <= n; ++i) free_from[i] = i;
  auto first_free = [&](uint32_t i) {
    while (free_from[i] != i) {
      free_from[i] = free_from[free_from[i]];
      i = free_from[i];
      ++w.checks;
    }
    return i;
  };
  std::vector<std::pair<uint32_t, int32_t>> taken;  // (start, id)
  for (const uint32_t k : occ.ks) {
    const int32_t id = v.special[k];
    const auto len = static_cast<uint32_t>(v.text(id).size());
    for (int32_t ri = occ.head[k]; ri >= 0; ri = occ.runs[ri].next) {
      const uint32_t end = occ.runs[ri].start + occ.runs[ri].count;  // candidates start before this
      for (uint32_t q = first_free(occ.runs[ri].start); q < end; q = first_free(q)) {
        uint32_t u = q;
        while (u < q + len && free_from[u] == u) ++u, ++w.checks;
        if (u < q + len) {
          q = u + 1;
          continue;
        }
        for (uint32_t i = q; i < q + len; ++i) free_from[i] = q + len;
        taken.emplace_back(q, id);
        q += len;
      }
    }
  }
  return taken;
}

}  // namespace

void split_special(const Vocab& v, std::string_view text, bool parse_special, std::vector<Fragment>& out,
                   SplitWork* work) {
  out.clear();
  if (text.empty()) return;  // llama.cpp: empty text -> no fragments at all
  const auto n = static_cast<uint32_t>(text.size());
  SplitWork w;
  Occurrences occ = find_occurrences(v, text, parse_special ? 0u : (kAttrControl | kAttrUnknown), w);
  std::vector<std::pair<uint32_t, int32_t>> taken;
  if (!occ.ks.empty()) taken = replay(v, occ, n, w);
  if (work) *work = w;

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
