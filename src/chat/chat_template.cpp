#include "chat/chat_template.h"

#include "base/error.h"
#include "jinja/json_bridge.h"
#include "jinja/pystr.h"
#include "jinja/template.h"

namespace sluice::chat {

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token,
                           const jinja::Limits& limits)
    : source_(std::move(source)), bos_(std::move(bos_token)), eos_(std::move(eos_token)) {
  if (!jinja::py::valid_utf8(bos_) || !jinja::py::valid_utf8(eos_))
    fail("chat template: special token text is not valid UTF-8");
  tmpl_ = std::make_shared<const jinja::Template>(source_, limits);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

void ChatTemplate::set_fixed_time(const std::tm& local_time, int microseconds) {
  jinja::Clock c;
  c.tm = local_time;
  // Fill tm_wday/tm_yday from the date so %a, %A, %j... agree with Python's timetuple().
  std::tm probe = local_time;
  probe.tm_isdst = 0;
  const std::time_t t = timegm(&probe);
  std::tm norm{};
  gmtime_r(&t, &norm);
  c.tm.tm_wday = norm.tm_wday;
  c.tm.tm_yday = norm.tm_yday;
  c.tm.tm_isdst = -1;
  c.micro = microseconds;
  fixed_time_ = c;
}

template <class J>
std::string ChatTemplate::render_impl(const J& messages, bool add_generation_prompt, const J& extra) const {
  if (!extra.is_null() && !extra.is_object()) fail("chat template: extra kwargs must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  vars.emplace_back("messages", jinja::from_json(messages));
  vars.emplace_back("tools", jinja::Value::none());
  vars.emplace_back("documents", jinja::Value::none());
  vars.emplace_back("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  vars.emplace_back("bos_token", jinja::Value::string(bos_));
  vars.emplace_back("eos_token", jinja::Value::string(eos_));
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (it.key() == "messages" || it.key() == "add_generation_prompt")
        fail("chat template: extra kwargs may not set '%s'", it.key().c_str());
      if (!jinja::py::valid_utf8(it.key())) fail("chat template: extra kwarg name is not valid UTF-8");
      jinja::Value v = jinja::from_json(it.value());
      bool replaced = false;
      for (auto& [k, x] : vars)
        if (k == it.key()) {
          x = v;
          replaced = true;
        }
      if (!replaced) vars.emplace_back(it.key(), std::move(v));
    }
  }
  return tmpl_->render(std::move(vars), fixed_time_ ? *fixed_time_ : jinja::wall_clock());
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_kwargs) const {
  return render_impl(messages, add_generation_prompt, extra_kwargs);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_kwargs) const {
  return render_impl(messages, add_generation_prompt, extra_kwargs);
}

}  // namespace sluice::chat
