// Shared helpers for the chat tests: render a template with a fixed context.
#pragma once

#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace sluice::chat::testing {

// The messages and variables every feature case renders with (the same context the
// expected strings were produced with in Python jinja2).
inline nlohmann::ordered_json test_messages() {
  return nlohmann::ordered_json::parse(R"([{"role": "system", "content": " Sys "},
      {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])");
}

inline nlohmann::ordered_json test_vars() {
  return nlohmann::ordered_json::parse(R"({"d": {"a": 1, "b": [1, 2], "role": "user"},
      "s": "Hello World", "n": null, "l": [3, 1, 2], "i": 5, "f": 2.5, "e": []})");
}

inline std::tm fixed_time() {  // 2026-01-15 09:05:07, as in python/make_chat_golden.py
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 9;
  t.tm_min = 5;
  t.tm_sec = 7;
  return t;
}

inline std::string render(const std::string& source, bool add_generation_prompt = true,
                          const jinja::Limits& limits = {}) {
  ChatTemplate t(source, "<bos>", "<eos>", limits);
  t.set_fixed_time(fixed_time());
  return t.render(test_messages(), add_generation_prompt, test_vars());
}

// The message of the sluice::Error that rendering throws ("" if it does not throw).
inline std::string render_error(const std::string& source, const jinja::Limits& limits = {}) {
  try {
    render(source, true, limits);
  } catch (const sluice::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace sluice::chat::testing
