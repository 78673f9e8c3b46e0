// Gemma 4 tokenizer: rank-ordered BPE over raw UTF-8 characters with a newline-run
// pre-split and <0xXX> byte fallback (spec §7, llama.cpp `llm_tokenizer_bpe_session` with
// pre-tokenizer GEMMA4).
#include <algorithm>

#include "base/error.h"
#include "gguf/reader.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace sluice::tok {

void load_merges(Vocab& v, const gguf::GgufFile& f) {
  if (!f.has("tokenizer.ggml.merges"))
    fail("%s: tokenizer.ggml.model is \"gemma4\" but the file has no tokenizer.ggml.merges", v.name.c_str());
  const gguf::KeyValue& kv = f.get_array("tokenizer.ggml.merges", gguf::ValueType::STRING);
  uint64_t total = 0;
  for (uint64_t i = 0; i < kv.count; ++i) total += kv.str_lens[i];
  // The views in merge_rank point into the arena: size it once, never reallocate.
  v.merge_arena.clear();
  v.merge_arena.reserve(total);
  for (uint64_t i = 0; i < kv.count; ++i) v.merge_arena.append(kv.string_at(i));
  v.merge_rank.reserve(kv.count);
  const std::string_view arena = v.merge_arena;
  size_t off = 0;
  for (uint64_t i = 0; i < kv.count; ++i) {
    const std::string_view m = arena.substr(off, kv.str_lens[i]);
    off += m.size();
    // "A B" splits at the first space at index >= 1, so A may itself be a space; an entry
    // without one becomes the harmless pair ("", "") (spec §7.1).
    MergeKey key{};
    if (const size_t p = m.find(' ', 1); p != std::string_view::npos) key = {m.substr(0, p), m.substr(p + 1)};
    if (i > static_cast<uint64_t>(INT32_MAX)) fail("%s: too many merges", v.name.c_str());
    v.merge_rank.emplace(key, static_cast<int32_t>(i));  // a repeated pair keeps the lower rank
  }
}

namespace {

struct Symbol {
  int32_t prev, next;
  uint32_t start, len;  // byte range in the word's text
};

struct Candidate {
  int32_t rank;
  int32_t left, right;
  uint32_t size;
};

// std::priority_queue pops the "largest": lowest rank, then the smallest left index.
struct CandidateLess {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

struct Session {
  const Vocab& v;
  std::vector<int32_t>& out;
  std::vector<Symbol> sym;
  std::vector<Candidate> heap;

  void emit(std::string_view s) {
    const int32_t id = v.find(s);
    if (id != kNoToken) {
      out.push_back(id);
      return;
    }
    // Byte fallback; a byte without a <0xXX> token is dropped silently (llama.cpp).
    for (char ch : s)
      if (const int32_t bid = v.byte_hex_id[static_cast<uint8_t>(ch)]; bid != kNoToken) out.push_back(bid);
  }

  void push(std::string_view w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const int32_t rank = v.find_merge(w.substr(sym[l].start, sym[l].len), w.substr(sym[r].start, sym[r].len));
    if (rank < 0) return;
    heap.push_back({rank, l, r, sym[l].len + sym[r].len});
    std::push_heap(heap.begin(), heap.end(), CandidateLess{});
  }

  void word(std::string_view w) {
    // Newline shortcut (PR #21343): a run of '\n' that is itself a token is emitted whole.
    if (w.find_first_not_of('\n') == std::string_view::npos && v.find(w) != kNoToken) {
      emit(w);
      return;
    }
    sym.clear();
    heap.clear();
    for (uint32_t off = 0; off < w.size();) {
      const auto len = static_cast<uint32_t>(
          std::min<size_t>(utf8_len_from_lead(static_cast<uint8_t>(w[off])), w.size() - off));
      const auto idx = static_cast<int32_t>(sym.size());
      sym.push_back({idx - 1, off + len == w.size() ? -1 : idx + 1, off, len});
      off += len;
    }
    for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) push(w, i - 1, i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), CandidateLess{});
      const Candidate c = heap.back();
      heap.pop_back();
      Symbol& l = sym[c.left];
      Symbol& r = sym[c.right];
      // Stale if either side is gone or has grown: symbols only grow rightwards in place,
      // so "left + right == the recorded text" is "the lengths still add up".
      if (l.len == 0 || r.len == 0 || l.len + r.len != c.size) continue;
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      push(w, l.prev, c.left);
      push(w, c.left, l.next);
    }
    for (const Symbol& s : sym)
      if (s.len) emit(w.substr(s.start, s.len));
  }
};

}  // namespace

void bpe_gemma4_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  // The pre-split works on decoded code points and rebuilds each word from them, which
  // turns invalid UTF-8 into U+FFFD (spec §7.1 step 2). Valid input is unchanged.
  std::string rebuilt;
  std::string_view t = text;
  if (!utf8_is_valid(text)) {
    rebuilt = utf8_rebuild_lenient(text);
    t = rebuilt;
  }
  Session s{v, out, {}, {}};
  // Words are maximal runs of '\n' and of everything else (regex [^\n]+|[\n]+).
  size_t pos = 0;
  while (pos < t.size()) {
    const bool nl = t[pos] == '\n';
    size_t end = pos;
    while (end < t.size() && (t[end] == '\n') == nl) ++end;
    s.word(t.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace sluice::tok
