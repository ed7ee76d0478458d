// The Jinja interpreter, construct by construct: hand-written expectations first, then every case of
// tests/data/chat-template/jinja_cases.json, which transformers' own Jinja environment rendered
// (tests/gen_template_golden.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/jinja.h"
#include "text/jinja_value.h"

namespace qwen3 {
namespace {

using nlohmann::ordered_json;

const std::filesystem::path kDataDir = std::filesystem::path(QWEN3_TEST_DATA_DIR) / "chat-template";

std::string render(const std::string& source, const ordered_json& context = ordered_json::object(),
                   const jinja::RenderLimits& limits = {}) {
  return jinja::Template(source).render(context, limits);
}

// The message of the error a render throws (empty when none is thrown).
template <typename E>
std::string error_of(const std::string& source, const ordered_json& context = ordered_json::object(),
                     const jinja::RenderLimits& limits = {}) {
  try {
    render(source, context, limits);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(Jinja, TextAndExpressions) {
  EXPECT_EQ(render("plain text"), "plain text");
  EXPECT_EQ(render("{{ 1 + 2 }}|{{ 'a' ~ 1 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 8 }}"),
            "3|a1|3|-4|1|256");
  EXPECT_EQ(render("{{ 10 / 4 }} {{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }}"), "2.5 1.0 1e+20 0.30000000000000004");
  EXPECT_EQ(render("{{ none }} {{ true }} {{ False }} {{ [1, 'a', none] }} {{ {'k': 1.5} }} {{ (1,) }}"),
            "None True False [1, 'a', None] {'k': 1.5} (1,)");
  EXPECT_EQ(render("{{ x }}|{{ x if false }}|", ordered_json::object()), "||");  // undefined prints empty
  EXPECT_EQ(render("{{ 'a' if 1 else 'b' }}{{ 0 or 'c' }}{{ 1 and 'd' }}{{ not 0 }}"), "acdTrue");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }}"), "True False True True");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 4 not in [1, 2] }} {{ 'k' in {'k': 1} }}"), "True True True");
  // Filters bind tighter than arithmetic, as in jinja2.
  EXPECT_EQ(render("{{ l|length - 1 }}", {{"l", {1, 2, 3}}}), "2");
}

TEST(Jinja, WhitespaceControlAndTransformersEnvironment) {
  // trim_blocks eats the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(render("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(render("a\n{%- if true %}\nb{% endif %}"), "ab");
  EXPECT_EQ(render("a\n{%+ if true +%}\nb{% endif %}"), "a\n\nb");  // + keeps both
  EXPECT_EQ(render("x {# comment #}\ny"), "x y");
  EXPECT_EQ(render("{% raw %}{{ kept }}{% endraw %}"), "{{ kept }}");
  EXPECT_EQ(render("one trailing newline is dropped\n"), "one trailing newline is dropped");
  EXPECT_EQ(render("crlf\r\nbecomes lf"), "crlf\nbecomes lf");
}

TEST(Jinja, IfElifElse) {
  const std::string t = "{% if n > 2 %}big{% elif n > 0 %}small{% else %}none{% endif %}";
  EXPECT_EQ(render(t, {{"n", 5}}), "big");
  EXPECT_EQ(render(t, {{"n", 1}}), "small");
  EXPECT_EQ(render(t, {{"n", 0}}), "none");
}

TEST(Jinja, ForLoopVariablesAndElse) {
  EXPECT_EQ(
      render(
          "{% for x in l %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
          "{% if not loop.last %},{% endif %}{% endfor %}",
          {{"l", {"a", "b"}}}),
      "01TrueFalse2,12FalseTrue2");
  EXPECT_EQ(render("{% for x in l %}{{ x }}{% else %}empty{% endfor %}", {{"l", ordered_json::array()}}),
            "empty");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"),
            "2/2 4/2 ");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1;a=2;");  // insertion order
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}"
                   "{% if x == 3 %}{% break %}{% endif %}{% endfor %}"),
            "13");
  EXPECT_EQ(render("{% for m in l[::-1] %}{{ m }}{% endfor %}", {{"l", {1, 2, 3}}}), "321");
}

TEST(Jinja, SetScopingAndNamespaces) {
  // A loop body has its own scope: assignments do not leak out; namespace attributes do.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(render("{% set ns = namespace(n=0, last=none) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}"
                   "{% set ns.last = i %}{% endfor %}{{ ns.n }} {{ ns.last }}"),
            "6 3");
  EXPECT_EQ(render("{% set a, b = 1, 'two' %}{{ b }}{{ a }}"), "two1");
  EXPECT_EQ(render("{% set block %} x {{ 1 }} {% endset %}[{{ block }}]"), "[ x 1 ]");
  EXPECT_NE(error_of<jinja::TemplateError>("{% set x = 1 %}{% set x.y = 2 %}"), "");
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro tag(name, body='-') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}"
                   "{{ tag('a') }}{{ tag('b', 'x') }}{{ tag(body='y', name='c') }}"),
            "<a>-</a><b>x</b><c>y</c>");
  EXPECT_EQ(
      render(
          "{% macro down(n) %}{{ n }}{% if n > 0 %}{{ down(n - 1) }}{% endif %}{% endmacro %}{{ down(3) }}"),
      "3210");
}

TEST(Jinja, TestsAndDefinedness) {
  const ordered_json ctx = {{"m", {{"a", 1}, {"n", nullptr}}}};
  EXPECT_EQ(render("{{ m.a is defined }} {{ m.b is defined }} {{ m.n is none }} {{ m.n is defined }}", ctx),
            "True False True True");
  EXPECT_EQ(render("{{ 'x' is string }} {{ m is mapping }} {{ [1] is sequence }} {{ 1 is number }} "
                   "{{ true is integer }} {{ false is false }} {{ 0 is false }} {{ 9 is divisibleby 3 }}",
                   ctx),
            "True True True True False True False True");
  EXPECT_EQ(render("{{ m.b is not defined }}", ctx), "True");
}

TEST(Jinja, StringMethodsWorkOnCodePoints) {
  EXPECT_EQ(
      render("{{ s|length }} {{ s[1] }} {{ s[::-1] }} {{ s[1:3] }} {{ s.find('l') }}", {{"s", "héllo"}}),
      "5 é olléh él 2");
  EXPECT_EQ(
      render(
          "{{ '\\n\\nx\\n'.strip('\\n') }}|{{ 'a</think>b'.split('</think>')[-1] }}|{{ ' a  b '.split() }}"),
      "x|b|['a', 'b']");
  EXPECT_EQ(
      render("{{ 'Hi'.startswith('H') }} {{ 'Hi'.endswith(('x', 'i')) }} {{ 'a-b'.replace('-', '+') }}"),
      "True True a+b");
  EXPECT_EQ(render("{{ 'straße'.upper() }} {{ 'ÀB'.lower() }} {{ '日本'.upper() }}"), "STRASSE àb 日本");
}

TEST(Jinja, Filters) {
  EXPECT_EQ(render("{{ '  x  '|trim }}|{{ 5|string ~ 'a' }}|{{ 'AbC'|lower }}{{ 'abc'|upper }}"),
            "x|5a|abcABC");
  EXPECT_EQ(
      render("{{ x|default('d') }} {{ ''|default('d', true) }} {{ [1, 2]|join('-') }} {{ [3, 1]|first }}"
             "{{ [3, 1]|last }} {{ 'abc'|replace('b', 'X') }}"),
      "d d 1-2 31 aXc");
  EXPECT_EQ(render("{{ d|items|list }}", {{"d", {{"k", "v"}}}}), "[('k', 'v')]");
  EXPECT_EQ(render("{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}",
                   {{"msgs", {{{"role", "user"}, {"content", "a"}}, {{"role", "bot"}, {"content", "b"}}}}}),
            "a");
  EXPECT_EQ(render("{{ [3, 1, 2]|sort|list }} {{ ['b', 'A']|sort }} {{ [1, 1, 2]|unique|list }}"),
            "[1, 2, 3] ['A', 'b'] [1, 2]");
}

TEST(Jinja, TojsonIsPythonJsonDumps) {
  // json.dumps(x, ensure_ascii=False): ", " and ": " separators, insertion order, UTF-8 kept, controls
  // escaped.
  const ordered_json value = ordered_json::parse(R"({"b": [1, 2.0, 1e-7, true, null], "a": "é\"\n\u0001"})");
  EXPECT_EQ(render("{{ v|tojson }}", {{"v", value}}),
            R"({"b": [1, 2.0, 1e-07, true, null], "a": "é\"\n\u0001"})");
  EXPECT_EQ(render("{{ v|tojson(indent=2) }}", {{"v", {{"a", {1}}}}}), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(jinja::python_json_dumps(ordered_json::parse(R"({"x": {}, "y": []})")), R"({"x": {}, "y": []})");
}

TEST(Jinja, PythonFloatRepr) {
  EXPECT_EQ(jinja::python_float_repr(1.0), "1.0");
  EXPECT_EQ(jinja::python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(jinja::python_float_repr(1e16), "1e+16");
  EXPECT_EQ(jinja::python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(jinja::python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(jinja::python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(jinja::python_float_repr(123.456), "123.456");
  EXPECT_EQ(jinja::python_float_repr(1.5e-300), "1.5e-300");
}

TEST(Jinja, ErrorsAreClear) {
  EXPECT_NE(error_of<jinja::TemplateError>("{{ x|nosuchfilter }}").find("no filter named 'nosuchfilter'"),
            std::string::npos);
  EXPECT_NE(error_of<jinja::TemplateError>("{{ x is nosuchtest }}").find("no test named 'nosuchtest'"),
            std::string::npos);
  const std::string unclosed = error_of<jinja::TemplateError>("line one\n{% if true %}\nnever closed");
  EXPECT_NE(unclosed.find("'if' block opened on line 2 is not closed"), std::string::npos) << unclosed;
  EXPECT_NE(error_of<jinja::TemplateError>("{% for x in l %}").find("'endfor'"), std::string::npos);
  EXPECT_NE(error_of<jinja::TemplateError>("{% include 'x' %}").find("not supported"), std::string::npos);
  EXPECT_NE(error_of<jinja::TemplateError>("{{ 'a' + 1 }}").find("can only concatenate str"),
            std::string::npos);
  EXPECT_NE(
      error_of<jinja::TemplateError>("a\n\n{{ m.content.startswith('x') }}", {{"m", {{"content", nullptr}}}})
          .find("line 3: 'None' has no attribute 'startswith'"),
      std::string::npos);
  // raise_exception surfaces the template's own message, as its own error type.
  EXPECT_EQ(
      error_of<jinja::TemplateRaisedError>("{{ raise_exception('Conversation roles must alternate') }}"),
      "Conversation roles must alternate");
  // Python would print a method's address; the interpreter refuses instead of printing something else.
  EXPECT_NE(error_of<jinja::TemplateError>("{{ d.items }}", {{"d", ordered_json::object()}}), "");
  EXPECT_NE(
      error_of<jinja::TemplateError>("{{ l.append(1) }}", {{"l", ordered_json::array()}}).find("unsafe"),
      std::string::npos);
  // Likewise a generator (what select/map/reverse return): jinja prints "<generator object ... at 0x...>".
  EXPECT_NE(error_of<jinja::TemplateError>("{{ [1, 2]|reverse }}").find("add |list"), std::string::npos);
  EXPECT_EQ(render("{{ [1, 2]|reverse|list }} {{ [] | select('odd') | list }}"), "[2, 1] []");
  EXPECT_NE(error_of<jinja::TemplateError>("{{ 'bad \xff utf8' }}"), "");
}

TEST(Jinja, RunawayInputIsBounded) {
  jinja::RenderLimits small;
  small.max_output_bytes = 1000;
  EXPECT_NE(error_of<InputError>("{% for i in range(2000) %}x{% endfor %}", ordered_json::object(), small),
            "");
  small.max_loop_iterations = 100;
  EXPECT_NE(error_of<jinja::TemplateError>(
                "{% for i in range(50) %}{% for j in range(50) %}{% endfor %}{% endfor %}",
                ordered_json::object(), small),
            "");
  EXPECT_NE(error_of<jinja::TemplateError>("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "");
  EXPECT_NE(
      error_of<jinja::TemplateError>("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
      "");
  EXPECT_NE(error_of<jinja::TemplateError>("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}"
                                           "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}"),
            "");
  EXPECT_NE(error_of<jinja::TemplateError>("{{ 'x' * 10000000000 }}"), "");
  EXPECT_NE(error_of<jinja::TemplateError>("{{ range(100000000000)|length }}"), "");
  // A namespace holding itself: no crash, no leak (the render breaks the cycle).
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"), "True");
  ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = ordered_json::array({deep});
  EXPECT_NE(error_of<InputError>("{{ v }}", {{"v", deep}}), "");
}

// Every construct of jinja_cases.json against what jinja2 (as transformers configures it) rendered.
TEST(Jinja, ParityWithTransformersJinjaEnvironment) {
  std::ifstream in(kDataDir / "jinja_cases.json");
  ASSERT_TRUE(in) << "missing " << (kDataDir / "jinja_cases.json");
  const ordered_json cases = ordered_json::parse(in);
  ASSERT_GE(cases.size(), 100u);
  int checked = 0;
  for (const auto& c : cases) {
    const std::string source = c["template"].get<std::string>();
    SCOPED_TRACE("template: " + source);
    if (c.contains("error")) {
      bool threw = false;
      try {
        render(source, c["context"]);
      } catch (const Error&) {
        threw = true;
      }
      EXPECT_TRUE(threw) << "jinja2 raised " << c["error"].get<std::string>();
    } else {
      std::string ours;
      try {
        ours = render(source, c["context"]);
      } catch (const Error& e) {
        ADD_FAILURE() << "threw: " << e.what();
        continue;
      }
      EXPECT_EQ(ours, c["expected"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_EQ(checked, int(cases.size()));
}

}  // namespace
}  // namespace qwen3
