// Template errors: every failure is a sluice::Error whose message says where it happened.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "unit/chat/chat_test_util.h"

namespace sluice::chat {
namespace {

using testing::render;
using testing::render_error;

std::string syntax_error_of(const std::string& source) {
  try {
    ChatTemplate t(source, "", "");
  } catch (const sluice::Error& e) {
    return e.what();
  }
  return "";
}

using ::testing::HasSubstr;

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(
      syntax_error_of("line one\n  {% for %}"),
      "chat template syntax error at line 2, column 10: expected an assignment target, got 'end of statement block'");
  EXPECT_EQ(syntax_error_of("{{ 1 + }}"),
            "chat template syntax error at line 1, column 8: unexpected 'end of print statement'");
  EXPECT_EQ(syntax_error_of("ab\ncd {{ 'unterminated }}"),
            "chat template syntax error at line 2, column 7: unexpected char '''");
  EXPECT_EQ(
      syntax_error_of("{% if x %}\nbody"),
      "chat template syntax error at line 2, column 5: unexpected end of template, expected 'elif' or 'else' or 'endif'");
}

TEST(JinjaErrors, SyntaxErrorKinds) {
  EXPECT_THAT(syntax_error_of("{% endfor %}"), HasSubstr("Encountered unknown tag 'endfor'"));
  EXPECT_THAT(syntax_error_of("{% frobnicate %}"), HasSubstr("Encountered unknown tag 'frobnicate'"));
  EXPECT_THAT(syntax_error_of("{{ x | nosuchfilter }}"), HasSubstr("No filter named 'nosuchfilter'"));
  EXPECT_THAT(syntax_error_of("{{ x is nosuchtest }}"), HasSubstr("No test named 'nosuchtest'"));
  EXPECT_THAT(syntax_error_of("{{ (1, 2 }}"), HasSubstr("unexpected '}', expected ')'"));
  EXPECT_THAT(syntax_error_of("{% macro m(a=1, b) %}{% endmacro %}"),
              HasSubstr("non-default argument follows default"));
  EXPECT_THAT(syntax_error_of("{% set 1 = 2 %}"), HasSubstr("can't assign to 'integer'"));
  EXPECT_THAT(syntax_error_of("{% break %}"), HasSubstr("'break' outside loop"));
  EXPECT_THAT(syntax_error_of("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
              HasSubstr("'continue' outside loop"));
  EXPECT_THAT(syntax_error_of("{% for loop in y %}{% endfor %}"), HasSubstr("special loop variable"));
  EXPECT_THAT(syntax_error_of("{% include 'other.jinja' %}"), HasSubstr("not supported"));
  EXPECT_THAT(syntax_error_of("{# never closed"), HasSubstr("Missing end of comment tag"));
  EXPECT_THAT(syntax_error_of("{% raw %} never closed"), HasSubstr("Missing end of raw directive"));
  EXPECT_THAT(syntax_error_of("{{ '\\xZZ' }}"), HasSubstr("truncated \\xXX escape"));
  EXPECT_THAT(syntax_error_of("bad \xff utf-8"), HasSubstr("not valid UTF-8"));
}

TEST(JinjaErrors, UnknownFilterInsideIfFailsOnlyWhenUsed) {
  // jinja2 defers unknown filters in if-blocks and conditional expressions to run time.
  EXPECT_EQ(render("{% if false %}{{ x | nosuchfilter }}{% endif %}ok"), "ok");
  EXPECT_THAT(render_error("{% if true %}{{ x | nosuchfilter }}{% endif %}"),
              HasSubstr("No filter named 'nosuchfilter'"));
}

TEST(JinjaErrors, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(render_error("a\nb\n  {{ foo.bar }}"), "chat template error at line 3, column 9: 'foo' is undefined");
  EXPECT_EQ(render_error("{% for m in messages %}\n{{ m.content.upper().nope() }}{% endfor %}"),
            "chat template error at line 2, column 26: 'str object' has no attribute 'nope'");
  EXPECT_EQ(render_error("{{ raise_exception('custom ' ~ 42) }}"),
            "chat template error at line 1, column 19: custom 42");
}

TEST(JinjaErrors, RuntimeErrorKinds) {
  EXPECT_THAT(render_error("{{ 1 / 0 }}"), HasSubstr("division by zero"));
  EXPECT_THAT(render_error("{{ 'a' + 1 }}"), HasSubstr("can only concatenate str (not \"int\") to str"));
  EXPECT_THAT(render_error("{{ foo + 1 }}"), HasSubstr("'foo' is undefined"));
  EXPECT_THAT(render_error("{{ d.missing.deeper }}"), HasSubstr("'dict object' has no attribute 'missing'"));
  EXPECT_THAT(render_error("{{ l.append(4) }}"), HasSubstr("access to attribute 'append' of 'list' object is unsafe."));
  EXPECT_THAT(render_error("{% set a, b = [1, 2, 3] %}"), HasSubstr("too many values to unpack (expected 2)"));
  EXPECT_THAT(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
              HasSubstr("macro 'm' takes not more than 1 argument(s)"));
  EXPECT_THAT(render_error("{% macro m(a) %}{% endmacro %}{{ m(b=2) }}"),
              HasSubstr("macro 'm' takes no keyword argument 'b'"));
  EXPECT_THAT(render_error("{% set x = 5 %}{% set x.y = 1 %}"),
              HasSubstr("cannot assign attribute on non-namespace object"));
  EXPECT_THAT(render_error("{{ 1 < 'a' }}"), HasSubstr("'<' not supported between instances of 'int' and 'str'"));
  EXPECT_THAT(render_error("{{ range(100001) | length }}"), HasSubstr("MAX_RANGE (100000)"));
  EXPECT_THAT(render_error("{{ none[1:] ~ n }}"), HasSubstr("'NoneType' object is not subscriptable"));
  EXPECT_THAT(render_error("{{ undefined_name | tojson }}"),
              HasSubstr("Object of type Undefined is not JSON serializable"));
  EXPECT_THAT(render_error("{{ 9223372036854775807 + 1 }}"), HasSubstr("integer overflow"));
  EXPECT_THAT(render_error("{{ l | map('int') | first | nope }}"), HasSubstr("No filter named 'nope'"));
}

TEST(JinjaErrors, SelectIsLazyLikeAGenerator) {
  // jinja2's select/map return generators: their errors appear only when consumed.
  EXPECT_EQ(render("{{ (i | map('string')) is defined }}"), "True");
  EXPECT_THAT(render_error("{{ i | map('string') | list }}"), HasSubstr("'int' object is not iterable"));
}

}  // namespace
}  // namespace sluice::chat
