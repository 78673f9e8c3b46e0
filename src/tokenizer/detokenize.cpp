// Detokenization (spec §8, §9): per-token pieces, llama.cpp's `detokenize` with its
// "clean spaces" passes, and the UTF-8-safe streaming decoder.
#include <cstdlib>

#include "base/error.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"

namespace sluice::tok {

namespace {

// Piece of one token as llama.cpp caches it (special = true). The checks run in this order
// on the attribute bits, so e.g. a USER_DEFINED|CONTROL token renders its raw text.
std::string make_piece(const Vocab& v, int32_t id) {
  const uint32_t a = v.attrs[id];
  const std::string_view t = v.text(id);
  if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return std::string(t);
  if (a & kAttrNormal) {
    std::string r;
    r.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, kSpaceEscape.size(), kSpaceEscape) == 0) {
        r.push_back(' ');
        i += kSpaceEscape.size();
      } else {
        r.push_back(t[i++]);
      }
    }
    return r;
  }
  if (a & kAttrByte) {
    // Spec §8: the two hex digits at offsets 3-4 of "<0xXX>", read like llama.cpp does
    // (strtol on that substring; anything unparsable gives 0).
    const std::string hex(t.substr(std::min<size_t>(3, t.size()), 2));
    return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
  }
  return {};  // UNUSED, UNDEFINED
}

// llama.cpp's clean_up_tokenization_spaces, in place and with its exact quirks: each pass
// compacts the buffer while reading the previous byte from the same buffer, and the second
// pass overwrites the skipped space with NUL, which the next comparison then sees.
void clean_spaces(std::string& s) {
  char* text = s.data();
  auto n = static_cast<int64_t>(s.size());

  // 1. " ?", " !", " .", " ,": drop the space.
  int64_t total = n ? 1 : 0;
  for (int64_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  n = total;

  // 2. " ' ": drop both spaces.
  total = n ? 1 : 0;
  for (int64_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  n = total;

  // 3. Contractions: drop the space before 's 'm 're 've; keep it before 't 'd 'll.
  total = n ? 1 : 0;
  for (int64_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < n) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  s.resize(static_cast<size_t>(total));
}

}  // namespace

void build_pieces(Vocab& v) {
  v.piece_off.resize(static_cast<size_t>(v.n_vocab) + 1);
  v.piece_arena.clear();
  v.piece_arena.reserve(v.arena.size());
  for (int32_t id = 0; id < v.n_vocab; ++id) {
    v.piece_off[id] = static_cast<uint32_t>(v.piece_arena.size());
    v.piece_arena += make_piece(v, id);
  }
  v.piece_off[v.n_vocab] = static_cast<uint32_t>(v.piece_arena.size());
}

}  // namespace sluice::tok

namespace sluice {

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const tok::Vocab& v = *v_;
  if (!v.valid_id(id)) fail("token id %d is out of range (n_vocab %d)", id, v.n_vocab);
  if (!special && (v.attrs[id] & (kAttrUnknown | kAttrControl))) return {};
  return std::string(v.piece(id));
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool remove_special, bool unparse_special) const {
  return decode(ids, remove_special, unparse_special, v_->clean_spaces);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool remove_special, bool unparse_special,
                              bool clean) const {
  const tok::Vocab& v = *v_;
  // With a SentencePiece dummy prefix the first piece loses one leading space, unless a
  // BOS was removed (spec §9.2). Gemma files have add_space_prefix = false.
  bool strip_space = v.add_space_prefix;
  if (remove_special && v.add_bos && !ids.empty() && ids.front() == v.bos) {
    strip_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && v.add_eos && !ids.empty() && ids.back() == v.eos) ids = ids.first(ids.size() - 1);

  std::string out;
  for (int32_t id : ids) {
    if (!v.valid_id(id)) fail("token id %d is out of range (n_vocab %d)", id, v.n_vocab);
    if (!unparse_special && (v.attrs[id] & (kAttrUnknown | kAttrControl))) {
      strip_space = false;
      continue;
    }
    std::string_view p = v.piece(id);
    if (strip_space && !p.empty() && p.front() == ' ') p.remove_prefix(1);
    strip_space = false;
    out.append(p);
  }
  if (clean) tok::clean_spaces(out);
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_to_piece(id, special_);
  std::string out;
  pending_.erase(0, tok::utf8_sanitize_prefix(pending_, out, /*final=*/false));
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  tok::utf8_sanitize_prefix(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

}  // namespace sluice
