// sluice_chat_render_tool FIXTURE.json
//
// Renders every case of a chat-template fixture with sluice's engine and prints a JSON array
// with one result per case: {"ok": true, "text": "..."} or {"ok": false, "error": "..."}.
// tests/python/test_chat_templates.py compares the results with what Python jinja2 rendered.
//
// Fixture: {"template": SRC, "bos_token": S, "eos_token": S, "now": [Y, M, D, h, m, s],
//           "cases": [{"messages": [...], "add_generation_prompt": B, "kwargs": {...},
//                      "template": SRC (optional override)}, ...]}
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "chat/chat_template.h"

using nlohmann::ordered_json;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FIXTURE.json\n", argv[0]);
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 2;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  ordered_json fx;
  try {
    fx = ordered_json::parse(ss.str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bad fixture: %s\n", e.what());
    return 2;
  }
  const std::string bos = fx.value("bos_token", std::string("<bos>"));
  const std::string eos = fx.value("eos_token", std::string("<eos>"));
  std::tm now{};
  if (fx.contains("now")) {
    const auto& n = fx["now"];
    now.tm_year = n.at(0).get<int>() - 1900;
    now.tm_mon = n.at(1).get<int>() - 1;
    now.tm_mday = n.at(2).get<int>();
    now.tm_hour = n.at(3).get<int>();
    now.tm_min = n.at(4).get<int>();
    now.tm_sec = n.at(5).get<int>();
  }
  // One parsed template per distinct source; a syntax error is that case's result.
  std::map<std::string, std::shared_ptr<sluice::chat::ChatTemplate>> parsed;
  std::map<std::string, std::string> parse_errors;
  ordered_json out = ordered_json::array();
  for (const auto& c : fx.at("cases")) {
    const std::string src = c.contains("template") ? c["template"].get<std::string>()
                                                   : fx.at("template").get<std::string>();
    ordered_json r;
    try {
      if (parse_errors.count(src)) throw sluice::Error(parse_errors[src]);
      auto& t = parsed[src];
      if (!t) {
        try {
          t = std::make_shared<sluice::chat::ChatTemplate>(src, bos, eos);
          t->set_fixed_time(now);
        } catch (const sluice::Error& e) {
          parsed.erase(src);
          parse_errors[src] = e.what();
          throw;
        }
      }
      const ordered_json kwargs = c.contains("kwargs") ? c["kwargs"] : ordered_json::object();
      r["ok"] = true;
      r["text"] = t->render(c.at("messages"), c.value("add_generation_prompt", false), kwargs);
    } catch (const sluice::Error& e) {
      r = ordered_json::object();
      r["ok"] = false;
      r["error"] = e.what();
    }
    out.push_back(std::move(r));
  }
  std::cout << out.dump(-1, ' ', true) << "\n";  // ASCII-only: safe whatever the reader's locale
  return 0;
}
