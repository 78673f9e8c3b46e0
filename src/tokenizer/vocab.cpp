// Loading tokenizer.ggml.* into tok::Vocab (spec §2, §3), with llama.cpp's defaults and
// validation made into clear errors.
#include <algorithm>
#include <cstdio>
#include <limits>

#include "base/error.h"
#include "gguf/reader.h"
#include "tokenizer/vocab.h"

namespace sluice::tok {

namespace {

using gguf::KeyValue;
using gguf::ValueType;

// GGUF token_type values (spec §2.1) -> llama.cpp attribute bits.
uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;  // 0 and anything else
  }
}

std::string short_text(std::string_view s) {
  std::string r;
  for (char c : s.substr(0, 40)) {
    if (c == '\n') r += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) r += strfmt("\\x%02x", static_cast<unsigned char>(c));
    else r += c;
  }
  if (s.size() > 40) r += "...";
  return r;
}

void read_texts(Vocab& v, const KeyValue& kv) {
  const auto n = static_cast<uint64_t>(v.n_vocab);
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; ++i) total += kv.str_lens[i] ? kv.str_lens[i] : 24;
  if (total > std::numeric_limits<uint32_t>::max())
    fail("%s: tokenizer.ggml.tokens holds %llu bytes of text, more than sluice supports (4 GiB)", v.name.c_str(),
         static_cast<unsigned long long>(total));
  v.arena.reserve(total);
  v.text_off.resize(n + 1);
  for (uint64_t i = 0; i < n; ++i) {
    v.text_off[i] = static_cast<uint32_t>(v.arena.size());
    std::string_view s = kv.string_at(i);
    if (s.empty()) {
      // llama.cpp renames empty tokens so that they stay addressable by text.
      std::fprintf(stderr, "warning: %s: empty token at index %llu, renamed [EMPTY_%llu]\n", v.name.c_str(),
                   static_cast<unsigned long long>(i), static_cast<unsigned long long>(i));
      v.arena += strfmt("[EMPTY_%llu]", static_cast<unsigned long long>(i));
    } else {
      v.arena.append(s);
    }
  }
  v.text_off[n] = static_cast<uint32_t>(v.arena.size());

  // Text -> id. Some official Gemma 4 files repeat a few token strings (llama.cpp issue
  // #25739, spec §2.1): keep every id for decoding, and the first id for lookups.
  v.text_to_id.reserve(n);
  int32_t dup_first = kNoToken, dup_second = kNoToken;
  for (int32_t i = 0; i < v.n_vocab; ++i) {
    auto [it, inserted] = v.text_to_id.emplace(v.text(i), i);
    if (!inserted) {
      if (v.n_duplicates++ == 0) {
        dup_first = it->second;
        dup_second = i;
      }
    }
  }
  if (v.n_duplicates)
    std::fprintf(stderr,
                 "warning: %s: %zu duplicate token string(s) in tokenizer.ggml.tokens (first: '%s' has "
                 "ids %d and %d); text lookups use the first id\n",
                 v.name.c_str(), v.n_duplicates, short_text(v.text(dup_first)).c_str(), dup_first, dup_second);
}

void read_scores(Vocab& v, const gguf::GgufFile& f) {
  v.scores.assign(static_cast<size_t>(v.n_vocab), 0.0f);
  const KeyValue* kv = f.find("tokenizer.ggml.scores");
  if (!kv) return;
  if (kv->type != ValueType::ARRAY || (kv->elem_type != ValueType::F32 && kv->elem_type != ValueType::I32))
    fail("%s: tokenizer.ggml.scores has type %s, expected an array of f32 (or i32)", v.name.c_str(),
         kv->type_string().c_str());
  if (kv->count < static_cast<uint64_t>(v.n_vocab))
    fail("%s: tokenizer.ggml.scores has %llu entries, fewer than the %d tokens", v.name.c_str(),
         static_cast<unsigned long long>(kv->count), v.n_vocab);
  for (int32_t i = 0; i < v.n_vocab; ++i)
    v.scores[i] = static_cast<float>(gguf::load_float(kv->elem_type, kv->elem_ptr(i)));
}

void read_types(Vocab& v, const gguf::GgufFile& f) {
  v.attrs.assign(static_cast<size_t>(v.n_vocab), kAttrNormal);  // missing key: all NORMAL
  const KeyValue* kv = f.find("tokenizer.ggml.token_type");
  if (!kv) return;
  if (kv->type != ValueType::ARRAY || !gguf::is_integer(kv->elem_type))
    fail("%s: tokenizer.ggml.token_type has type %s, expected an array of i32", v.name.c_str(),
         kv->type_string().c_str());
  if (kv->count < static_cast<uint64_t>(v.n_vocab))
    fail("%s: tokenizer.ggml.token_type has %llu entries, fewer than the %d tokens", v.name.c_str(),
         static_cast<unsigned long long>(kv->count), v.n_vocab);
  // Any integer element type is accepted (llama.cpp wants i32); values outside 0..6 are
  // UNDEFINED. A u64 is clamped so that it cannot wrap into a valid type.
  const bool is_u64 = kv->elem_type == ValueType::U64;
  for (int32_t i = 0; i < v.n_vocab; ++i) {
    const int64_t t = is_u64 ? static_cast<int64_t>(
                                   std::min<uint64_t>(gguf::load_uint(kv->elem_type, kv->elem_ptr(i)), 1000))
                             : gguf::load_int(kv->elem_type, kv->elem_ptr(i));
    v.attrs[i] = attr_from_type(t);
  }
}

// Special-token ids (spec §2). llama.cpp ignores an out-of-range id with a warning; a file
// that says its BOS is token 300000 of 262144 is broken, so sluice rejects it.
void read_special_ids(Vocab& v, const gguf::GgufFile& f) {
  struct Key {
    const char* key;
    int32_t* id;
  };
  const Key keys[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},
      {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.seperator_token_id", &v.sep},
      {"tokenizer.ggml.padding_token_id", &v.pad},
      {"tokenizer.ggml.mask_token_id", &v.mask},
      {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
      // deprecated spellings of the FIM keys, read after the new ones like llama.cpp does
      {"tokenizer.ggml.prefix_token_id", &v.fim_pre},
      {"tokenizer.ggml.suffix_token_id", &v.fim_suf},
      {"tokenizer.ggml.middle_token_id", &v.fim_mid},
  };
  for (const Key& k : keys) {
    // A default outside the vocabulary (LLaMA's BOS 1 in a 1-token vocab) is dropped.
    if (*k.id >= v.n_vocab) *k.id = kNoToken;
    if (!f.has(k.key)) continue;
    const uint64_t id = f.get_uint(k.key);
    if (id >= static_cast<uint64_t>(v.n_vocab))
      fail("%s: %s = %llu is not a token id (the vocabulary has %d tokens)", v.name.c_str(), k.key,
           static_cast<unsigned long long>(id), v.n_vocab);
    *k.id = static_cast<int32_t>(id);
  }
}

// tokenizer.ggml.model: which algorithm the vocabulary is for.
TokenizerModel read_model(const Vocab& v, const gguf::GgufFile& f) {
  if (!f.has("tokenizer.ggml.model"))
    fail("%s: missing key 'tokenizer.ggml.model': the file has no tokenizer", v.name.c_str());
  const std::string_view model = f.get_string("tokenizer.ggml.model");
  if (model == "gemma4") return TokenizerModel::kGemma4Bpe;
  if (model != "llama")
    fail(
        "%s: tokenizer.ggml.model = \"%.*s\" is not supported (sluice knows \"llama\" for Gemma 3 "
        "and \"gemma4\" for Gemma 4)",
        v.name.c_str(), int(model.size()), model.data());
  // Spec §12.7: Ollama-made Gemma 4 files are said to declare "llama"; their scores are
  // placeholders, so only the merges give a usable tokenizer.
  if (f.get_string_or("general.architecture", "") == "gemma4" && f.has("tokenizer.ggml.merges")) {
    std::fprintf(stderr,
                 "warning: %s: tokenizer.ggml.model is \"llama\" but the architecture is gemma4 and "
                 "merges are present; using the Gemma 4 BPE tokenizer\n",
                 v.name.c_str());
    return TokenizerModel::kGemma4Bpe;
  }
  return TokenizerModel::kSpm;
}

// Defaults by vocab type (llama.cpp llama_vocab::impl::load), before the file's keys.
void set_model_defaults(Vocab& v) {
  if (v.model == TokenizerModel::kSpm) {
    v.bos = 1;  // LLaMA's values; every Gemma 3 file overrides them
    v.eos = 2;
    v.unk = 0;
    v.add_space_prefix = true;
    v.clean_spaces = false;
    v.add_bos = true;
    v.add_eos = false;
  } else {
    v.add_space_prefix = false;
    v.clean_spaces = true;  // llama.cpp's BPE default; the gemma4 pre-type keeps it
    v.add_bos = false;
    v.add_eos = false;
  }
}

void read_token_count(Vocab& v, const KeyValue& tokens) {
  if (tokens.count == 0) fail("%s: tokenizer.ggml.tokens is empty", v.name.c_str());
  if (tokens.count > static_cast<uint64_t>(std::numeric_limits<int32_t>::max() / 2))
    fail("%s: tokenizer.ggml.tokens has %llu entries, too many", v.name.c_str(),
         static_cast<unsigned long long>(tokens.count));
  v.n_vocab = static_cast<int32_t>(tokens.count);
}

// The ids of the byte tokens, in both spellings: "<0x41>" (SPM byte fallback) and the raw byte.
void index_byte_tokens(Vocab& v) {
  v.byte_hex_id.fill(kNoToken);
  v.byte_raw_id.fill(kNoToken);
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char hex[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    v.byte_hex_id[b] = v.find(std::string_view(hex, 6));
    const char raw = static_cast<char>(b);
    v.byte_raw_id[b] = v.find(std::string_view(&raw, 1));
  }
}

// tokenizer.ggml.add_{bos,eos,sep}_token, checked against the special ids they need.
void read_add_flags(Vocab& v, const gguf::GgufFile& f) {
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", v.add_eos);
  v.add_sep = f.get_bool_or("tokenizer.ggml.add_sep_token", v.add_sep);
  if (v.model == TokenizerModel::kGemma4Bpe && !v.add_bos) {
    // Some early Gemma 4 files say false; llama.cpp forces true (PR #21500, spec §12.5).
    std::fprintf(stderr, "warning: %s: tokenizer.ggml.add_bos_token is false; forcing true for Gemma 4\n",
                 v.name.c_str());
    v.add_bos = true;
  }
  if (v.add_bos && v.bos == kNoToken)
    fail(
        "%s: tokenizer.ggml.add_bos_token is true but the vocabulary has no BOS token "
        "(tokenizer.ggml.bos_token_id)",
        v.name.c_str());
  if (v.add_eos && v.eos == kNoToken)
    fail(
        "%s: tokenizer.ggml.add_eos_token is true but the vocabulary has no EOS token "
        "(tokenizer.ggml.eos_token_id)",
        v.name.c_str());
}

// llama.cpp's "newline token": SPM takes the byte token for '\n', BPE tokenizes "\n"
// (before special tokens are known). Only informational for sluice. llama.cpp's fallback
// is the PAD id as it stood before the keys were read: none for both models.
void find_linefeed(Vocab& v) {
  if (v.model == TokenizerModel::kSpm) {
    v.linefeed = v.byte_hex_id['\n'] != kNoToken ? v.byte_hex_id['\n'] : v.byte_raw_id['\n'];
    return;
  }
  std::vector<int32_t> ids;
  bpe_gemma4_tokenize(v, "\n", ids);
  v.linefeed = ids.empty() ? kNoToken : ids[0];
}

}  // namespace

std::unique_ptr<Vocab> load_vocab(const gguf::GgufFile& f) {
  auto vp = std::make_unique<Vocab>();
  Vocab& v = *vp;
  v.name = f.name();
  v.model = read_model(v, f);
  set_model_defaults(v);
  v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

  const KeyValue& tokens = f.get_array("tokenizer.ggml.tokens", ValueType::STRING);
  read_token_count(v, tokens);
  read_scores(v, f);
  read_types(v, f);
  read_texts(v, tokens);
  index_byte_tokens(v);
  if (v.model == TokenizerModel::kGemma4Bpe) load_merges(v, f);
  read_special_ids(v, f);
  read_add_flags(v, f);
  find_linefeed(v);

  derive_special_tokens(v);
  build_special_index(v);
  build_byte_pairs(v);
  build_pieces(v);
  return vp;
}

}  // namespace sluice::tok
