// Tokenizer: the entry point (spec §4) and accessors. The algorithms live in vocab.cpp
// (loading), stop_tokens.cpp, special_split.cpp, spm.cpp, bpe.cpp and detokenize.cpp.
#include "tokenizer/tokenizer.h"

#include "base/error.h"
#include "gguf/reader.h"
#include "tokenizer/vocab.h"

namespace sluice {

Tokenizer::Tokenizer(std::unique_ptr<tok::Vocab> v) : v_(std::move(v)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(tok::load_vocab(file)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const tok::Vocab& v = *v_;
  if (text.size() >= UINT32_MAX) fail("cannot tokenize %zu bytes at once (limit 4 GiB)", text.size());
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  std::vector<tok::Fragment> frags;
  tok::split_special(v, text, parse_special, frags);

  if (add_special && v.add_bos) out.push_back(v.bos);
  std::string buf;
  bool prev_special = true;  // SPM dummy prefix: before the first fragment and after tokens
  for (const tok::Fragment& f : frags) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    // Escape spaces to U+2581 (spec §6.1 step 1, §7.1 step 1); no other normalization.
    buf.clear();
    if (v.model == TokenizerModel::kSpm && v.add_space_prefix && prev_special) buf += tok::kSpaceEscape;
    for (char c : text.substr(f.offset, f.length)) {
      if (c == ' ') buf += tok::kSpaceEscape;
      else buf.push_back(c);
    }
    if (v.model == TokenizerModel::kSpm) tok::spm_tokenize(v, buf, out);
    else tok::bpe_gemma4_tokenize(v, buf, out);
    prev_special = false;
  }
  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

TokenizerModel Tokenizer::model() const { return v_->model; }
int32_t Tokenizer::n_vocab() const { return v_->n_vocab; }
int32_t Tokenizer::bos() const { return v_->bos; }
int32_t Tokenizer::eos() const { return v_->eos; }
int32_t Tokenizer::eot() const { return v_->eot; }
int32_t Tokenizer::eom() const { return v_->eom; }
int32_t Tokenizer::unk() const { return v_->unk; }
int32_t Tokenizer::pad() const { return v_->pad; }
int32_t Tokenizer::sep() const { return v_->sep; }
int32_t Tokenizer::mask() const { return v_->mask; }
int32_t Tokenizer::linefeed() const { return v_->linefeed; }
bool Tokenizer::add_bos() const { return v_->add_bos; }
bool Tokenizer::add_eos() const { return v_->add_eos; }
bool Tokenizer::add_space_prefix() const { return v_->add_space_prefix; }
bool Tokenizer::clean_spaces() const { return v_->clean_spaces; }

bool Tokenizer::is_eog(int32_t id) const { return v_->valid_id(id) && v_->eog_flag[id]; }
const std::vector<int32_t>& Tokenizer::eog_ids() const { return v_->eog; }

uint32_t Tokenizer::token_attr(int32_t id) const {
  if (!v_->valid_id(id)) fail("token id %d is out of range (n_vocab %d)", id, v_->n_vocab);
  return v_->attrs[id];
}
std::string_view Tokenizer::token_text(int32_t id) const {
  if (!v_->valid_id(id)) fail("token id %d is out of range (n_vocab %d)", id, v_->n_vocab);
  return v_->text(id);
}
float Tokenizer::token_score(int32_t id) const {
  if (!v_->valid_id(id)) fail("token id %d is out of range (n_vocab %d)", id, v_->n_vocab);
  return v_->scores[id];
}
int32_t Tokenizer::token_id(std::string_view text) const { return v_->find(text); }
const std::vector<int32_t>& Tokenizer::special_tokens() const { return v_->special; }
size_t Tokenizer::n_duplicate_texts() const { return v_->n_duplicates; }

}  // namespace sluice
