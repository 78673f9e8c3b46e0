#include "server/props.h"

#include "server/api_error.h"
#include "server/content_parts.h"

namespace sluice::server {

using nlohmann::json;

Reply props_reply(const ModelContext& model) {
  json gen = json::object();
  SamplingDefaults::for_each_field(model.defaults(), [&gen](const char*, const char* name, const auto& v) {
    if (v) gen[name] = *v;
  });
  // A file without tokenizer.chat_template is a base (pre-trained) model: chat requests still
  // render through the built-in template, but the model was never taught to answer turns.
  json tmpl = {{"in_file", model.has_file_template()},
               {"reasoning", model.format().reasons()},
               {"tools", model.template_mentions_tools()}};
  // llama-server's shape ("modalities": {"vision": bool}); the image budget sluice uses.
  json modalities = {{"vision", model.images() != nullptr}, {"audio", model.audio() != nullptr}};
  if (model.images()) modalities["image_tokens"] = model.images()->default_tokens;
  Reply r;
  r.body = dump_json({{"model", model.alias()},
                      {"n_ctx", model.ctx_size()},
                      {"max_tokens_cap", model.max_tokens_cap()},
                      {"default_generation_settings", gen},
                      {"chat_template", tmpl},
                      {"modalities", modalities}});
  return r;
}

}  // namespace sluice::server
