#include "server/model_context.h"

#include <ctime>
#include <type_traits>

#include "base/error.h"
#include "gguf/reader.h"

namespace sluice::server {

SamplingDefaults SamplingDefaults::from_gguf(const gguf::GgufFile& f) {
  SamplingDefaults d;
  for_each_field(d, [&f](const char* key, const char*, auto& out) {
    if (!f.has(key)) return;
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(out)>, std::optional<float>>) {
      out = static_cast<float>(f.get_float(key));
    } else {
      out = static_cast<int32_t>(f.get_int(key));
    }
  });
  return d;
}

ModelContext::ModelContext(const gguf::GgufFile& f, const Tokenizer& tok, std::string alias, int32_t ctx_size,
                           int32_t max_tokens_cap)
    : tok_(tok),
      alias_(std::move(alias)),
      format_(chat::chat_format(chat::chat_arch_from_gguf(f.get_string("general.architecture")), tok)),
      ctx_size_(ctx_size),
      max_tokens_cap_(max_tokens_cap),
      defaults_(SamplingDefaults::from_gguf(f)),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  if (alias_.empty()) alias_ = std::string(f.get_string_or("general.name", f.get_string("general.architecture")));
  std::string source(f.get_string_or("tokenizer.chat_template", ""));
  file_template_ = !source.empty();
  if (source.empty()) source = chat::builtin_template(format_.arch);
  template_tools_ = source.find("tools") != std::string::npos;
  template_tool_responses_ = source.find("tool_responses") != std::string::npos;
  const std::string bos = tok.bos() >= 0 ? std::string(tok.token_text(tok.bos())) : "";
  const std::string eos = tok.eos() >= 0 ? std::string(tok.token_text(tok.eos())) : "";
  tmpl_ = std::make_unique<chat::ChatTemplate>(source, bos, eos);
  // A token's text as stored is at least as long as the text it stands for ("▁" is 3 bytes
  // for a space, "<0x41>" 6 for one byte).
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    max_token_bytes_ = std::max(max_token_bytes_, tok.token_text(id).size());
}

grammar::GrammarCache& ModelContext::grammars() const {
  std::call_once(grammars_once_, [this] {
    grammars_ = std::make_unique<grammar::GrammarCache>(grammar::TokenVocab::from_tokenizer(tok_));
  });
  return *grammars_;
}

std::string ModelContext::render_chat(const nlohmann::json& messages, const nlohmann::json& template_kwargs) const {
  std::lock_guard<std::mutex> lk(tmpl_mu_);
  return tmpl_->render(messages, true, template_kwargs);
}

}  // namespace sluice::server
