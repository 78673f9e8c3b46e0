// Templates come from untrusted GGUF files: whatever the source, rendering must end in
// output or a sluice::Error — no crash, hang, runaway memory or undefined behaviour.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "chat/builtin_templates.h"
#include "unit/chat/chat_test_util.h"

namespace sluice::chat {
namespace {

using testing::render_error;

jinja::Limits small_limits() {
  jinja::Limits l;
  l.max_steps = 200'000;
  l.max_bytes = 1 << 20;
  l.max_items = 1 << 16;
  return l;
}

// Parses and renders; returns false if anything but sluice::Error escaped.
bool survives(const std::string& source) {
  try {
    ChatTemplate t(source, "<bos>", "<eos>", small_limits());
    t.set_fixed_time(testing::fixed_time());
    t.render(testing::test_messages(), true, testing::test_vars());
  } catch (const sluice::Error&) {
  } catch (...) {
    return false;
  }
  return true;
}

std::vector<std::string> corpus() {
  return {
      builtin_template(ChatArch::Gemma3),
      builtin_template(ChatArch::Gemma4),
      "{%- for m in messages -%}{{ '<|' ~ m.role ~ '|>' }}{{ m.content | trim }}{% if not loop.last %}\n{% endif %}"
      "{%- endfor -%}{% if add_generation_prompt %}<|assistant|>{% endif %}",
      "{% set ns = namespace(a=[], n=0) %}{% macro f(x, y=2) %}{{ x * y }}{{ caller() if caller is defined }}{% endmacro %}"
      "{% for k, v in d | dictsort %}{% set ns.n = ns.n + 1 %}{{ f(v, y=ns.n) }}{% else %}none{% endfor %}"
      "{% call f(3) %}c{% endcall %}{{ l | select('odd') | map('string') | join(',') }}{{ s[::-1] | title }}"
      "{% raw %}{{ raw }}{% endraw %}{# comment #}{{ {'k': [1, 2.5, none, true]} | tojson(indent=2) }}",
      "{% filter upper %}{% with a = 1 %}{{ a }}{% endwith %}{% endfilter %}{{ '%s|%d' % ('x', 3) }}"
      "{{ 'a{}'.format(1) }}{{ range(3) | list }}{{ 1 if n is none else 2 }}{{ messages[1:] | length }}",
  };
}

TEST(Robustness, MutatedTemplatesOnlyThrowSluiceErrors) {
  static const char* const kInserts[] = {"{{",
                                         "}}",
                                         "{%",
                                         "%}",
                                         "{#",
                                         "#}",
                                         "-",
                                         "+",
                                         "'",
                                         "\"",
                                         "(",
                                         ")",
                                         "[",
                                         "]",
                                         "{",
                                         "}",
                                         "|",
                                         ".",
                                         ",",
                                         "=",
                                         "\\",
                                         "\n",
                                         " ",
                                         "endif",
                                         "for",
                                         "in",
                                         "if",
                                         "not",
                                         "is",
                                         "~",
                                         "*",
                                         "**",
                                         "//",
                                         ":",
                                         "0",
                                         "é",
                                         "{% endfor %}",
                                         "{% if x %}",
                                         "{{ x.",
                                         "loop.",
                                         "%s",
                                         "\xF0\x9F\x98"};
  std::mt19937 rng(1234);
  const auto base = corpus();
  int cases = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string s = base[rng() % base.size()];
    const int edits = 1 + rng() % 4;
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const size_t at = rng() % (s.size() + 1);
      switch (rng() % 5) {
        case 0: s.resize(at); break;                                         // truncate
        case 1: s.erase(at, rng() % 40); break;                              // delete
        case 2: s.insert(at, kInserts[rng() % std::size(kInserts)]); break;  // insert
        case 3:
          if (at < s.size()) s[at] = static_cast<char>(rng() % 128);
          break;                                                               // replace
        default: s.insert(at, s.substr(rng() % s.size(), rng() % 30)); break;  // duplicate
      }
    }
    ASSERT_TRUE(survives(s)) << "round " << round << ":\n" << s;
    ++cases;
  }
  EXPECT_EQ(cases, 4000);
}

TEST(Robustness, RandomTokenSoupOnlyThrowsSluiceErrors) {
  static const char* const kTokens[] = {"{{ ",
                                        " }}",
                                        "{% ",
                                        " %}",
                                        "{%- ",
                                        " -%}",
                                        "if ",
                                        "for ",
                                        "x ",
                                        "in ",
                                        "l ",
                                        "endif",
                                        "endfor",
                                        "else",
                                        "set ",
                                        "= ",
                                        "macro ",
                                        "m(",
                                        ")",
                                        "[",
                                        "]",
                                        "|trim",
                                        "|join(',')",
                                        "|map('upper')",
                                        " is defined",
                                        "loop.index",
                                        " ~ ",
                                        " + ",
                                        "'s'",
                                        "1",
                                        "none",
                                        ".a",
                                        "['b']",
                                        ",",
                                        "namespace(",
                                        "ns.x",
                                        "raise_exception('r')",
                                        "\n",
                                        "text "};
  std::mt19937 rng(99);
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    const int n = 1 + rng() % 40;
    for (int k = 0; k < n; ++k) s += kTokens[rng() % std::size(kTokens)];
    ASSERT_TRUE(survives(s)) << s;
  }
}

TEST(Robustness, DeepNestingIsRejectedNotRecursedInto) {
  EXPECT_THAT(render_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
              ::testing::HasSubstr("nested too deeply"));
  EXPECT_THAT(render_error("{{ " + std::string(50000, '[') + std::string(50000, ']') + " }}"),
              ::testing::HasSubstr("nested too deeply"));
  std::string ifs;
  for (int k = 0; k < 20000; ++k) ifs += "{% if true %}";
  EXPECT_THAT(render_error(ifs), ::testing::HasSubstr("nested too deeply"));
  std::string nots = "{{ ";
  for (int k = 0; k < 50000; ++k) nots += "not ";
  EXPECT_THAT(render_error(nots + "1 }}"), ::testing::HasSubstr("nested too deeply"));
  std::string chain = "{{ 1";
  for (int k = 0; k < 50000; ++k) chain += " + 1";
  EXPECT_THAT(render_error(chain + " }}"), ::testing::HasSubstr("nested too deeply"));
  std::string filters = "{{ s";
  for (int k = 0; k < 50000; ++k) filters += "|trim";
  EXPECT_THAT(render_error(filters + " }}"), ::testing::HasSubstr("nested too deeply"));
  std::string attrs = "{{ d";
  for (int k = 0; k < 50000; ++k) attrs += ".a";
  EXPECT_THAT(render_error(attrs + " }}"), ::testing::HasSubstr("nested too deeply"));
}

TEST(Robustness, RunawayRenderingIsBounded) {
  const jinja::Limits lim = small_limits();
  EXPECT_THAT(render_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", lim),
              ::testing::HasSubstr("macro calls nested deeper than"));
  EXPECT_THAT(render_error("{% for i in range(50000) %}{% for j in range(50000) %}{% endfor %}{% endfor %}", lim),
              ::testing::HasSubstr("evaluation budget"));
  EXPECT_THAT(render_error("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", lim),
              ::testing::HasSubstr("exceeds"));
  EXPECT_THAT(render_error("{{ 'x' * 1000000000000 }}", lim), ::testing::HasSubstr("too large"));
  EXPECT_THAT(render_error("{{ [1] * 1000000000000 }}", lim), ::testing::HasSubstr("too large"));
  EXPECT_THAT(
      render_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                   lim),
      ::testing::HasSubstr("too large"));
  EXPECT_THAT(render_error("{{ 'x'.center(1000000000000) }}", lim), ::testing::HasSubstr("too large"));
  EXPECT_THAT(render_error("{{ ('ab' * 1000) | replace('a', 'x' * 2000) }}", lim), ::testing::HasSubstr("too large"));
  EXPECT_THAT(
      render_error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}", lim),
      ::testing::HasSubstr("nested deeper"));
}

TEST(Robustness, LongNamespaceChainsAndCyclesAreFreedSafely) {
  // Without care, a 50000-long chain of namespaces would be destroyed recursively, and a
  // namespace holding itself would leak (LeakSanitizer checks the latter under ASan).
  EXPECT_EQ(testing::render("{% set h = namespace(cur=none) %}{% for i in range(50000) %}"
                            "{% set h.cur = namespace(p=h.cur) %}{% endfor %}done"),
            "done");
  EXPECT_EQ(testing::render("{% set ns = namespace() %}{% set ns.me = ns %}{% macro m() %}{{ m }}{% endmacro %}ok"),
            "ok");
  EXPECT_THAT(render_error("{% set h = namespace(cur=none) %}{% for i in range(5000) %}"
                           "{% set h.cur = namespace(p=h.cur) %}{% endfor %}{{ h }}"),
              ::testing::HasSubstr("nested deeper"));
}

TEST(Robustness, BadInputDataIsAnError) {
  ChatTemplate t("{{ messages }}", "", "");
  nlohmann::json bad = nlohmann::json::array({{{"role", "user"}, {"content", "\xff"}}});
  EXPECT_THROW(t.render(bad, false), sluice::Error);
  nlohmann::json deep = 1;
  for (int k = 0; k < 1000; ++k) deep = nlohmann::json::array({deep});
  EXPECT_THROW(t.render(nlohmann::json::array({deep}), false), sluice::Error);
  EXPECT_THROW(ChatTemplate("x", "\xff", ""), sluice::Error);
}

TEST(Robustness, OneTemplateRendersFromManyThreads) {
  const ChatTemplate t(builtin_template(ChatArch::Gemma4), "<bos>", "<eos>");
  const auto msgs = testing::test_messages();
  const std::string want = t.render(msgs, true, nlohmann::ordered_json::object());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int r = 0; r < 100; ++r)
        if (t.render(msgs, true, nlohmann::ordered_json::object()) != want) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace sluice::chat
