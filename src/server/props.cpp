#include "server/props.h"

#include "server/api_error.h"

namespace sluice::server {

using nlohmann::json;

Reply props_reply(const ModelContext& model) {
  const SamplingDefaults& d = model.defaults();
  json gen = json::object();
  auto put = [&gen](const char* key, const auto& v) {
    if (v) gen[key] = *v;
  };
  put("temperature", d.temperature);
  put("top_k", d.top_k);
  put("top_p", d.top_p);
  put("min_p", d.min_p);
  put("repetition_penalty", d.repeat_penalty);
  put("penalty_last_n", d.penalty_last_n);
  const bool gemma4 = model.arch() == chat::ChatArch::Gemma4;
  // A file without tokenizer.chat_template is a base (pre-trained) model: chat requests still
  // render through the built-in template, but the model was never taught to answer turns.
  json tmpl = {{"in_file", model.has_file_template()}, {"reasoning", gemma4},
               {"tools", model.template_mentions_tools()}};
  Reply r;
  r.body = dump_json({{"model", model.alias()},
                      {"n_ctx", model.ctx_size()},
                      {"max_tokens_cap", model.max_tokens_cap()},
                      {"default_generation_settings", gen},
                      {"chat_template", tmpl}});
  return r;
}

}  // namespace sluice::server
