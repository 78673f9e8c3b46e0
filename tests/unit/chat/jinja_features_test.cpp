// Every Jinja feature the engine supports, each compared with the output Python jinja2 3.1.6
// gives in Hugging Face's chat-template environment for the same template and context
// (expected strings produced with jinja2; see chat_test_util.h for the context).
#include <gtest/gtest.h>

#include "unit/chat/chat_test_util.h"

namespace sluice::chat {
namespace {

using testing::render;

struct FeatureCase {
  const char* name;
  const char* source;
  const char* expected;
};

const FeatureCase kCases[] = {
    {"trim_lstrip_blocks", "a\n  {% if true %}\n    b\n  {% endif %}\nc", "a\n    b\nc"},
    {"dash_strips_all", "a  {% if true -%}   b   {%- endif %}  c", "a  b  c"},
    {"plus_disables_lstrip_and_trim", "a\n  {%+ if true %}x{% endif +%}\ny", "a\n  x\ny"},
    {"comment_lstrip_trim", "  {# c #}\nx", "x"},
    {"comment_dash", "x {#- comment -#} y", "xy"},
    {"var_tags_not_lstripped", "  {{ \"v\" }}\n  {% set x = 1 %}\n  {{- x }}", "  v\n1"},
    {"for_lines", "{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}", "  1\n  2\n"},
    {"raw_block", "{% raw %}  {{ x }} {% endraw %}", "  {{ x }} "},
    {"raw_block_dash", "  {%- raw -%}  {{ x }}  {%- endraw -%}  z", "{{ x }}z"},
    {"trailing_newline_dropped", "line\n{% if true %}\n\ttab\n{% endif %}\nend\n", "line\n\ttab\nend"},
    {"crlf_normalized", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", "a\nb\n"},
    {"macro_whitespace", "{% macro m(x) %}\n  [{{ x }}]\n{% endmacro %}\n{{ m(1) }}{{ m(2) }}", "  [1]\n  [2]\n"},
    {"if_elif_else",
     "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %},{% endfor %}",
     "one,two,many,"},
    {"for_else_empty", "{% for x in e %}x{% else %}empty{% endfor %}", "empty"},
    {"for_else_after_break", "{% for x in [1, 2] %}{% break %}{% else %}else{% endfor %}", "else"},
    {"for_else_no_run_after_full_iteration",
     "{% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}else{% endfor %}", ""},
    {"loop_vars",
     "{% for x in [10, 20, 30] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"loop_prev_next_cycle",
     "{% for x in [1, 2, 3] %}{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }};{% endfor %}",
     "|2|a;1|3|b;2||a;"},
    {"loop_filter", "{% for x in [1, 2, 3, 4] if x is even %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}",
     "2:1/2 4:2/2 "},
    {"loop_changed", "{% for x in [1, 1, 2, 2, 1] %}{{ loop.changed(x) }} {% endfor %}", "True False True False True "},
    {"nested_loop_shadows_loop",
     "{% for a in [1, 2] %}{% for b in [3] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}", "1112"},
    {"continue", "{% for i in range(6) %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}", "024"},
    {"tuple_unpacking",
     "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
     "a=1;b=[1, 2];role=user;37"},
    {"set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12"},
    {"set_in_loop_does_not_leak",
     "{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }},{% endfor %}{{ x }}", "01,02,0"},
    {"set_in_if_leaks", "{% if true %}{% set x = 1 %}{% endif %}{{ x }}", "1"},
    {"block_set", "{% set t %}\n inner {{ 1 }}\n{% endset %}[{{ t }}]", "[ inner 1\n]"},
    {"block_set_filter", "{% set t | upper %}abc{% endset %}{{ t }}", "ABC"},
    {"namespace",
     "{% set ns = namespace(total=0, seen=[]) %}{% for i in l %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }} {{ ns.seen }} {{ ns.missing }}|",
     "6 [] |"},
    {"namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", "12"},
    {"macro_defaults_kwargs",
     "{% macro m(a, b=2, c=a) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(b=5, a=0) }} {{ m() }}|",
     "1-2-1 1-3-1 0-5-0 -2-|"},
    {"macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}",
     "1(2, 3){'x': 4}"},
    {"macro_recursion", "{% macro fact(n) %}{{ 1 if n <= 1 else n * fact(n - 1) | int }}{% endmacro %}{{ fact(6) }}",
     "720"},
    {"macro_sees_later_globals", "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}", "2"},
    {"call_block",
     "{% macro wrap(tag) %}<{{ tag }}>{{ caller('x') }}</{{ tag }}>{% endmacro %}{% call(v) wrap('b') %}in:{{ v }}{% endcall %}",
     "<b>in:x</b>"},
    {"filter_block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}", "HELLO WORLD"},
    {"with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "3[]"},
    {"generation_block", "{%- generation -%}gen {{ 1 }}{%- endgeneration -%}", "gen 1"},
    {"store_first_scoping", "{% for x in [1] %}[{{ s }}]{% endfor %}{% set s = 'new' %}{{ s }}", "[]new"},
    {"store_first_alias_to_outer",
     "{% for x in [1, 2] %}{% for y in [1] %}[{{ s }}]{% endfor %}{% set s = 'in' %}{{ s }}{% endfor %}{{ s }}",
     "[Hello World]in[Hello World]inHello World"},
    {"literals",
     "{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 1e-3 }} {{ 'a' 'b' }} {{ none }} {{ True }} {{ [1, 'a', none, true, 1.5] }} {{ {'k': \"it's\"} }} {{ (1,) }} {{ 1, 2 }}",
     "1000 31 15 5 1500.0 0.001 ab None True [1, 'a', None, True, 1.5] {'k': \"it's\"} (1,) (1, 2)"},
    {"string_escapes", "{{ \"\\u00e9\\U0001F600\\x41\\101\\t|\" }}{{ 'it\\'s' }}|{{ \"say \\\"hi\\\"\" }}|{{ '\\q' }}",
     "é😀AA\t|it's|say \"hi\"|\\q"},
    {"float_repr",
     "{{ 1.0 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ 0.1 + 0.2 }} {{ -0.0 }} {{ 2.5e-5 }}",
     "1.0 1e+20 1e+16 1000000000000000.0 0.0001 1e-05 0.3333333333333333 0.30000000000000004 -0.0 2.5e-05"},
    {"arithmetic",
     "{{ 7 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 % 2 }} {{ -7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 // 2.5 }}",
     "3.5 -4 2 -2 1.5 0.5 1024 0.25 64 4 4.0"},
    {"precedence",
     "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 'b' * 2 }} {{ not true == false }} {{ -3|abs }} {{ not 1 is none }} {{ 1 if false }}|",
     "7 9 abb True 3 True |"},
    {"concat_stringifies", "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ undefined_name ~ [1] }}", "a1NoneTrue1.5[1]"},
    {"repetition", "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 2 * 'x' }}", "ababab [1, 1] xx"},
    {"comparisons",
     "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 == true }} {{ [1, [2]] < [1, [3]] }} {{ (1, 'a') == (1, 'a') }} {{ [1] == (1,) }} {{ 'b' > 'a' }}",
     "True False True True True False True"},
    {"membership",
     "{{ 'b' in 'abc' }} {{ 'z' not in 'abc' }} {{ none in [none] }} {{ 'a' in d }} {{ 1 in d }} {{ 2 in l }} {{ 'x' in undefined_name }}",
     "True True True True False True False"},
    {"and_or_values", "{{ [] or 'x' }} {{ 0 and 1 }} {{ 'a' and 'b' }} {{ none or none }}|", "x 0 b None|"},
    {"ternary", "{{ 'y' if l else 'n' }} {{ 'y' if e else 'n' }} {{ 'a' if 1 is odd else 'b' }}", "y n a"},
    {"subscripts",
     "{{ l[0] }} {{ l[-1] }} {{ l[9] }}| {{ d['a'] }} {{ d.a }} {{ d['zz'] }}| {{ s[1] }} {{ 'abc'[10] }}| {{ l.0 }}",
     "3 2 | 1 1 | e | 3"},
    {"slices", "{{ l[1:] }} {{ l[-2:] }} {{ s[1:-1] }} {{ s[::-2] }} {{ 'héllo'[1:3] }} {{ l[5:] }} {{ l[::-1] }}",
     "[1, 2] [1, 2] ello Worl drWolH él [] [2, 1, 3]"},
    {"attr_vs_item_priority",
     "{% set x = {'items': 'key'} %}{{ x['items'] }} {{ x.items()|list }} {{ x.get('items') }}",
     "key [('items', 'key')] key"},
    {"f_trim", "{{ '   x  ' | trim }}|{{ 'xyxhixy' | trim('xy') }}|{{ 5 | trim }}|{{ n | trim }}", "x|hi|5|None"},
    {"f_case",
     "{{ 'hello WORLD' | upper }} {{ 'HeLLo' | lower }} {{ 'hello world-x (y)z' | title }} {{ 'hELLO' | capitalize }} {{ 'straße' | upper }}",
     "HELLO WORLD hello Hello World-X (Y)z Hello STRASSE"},
    {"f_length_count",
     "{{ s | length }} {{ l | count }} {{ d | length }} {{ undefined_name | length }} {{ 'héllo' | length }}",
     "11 3 3 0 5"},
    {"f_replace",
     "{{ 'Hello' | replace('l', 'L') }} {{ 'Hello' | replace('l', 'L', 1) }} {{ 'ab' | replace('', '-') }}",
     "HeLLo HeLlo -a-b-"},
    {"f_join", "{{ l | join(', ') }} {{ [1, 'a', none] | join }} {{ messages | join('/', attribute='role') }}",
     "3, 1, 2 1aNone system/user/assistant"},
    {"f_first_last", "{{ l | first }} {{ l | last }} {{ 'abc' | first }} {{ d | first }} {{ e | first }}|",
     "3 2 a a |"},
    {"f_default",
     "{{ undefined_name | default('dflt') }} {{ n | default('dflt') }} {{ n | default('dflt', true) }} {{ '' | d('empty', boolean=true) }}",
     "dflt None dflt empty"},
    {"f_string_int_float",
     "{{ 5 | string }} {{ '42' | int }} {{ '3.7' | int }} {{ 'x' | int(7) }} {{ 'ff' | int(base=16) }} {{ 3.9 | int }} {{ '1.5' | float }} {{ 'x' | float }} {{ 3 | float }}",
     "5 42 3 7 255 3 1.5 0.0 3.0"},
    {"f_list", "{{ 'abc' | list }} {{ d | list }} {{ undefined_name | list }}",
     "['a', 'b', 'c'] ['a', 'b', 'role'] []"},
    {"f_tojson",
     "{{ d | tojson }} {{ {'b': 1, 'a': [1, 'é']} | tojson(indent=2) }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ l | tojson(separators=(',', ':')) }} {{ 'é\n' | tojson(ensure_ascii=true) }} {{ [none, true, 1.0] | tojson }}",
     "{\"a\": 1, \"b\": [1, 2], \"role\": \"user\"} {\n  \"b\": 1,\n  \"a\": [\n    1,\n    \"é\"\n  ]\n} {\"a\": 2, \"b\": 1} [3,1,2] \"\\u00e9\\n\" [null, true, 1.0]"},
    {"f_items_dictsort",
     "{{ d | items | list }} {{ {'b': 1, 'A': 2, 'a': 3} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }} {{ {'b': 1, 'A': 2} | dictsort(true) }}",
     "[('a', 1), ('b', [1, 2]), ('role', 'user')] [('A', 2), ('a', 3), ('b', 1)] [('a', 2), ('b', 1)] [('A', 2), ('b', 1)]"},
    {"f_selectattr",
     "{{ messages | selectattr('role', 'equalto', 'user') | list }} {{ messages | rejectattr('role', 'in', ['user', 'system']) | map(attribute='content') | list }}",
     "[{'role': 'user', 'content': 'hi'}] ['yo']"},
    {"f_select_reject",
     "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [0, 1, none, ''] | select | list }} {{ [1, 2, 3] | reject('gt', 1) | list }}",
     "[1, 3] [1] [1]"},
    {"f_map",
     "{{ l | map('string') | join }} {{ messages | map(attribute='role') | list }} {{ [{'a': 1}, {}] | map(attribute='a', default=0) | list }} {{ ['a', 'b'] | map('upper') | list }}",
     "312 ['system', 'user', 'assistant'] [1, 0] ['A', 'B']"},
    {"f_unique_reverse_sort",
     "{{ ['a', 'A', 'b'] | unique | list }} {{ l | reverse | list }} {{ 'abc' | reverse }} {{ l | sort }} {{ ['b', 'A', 'a'] | sort }} {{ l | sort(reverse=true) }} {{ messages | sort(attribute='role') | map(attribute='role') | list }}",
     "['a', 'b'] [2, 1, 3] cba [1, 2, 3] ['A', 'a', 'b'] [3, 2, 1] ['assistant', 'system', 'user']"},
    {"f_numbers",
     "{{ -1.5 | abs }} {{ 2.5 | round }} {{ 3 | round }} {{ 3.14159 | round(2) }} {{ 2.675 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ l | sum }} {{ l | max }} {{ l | min }}",
     "1.5 2.0 3 3.14 2.67 3.0 6 3 1"},
    {"f_misc",
     "{{ '<a & b>' | escape }} {{ '<i>' | safe }} {{ 'one two  three' | wordcount }} {{ 'ab' | center(6) }}| {{ 'x\ny' | indent(2, true) }} {{ '%s-%d' | format('a', 3) }} {{ [1, 2, 3] | batch(2) | list }}",
     "&lt;a &amp; b&gt; <i> 3   ab  |   x\n  y a-3 [[1, 2], [3]]"},
    {"tests",
     "{{ x is defined }} {{ s is defined }} {{ n is none }} {{ s is string }} {{ i is number }} {{ true is number }} {{ true is integer }} {{ f is float }} {{ d is mapping }} {{ l is iterable }} {{ s is sequence }} {{ d is sequence }} {{ true is boolean }} {{ true is true }} {{ 0 is false }}",
     "False True True True True True False True True True True True True True False"},
    {"tests_args",
     "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 1 is lt 2 }} {{ 'x' is eq 'x' }} {{ 2 is in l }} {{ none is sameas none }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ range is callable }} {{ s is not none }}",
     "True True True False True True True True True True True True"},
    {"undefined_is_iterable_and_callable",
     "{{ undefined_name is iterable }} {{ undefined_name is sequence }} {{ undefined_name is callable }} {{ undefined_name == undefined_other }}",
     "True True True True"},
    {"str_methods",
     "{{ ' x '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }}",
     "x|hi|['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c'] True True"},
    {"str_methods2",
     "{{ 'they\\'re 1st'.title() }} {{ 'Hello'.find('l') }} {{ 'Hello'.rfind('l') }} {{ 'héllo'.find('l') }} {{ 'Hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'x'.center(5, '*') }} {{ '-42'.zfill(6) }} {{ 'a=b=c'.partition('=') }}",
     "They'Re 1St 2 3 2 2 a-b ['a', 'b', 'c'] **x** -00042 ('a', '=', 'b=c')"},
    {"str_format_method",
     "{{ 'a{}b{}'.format(1, 'x') }} {{ '{0}-{0}-{n}'.format(5, n='q') }} {{ '{{}}{!r}'.format('s') }}",
     "a1bx 5-5-q {}'s'"},
    {"dict_list_methods",
     "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 7) }} {{ d.keys() | list }} {{ d.values() | list }} {{ l.index(1) }} {{ l.count(3) }}",
     "1 None 7 ['a', 'b', 'role'] [1, [1, 2], 'user'] 1 1"},
    {"percent_format",
     "{{ '%05.1f|%-4d|%x|%s|%r' % (3.14159, 7, 255, 'a', 'b') }} {{ '%(a)s-%(b)d' % {'a': 'q', 'b': 2} }}",
     "003.1|7   |ff|a|'b' q-2"},
    {"globals",
     "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }}",
     "[0, 1, 2] [1, 4, 7] [5, 3, 1] {'a': 1, 'b': 2} {'x': 1}"},
    {"joiner", "{% set j = joiner(', ') %}{% for i in l %}{{ j() }}{{ i }}{% endfor %}", "3, 1, 2"},
    {"strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %j %a %b %d %f|%z%Z|%%') }}",
     "2026-01-15 09:05:07 Thursday January 015 Thu Jan 15 000000||%"},
    {"undefined_prints_empty",
     "[{{ undefined_name }}][{{ d.missing }}][{{ d['missing'] }}][{% for x in undefined_name %}x{% endfor %}][{{ undefined_name | default('d') }}]",
     "[][][][][d]"},
    {"messages_context",
     "{{ messages | length }} {{ messages[0].content | trim }} {{ bos_token }}{{ eos_token }} {{ add_generation_prompt }} {{ tools }} {{ documents }}",
     "3 Sys <bos><eos> True None None"},
    {"folded_constant_slice_is_undefined", "[{{ 2[::2] }}] {{ (n if 1e3[1:] else 2) }} {{ '1' not in 1[::-1] }}",
     "[] 2 True"},
    {"recursive_namespace_repr", "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}",
     "<Namespace {'a': 1, 'me': <Namespace {...}>}>"},
};

class JinjaFeature : public ::testing::TestWithParam<FeatureCase> {};

TEST_P(JinjaFeature, MatchesJinja2) {
  const FeatureCase& c = GetParam();
  EXPECT_EQ(render(c.source), c.expected) << c.source;
}

INSTANTIATE_TEST_SUITE_P(All, JinjaFeature, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FeatureCase>& i) { return std::string(i.param.name); });

TEST(JinjaFeature, KeyOrderFollowsTheRequest) {
  // ordered_json keeps the sender's key order, as Python's json.loads does; plain json sorts.
  const std::string src = "{% for k, v in m.items() %}{{ k }}{% endfor %} {{ m | tojson }}";
  ChatTemplate t(src, "", "");
  const auto ordered = nlohmann::ordered_json::parse(R"({"m": {"z": 1, "a": 2}})");
  EXPECT_EQ(t.render(nlohmann::ordered_json::array(), false, ordered), "za {\"z\": 1, \"a\": 2}");
  const auto sorted = nlohmann::json::parse(R"({"m": {"z": 1, "a": 2}})");
  EXPECT_EQ(t.render(nlohmann::json::array(), false, sorted), "az {\"a\": 2, \"z\": 1}");
}

TEST(JinjaFeature, ContextDefaultsMirrorHuggingFace) {
  ChatTemplate t("{{ tools is none }} {{ documents is none }} {{ enable_thinking is defined }}", "", "");
  EXPECT_EQ(t.render(nlohmann::json::array(), false), "True True False");
  EXPECT_EQ(t.render(nlohmann::json::array(), false, {{"enable_thinking", true}}), "True True True");
}

TEST(JinjaFeature, ExtraKwargsCannotReplaceMessages) {
  ChatTemplate t("x", "", "");
  EXPECT_THROW(t.render(nlohmann::json::array(), false, {{"messages", 1}}), sluice::Error);
}

}  // namespace
}  // namespace sluice::chat
