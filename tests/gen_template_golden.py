#!/usr/bin/env python3
"""Records what Hugging Face transformers renders for chat templates, as the oracle of the C++ Jinja interpreter.

Run where transformers is installed (CI has none; the outputs are committed):
    /tmp/tv/bin/python tests/gen_template_golden.py

Writes, under tests/data/chat-template/:
  qwen3_conversations.json  [{name, messages, tools, add_generation_prompt, kwargs, expected | error}]
      tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=...,
      **kwargs) with the real Qwen3 tokenizer_config.json (tests/data/tokenizer). "error" holds transformers'
      message where it raises; the C++ side must raise too.
  jinja_cases.json          [{template, context, expected | error}]
      single constructs rendered by transformers' own Jinja environment (trim_blocks, lstrip_blocks, loop
      controls, its tojson and raise_exception), so the interpreter is checked construct by construct.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "chat-template")
TOKENIZER_DIR = os.path.join(HERE, "data", "tokenizer")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Cherche sur le web — renvoie des résultats « bruts ». 検索します 🔎",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                "threshold": {"type": "number", "default": 0.5, "exclusiveMinimum": 1e-07},
                "weights": {"type": "array", "items": {"type": "number"}, "default": [1.0, 2.5, -3.0, 100000000000000000000.0]},
                "safe": {"type": "boolean", "default": True},
                "filters": {"type": ["object", "null"], "default": None, "additionalProperties": {"type": "string"}},
                "pattern": {"type": "string", "pattern": "^[a-z]+\\d*\"quoted\"\t\n$"},
            },
            "required": ["query"],
        },
    },
}
# Not wrapped in {"type": "function", ...}: templates print whatever they are given.
BARE_TOOL = {"name": "calculator", "description": "Evaluates arithmetic.", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}


def call(name, arguments, wrap=True, call_id=None):
    function = {"name": name, "arguments": arguments}
    if not wrap:
        return function
    c = {"type": "function", "function": function}
    if call_id:
        c = {"id": call_id, **c}
    return c


def conversations():
    u = lambda text: {"role": "user", "content": text}
    a = lambda text, **extra: {"role": "assistant", "content": text, **extra}
    s = lambda text: {"role": "system", "content": text}
    t = lambda text, **extra: {"role": "tool", "content": text, **extra}
    cases = []

    def case(name, messages, tools=None, add_generation_prompt=True, **kwargs):
        cases.append({"name": name, "messages": messages, "tools": tools, "add_generation_prompt": add_generation_prompt,
                      "kwargs": kwargs})

    case("single_user", [u("Hello!")])
    case("single_user_no_think", [u("Hello!")], enable_thinking=False)
    case("single_user_think_true", [u("Hello!")], enable_thinking=True)
    case("single_user_no_generation_prompt", [u("Hello!")], add_generation_prompt=False)
    case("system_user", [s("You are a helpful assistant."), u("What is 2+2?")])
    case("empty_system", [s(""), u("Hi")])
    case("system_only_no_generation_prompt", [s("Be brief.")], add_generation_prompt=False)
    case("multi_turn_plain", [u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")])
    case("history_inline_think_stripped",
         [s("sys"), u("What is 1+1?"), a("<think>\nsimple addition\n</think>\n\n2"), u("And 2+2?")])
    case("history_reasoning_content_stripped",
         [u("What is 1+1?"), a("2", reasoning_content="Adding one and one."), u("And 2+2?")], enable_thinking=False)
    case("final_assistant_reasoning_content",
         [u("What is 1+1?"), a("2", reasoning_content="\nAdding one and one.\n")], add_generation_prompt=False)
    case("final_assistant_inline_think",
         [u("Explain."), a("<think>\nLet me think\nstep by step\n</think>\n\nHere it is.")], add_generation_prompt=False)
    case("reasoning_content_wins_over_inline",
         [u("Q"), a("<think>inline thought</think>answer", reasoning_content="field thought")],
         add_generation_prompt=False)
    case("reasoning_content_none_falls_back_to_inline",
         [u("Q"), a("<think>\ninline thought\n</think>\n\nanswer", reasoning_content=None)], add_generation_prompt=False)
    case("empty_reasoning_content_final",
         [u("Q"), a("answer", reasoning_content="")], add_generation_prompt=False)
    case("think_without_open_tag",
         [u("Q"), a("thoughts only closed</think>\n\nanswer")], add_generation_prompt=False)
    case("user_no_think_suffix", [u("Summarize this. /no_think")])
    case("user_think_suffix", [u("Prove it carefully. /think")], enable_thinking=True)
    case("system_no_think", [s("You are terse. /no_think"), u("Capital of France?")])
    case("multiple_system_messages",
         [s("First system."), u("Hi"), a("Hello"), s("Second system: answer in French."), u("How are you?")])
    case("system_not_first", [u("Hi"), s("Late system message"), u("Again")])
    case("tools_without_system", [u("Weather in Paris?")], tools=[WEATHER_TOOL])
    case("tools_with_system", [s("You can call tools."), u("Weather in Paris?")], tools=[WEATHER_TOOL, SEARCH_TOOL])
    case("tools_empty_system", [s(""), u("Search for cats")], tools=[SEARCH_TOOL])
    case("tools_bare_schema", [u("2*3?")], tools=[BARE_TOOL])
    case("tool_call_arguments_dict",
         [u("Weather in Paris?"), a("", tool_calls=[call("get_weather", {"city": "Paris", "unit": "celsius"})])],
         tools=[WEATHER_TOOL], add_generation_prompt=False)
    case("tool_call_arguments_string",
         [u("Weather in Paris?"), a("", tool_calls=[call("get_weather", '{"city": "Paris"}', call_id="call_1")])],
         tools=[WEATHER_TOOL], add_generation_prompt=False)
    case("tool_call_with_content",
         [u("Weather in Paris?"), a("Let me check.", tool_calls=[call("get_weather", {"city": "Paris"})])],
         tools=[WEATHER_TOOL], add_generation_prompt=False)
    case("tool_call_unwrapped",
         [u("2*3?"), a("", tool_calls=[call("calculator", {"expression": "2*3"}, wrap=False)])],
         tools=[BARE_TOOL], add_generation_prompt=False)
    case("parallel_tool_calls_and_responses",
         [u("Weather in Paris and Tokyo?"),
          a("", tool_calls=[call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "東京"})]),
          t('{"temp": 18, "sky": "cloudy"}', tool_call_id="a"), t('{"temp": 25.5, "sky": "sunny"}'),
          a("Paris: 18°C, cloudy. Tokyo: 25.5°C, sunny.")],
         tools=[WEATHER_TOOL], add_generation_prompt=False)
    case("tool_response_then_generation",
         [s("sys"), u("Weather in Paris?"), a("", tool_calls=[call("get_weather", {"city": "Paris"})]),
          t("18 degrees")], tools=[WEATHER_TOOL])
    case("multi_step_tools_with_thinking",
         [u("Plan a trip to Paris."),
          a("<think>\nNeed weather first.\n</think>\n\n", tool_calls=[call("get_weather", {"city": "Paris"})]),
          t("18 degrees"),
          a("", reasoning_content="Now search hotels.", tool_calls=[call("web_search", {"query": "hotels Paris", "max_results": 3})]),
          t("Hotel A, Hotel B")],
         tools=[WEATHER_TOOL, SEARCH_TOOL])
    case("multi_step_tools_finished",
         [u("Plan a trip to Paris."),
          a("", reasoning_content="Need weather first.", tool_calls=[call("get_weather", {"city": "Paris"})]),
          t("18 degrees"),
          a("It is 18 degrees, pack a jacket.", reasoning_content="Weather known; answer.")],
         tools=[WEATHER_TOOL], add_generation_prompt=False)
    case("user_message_shaped_like_tool_response",
         [u("Question"), a("", tool_calls=[call("get_weather", {"city": "Oslo"})]),
          u("<tool_response>\n-3 degrees\n</tool_response>"), a("<think>\nIt is cold.\n</think>\n\nWear a coat.")],
         tools=[WEATHER_TOOL], add_generation_prompt=False)
    case("unicode_content",
         [s("Réponds en français, s'il te plaît. 日本語も可。"),
          u("Ünïcödé: 你好，世界！ 🤖👍🏽 👨‍👩‍👧 مرحبا بالعالم שלום e\u0301 \u200b zero-width"),
          a("<think>\n思考中…\n</think>\n\nБонжур! 🎉"), u("Encore 😀")])
    case("special_characters",
         [u('Quotes " and \' and backslash \\ and {{ jinja }} {% tags %} {# comment #} <|im_end|> </think>'),
          a("Tabs\tand\nnewlines\r\nand CRLF"), u("   leading and trailing spaces   ")])
    case("tool_arguments_unicode_and_numbers",
         [u("Search"), a("", tool_calls=[call("web_search", {"query": "café ☕ « quoted » \"x\"\n", "max_results": 10,
                                                              "threshold": 1e-07, "weights": [1.0, 0.1, 1e+16, -0.0],
                                                              "safe": False, "filters": None,
                                                              "nested": {"a": [1, {"b": []}], "c": {}}})])],
         tools=[SEARCH_TOOL], add_generation_prompt=False)
    case("long_conversation",
         [s("You are a math tutor.")] + sum(
             ([u(f"What is {i} squared?"), a(f"<think>\n{i} times {i}.\n</think>\n\n{i * i}")] for i in range(1, 13)),
             []) + [u("And 13 squared?")])
    case("history_no_think_then_think",
         [u("Hi /no_think"), a("<think>\n\n</think>\n\nHello!"), u("Now think hard. /think")])
    case("empty_assistant_content_middle", [u("Hi"), a(""), u("Hello?")])
    case("assistant_reasoning_after_last_query_not_last",
         [u("Q"), a("", reasoning_content="r1", tool_calls=[call("get_weather", {"city": "Rome"})]), t("20"),
          a("", tool_calls=[call("get_weather", {"city": "Milan"})]), t("19")],
         tools=[WEATHER_TOOL])
    case("unknown_role_skipped", [{"role": "developer", "content": "ignored by this template"}, u("Hi")])
    case("extra_kwargs_ignored", [u("Hi")], custom_flag=True, enable_thinking=False)
    case("tools_empty_list", [u("Hi")], tools=[])
    case("ends_with_assistant_no_generation_prompt",
         [u("Write a haiku."), a("Autumn moonlight—\na worm digs silently\ninto the chestnut.")],
         add_generation_prompt=False)
    case("assistant_content_none_errors",
         [u("Weather?"), a(None, tool_calls=[call("get_weather", {"city": "Paris"})])], tools=[WEATHER_TOOL])
    case("tools_system_without_content_errors", [{"role": "system"}, u("Hi")], tools=[WEATHER_TOOL])
    return cases


def render_conversations():
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    out = []
    for c in conversations():
        entry = dict(c)
        try:
            entry["expected"] = tokenizer.apply_chat_template(
                c["messages"], tools=c["tools"], tokenize=False, add_generation_prompt=c["add_generation_prompt"],
                **c["kwargs"])
        except Exception as e:  # noqa: BLE001 - the error itself is the expectation
            entry["error"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    return out


JINJA_CONTEXT = {
    "m": {"a": 1, "content": None, "f": 1.5},
    "l": [1, 2, 3],
    "s": "héllo",
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
}

JINJA_TEMPLATES = [
    # scoping
    "{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
    "{% for i in [1,2] %}{% set y = i %}{% endfor %}{{ y }}",
    "{% if true %}{% set z = 5 %}{% endif %}{{ z }}",
    "{% set ns = namespace(a=1, b='x') %}{% for i in l %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}",
    "{%- set ns = namespace(found=false) -%}\n{%- for m in msgs -%}\n  {%- if m.role == 'assistant' -%}{%- set ns.found = true -%}{%- endif -%}\n{%- endfor -%}\n{{ ns.found }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}",
    "{% set x %}  inner {{ 1 + 1 }}  {% endset %}[{{ x }}]",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}",
    "{% set x = [1, 2] %}{% set y = x + [3] %}{{ x }}{{ y }}",
    # whitespace control
    "  {% if true %}\n  x\n  {% endif %}\n  y  {# c #}\n  {#- c2 #}\nz",
    "a\n{%+ if true +%}\nb{% endif %}\n",
    "{{- ' x ' -}}   \n  {{ 'y' }}",
    "line1\n    {%- if true %}\n  a\n{%- endif %}\nend\n",
    "{% if true -%}\n   a\n{%- endif %}",
    "{%- for m in msgs %}\n    {{- m.role }}\n{%- endfor %}\n",
    "x\n\n",
    "{% if true %}\n\tindented with tab\n\t{% endif %}\n",
    "a {% if true %}inline{% endif %} b\n  {{ 'var' }}\n",
    "{# comment #}{{ 1 }}{# another\nmultiline #}",
    "{% raw %}{{ not rendered }}{% endraw %}",
    "crlf\r\nline\r\n{% if true %}\r\nx\r\n{% endif %}\r\n",
    # loops
    "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %}",
    "{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% else %}none{% endfor %}",
    "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}",
    "{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x == 3 %}{% break %}{% endif %}{% endfor %}",
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}",
    "{% for k, v in m.items() %}{{k}}={{v}};{% endfor %}",
    "{% for k in m %}{{k}}{% endfor %}",
    "{% for c in s %}{{ c }}.{% endfor %}",
    "{% for message in msgs[::-1] %}{{ (msgs|length - 1) - loop.index0 }}{{ message.role }}{% endfor %}",
    "{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    # macros
    "{% macro f(a, b='B') %}[{{ a }}|{{ b }}]{% endmacro %}{{ f(1) }}{{ f(1, 2) }}{{ f(a=3, b=4) }}{{ f(b=5, a=6) }}",
    "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}",
    "{% macro render(d, skip) %}{% for k in d if k not in skip %}<{{ k }}>{{ d[k] | tojson if d[k] is mapping else d[k] | string }}{% endfor %}{% endmacro %}{{ render({'a': 1, 'b': {'c': 2}, 'd': 'x'}, ['d']) }}",
    # literals and printing
    "{{ 1.0 }} {{ 1e20 }} {{ 0.1+0.2 }} {{ 1e-5 }} {{ 10/4 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 2**-1 }} {{ 1e16 }} {{ 1e15 }} {{ 123456789.123 }} {{ 0.0001 }} {{ -0.0 }}",
    "{{ [1,'a',none,true,{'k':1.5}] }} {{ (1,2) }} {{ (1,) }} {{ () }}",
    "{{ {'a': [1, {'b': none}], 'c': 'd'} }} {{ ['it\\'s', \"q\\\"\"] }} {{ ['a\\nb\\t\\\\'] }}",
    "{{ none }} {{ true }} {{ True }} {{ false }} {{ None }}",
    "{{ '{{' }} {{ \"it's\" }} {{ 'a\\tb' }} {{ '\\u00e9' }} {{ 'a' 'b' }} {{ '\\x41\\101' }}",
    "{{ 0x1F }} {{ 1_000 }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ l.0 }} {{ l.1 }}",
    "{{ msgs[0] }}",
    # operators
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'abc' < 'abd' }} {{ [1,2] < [1,3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 != 2 }}",
    "{{ 'a' ~ 1 ~ none ~ undefinedvar ~ 1.5 ~ [1] }}",
    "{{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'x' }} {{ '' or none }} {{ not 0 }} {{ not 'a' }}",
    "{{ 'a' if 1 else 'b' }} {{ 'a' if 0 else 'b' }} {{ 'a' if 0 }}|{{ x if false }}|",
    "{{ msgs|length - 1 }} {{ -msgs|length }} {{ 2 * 3 + 1 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 1 ~ 2 + 3 }}",
    "{{ 'ab' * 3 }} {{ [1] * 3 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 2 ** 0.5 }} {{ -7 % -3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 10 // 3 }} {{ -10 // 3 }} {{ 10 % -3 }} {{ 1 / 3 }} {{ 2 / 3 }} {{ 100 * 1.1 }}",
    "{{ [1,2] + [3] }} {{ (1,2) + (3,) }}",
    "{{ 'a' in 'abc' }} {{ 'x' not in l }} {{ 2 in l }} {{ 'a' in m }} {{ 'zz' in m }} {{ '</think>' in 'x</think>y' }}",
    "{{ '%s-%d' % ('a', 3) }} {{ '%s and %r' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%.2f' % 3.14159 }} {{ '%5d|' % 42 }}",
    # access
    "{{ m['a'] }} {{ m.get('a') }} {{ m.get('zz') }} {{ m.get('zz', 7) }} {{ m.keys()|list }} {{ m.values()|list }} {{ m.items()|list }}",
    "{{ msgs[0].role }} {{ msgs[-1]['content'] }} {{ l[10] }}|{{ m.nope }}|{{ m['content'] is none }}",
    "{{ s[::-1] }} {{ s|length }} {{ s[1:3] }} {{ s[-1] }} {{ l[::2] }} {{ l[5:] }} {{ l[-2:] }} {{ l[:-1] }} {{ l[::-2] }} {{ l[-10:10] }}",
    "{{ 'é'|length }} {{ '日本'|list }} {{ 'a😀b'[1] }} {{ 'a😀b'[::-1] }}",
    # str methods
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'xxaxx'.strip('x') }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ '  a b  c '.split(None, 1) }} {{ '  a b  c '.rsplit(None, 1) }}",
    "{{ 'Hello'.startswith(('x', 'H')) }} {{ 'Hello'.endswith('lo') }} {{ 'héllo'.find('l') }} {{ 'a-b-c'.count('-') }} {{ '-'.join(['a','b']) }} {{ 'abc'.replace('', '-') }}",
    "{{ '  \\n  text \\n\\n'.strip('\\n') }}|{{ '\\n\\nx'.lstrip('\\n') }}|{{ 'x\\n\\n'.rstrip() }}|{{ '\\u3000 x \\xa0'.strip() }}|",
    "{{ 'a.b.c'.split('.')[-1] }} {{ 'x'.split('</think>')[0] }} {{ 'a</think>\\n\\nb'.split('</think>')[-1].lstrip('\\n') }}",
    "{{ s.upper() }} {{ 'ÀÉÎ'.lower() }} {{ 'straße'.upper() }} {{ 'Привет'.upper() }} {{ '日本語'.upper() }} {{ s.title() }} {{ 'a b'.capitalize() }} {{ 'hello WORLD'.title() }}",
    "{{ 'line1\\nline2\\r\\nline3'.splitlines() }} {{ 'abc'.removeprefix('a') }} {{ ' '.isspace() }} {{ '12'.isdigit() }}",
    # filters
    "{{ l|tojson }} {{ m|tojson }} {{ {'a':'é\"\\n\\x01\\x7f/<>&'}|tojson }} {{ 'x'|tojson }} {{ none|tojson }}",
    "{{ m|tojson(indent=2) }} {{ [1,[2]]|tojson(indent=1) }} {{ []|tojson(indent=2) }}",
    "{{ m.f|tojson }} {{ 1e20|tojson }} {{ 3.0|tojson }} {{ [1.5e-7, 100.0, -2]|tojson }}",
    "{{ ['a', 'b']|tojson(separators=(',', ':')) }} {{ {'b':1,'a':2}|tojson(sort_keys=true) }}",
    "{{ m|string }} {{ l|join(', ') }} {{ l|first }} {{ l|last }} {{ s|first }} {{ msgs|map(attribute='role')|join(',') }}",
    "{{ undefined_x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ x | default('a') | upper }}",
    "{{ l|length }} {{ m|length }} {{ undefined_x|length }} {{ 'abc'|count }}",
    "{{ 'abc'|replace('b','X') }} {{ '  x '|trim }}|{{ 'xxa'|trim('x') }}|",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|list }}",
    "{{ [3,1,2]|sort }} {{ ['b','A','c']|sort }} {{ ['b','A','c']|sort(case_sensitive=true) }} {{ [3,1,2]|sort(reverse=true) }} {{ msgs|sort(attribute='role')|map(attribute='role')|list }}",
    "{{ [1,2,2,3,1]|unique|list }} {{ [1,5,3]|max }} {{ [1,5,3]|min }} {{ [1,5,3]|sum }} {{ l|reverse|list }} {{ 'abc'|reverse }}",
    "{{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ 'abc'|map('upper')|list }} {{ [1,2]|map('string')|join }}",
    "{{ -3|abs }} {{ 3.7|int }} {{ '42'|int }} {{ 'x'|int }} {{ '3.5'|float }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.5|round(0, 'floor') }}",
    "{{ 'a\\nb\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent }}",
    "{{ 'ABC'|lower }} {{ 'abc'|upper }} {{ 'hello world'|title }} {{ 'hello'|capitalize }} {{ '<a href=\"x\">'|e }}",
    "{{ m|items|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ dict(a=1, b=2) }} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}",
    "{% filter upper %}abc{{ 'd' }}{% endfilter %} {{ 'x'|safe }} {{ '%s!'|format('hi') }}",
    # jinja's select/map/unique/items filters return generators: always true, no len()
    "{% if msgs|selectattr('role', 'eq', 'system') %}truthy{% else %}falsy{% endif %} {{ msgs|selectattr('role', 'eq', 'system')|list|length }} {{ msgs|map(attribute='role')|first }}",
    "{{ msgs|selectattr('role', 'eq', 'user')|length }}",
    "{{ 'hello world-wide (x) they\\'re [y] <z>'|title }} {{ 5|round }} {{ 15|round(-1) }} {{ 25|round(-1) }} {{ 1.5 is odd }} {{ 3 is odd }} {{ false * (1, 2) }} {{ 'a' % [] }}",
    "{{ [] in {} }}",
    # tests
    "{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 'a' is sequence }}{{ m is sequence }}{{ m is iterable }}{{ m is mapping }}{{ none is none }}{{ x is defined }}{{ m.a is defined }}{{ 1.5 is float }}{{ true is boolean }}",
    "{{ 'abc' is string }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 2 is in l }} {{ x is undefined }} {{ false is false }} {{ 0 is false }} {{ true is true }}",
    "{% if x is not defined %}nx{% endif %}{% if m is not none %}nn{% endif %}{% if 'abc' is lower %}low{% endif %}{% if 1 is eq 1 %}eq{% endif %}",
    # errors (jinja raises; the interpreter must too)
    "{{ m.content.startswith('a') }}",
    "{{ '</think>' in m.content }}",
    "{{ undefinedvar.x }}",
    "{{ m.zz.yy }}",
    "{{ 'a' + 1 }}",
    "{{ 1 + none }}",
    "{{ undefined_x|tojson }}",
    "{{ l.append(4) }}",
    "{{ raise_exception('boom') }}",
    "{{ l[10].x }}",
    "{{ foo() }}",
    "{{ 'abc'() }}",
    "{{ none|items|list }}",
    "{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}",
    "{{ 1 / 0 }}",
    "{{ 1 < 'a' }}",
    "{% if true %}unclosed",
    "{% for x in l %}{{ x }}",
    "{{ x|nosuchfilter }}",
    "{{ x is nosuchtest }}",
    "{% endif %}",
    "{{ 1 + }}",
    "{{ 'unterminated }}",
    "{% include 'other.html' %}",
    "{# never closed",
    "{{ x",
    "{% break %}",
]


def render_jinja_cases():
    from transformers.utils.chat_template_utils import _compile_jinja_template
    out = []
    for template in JINJA_TEMPLATES:
        entry = {"template": template, "context": JINJA_CONTEXT}
        try:
            entry["expected"] = _compile_jinja_template(template).render(**JINJA_CONTEXT)
        except Exception as e:  # noqa: BLE001
            entry["error"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in (("qwen3_conversations.json", render_conversations()), ("jinja_cases.json", render_jinja_cases())):
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
        errors = sum("error" in d for d in data)
        print(f"{name}: {len(data)} cases ({errors} expected errors)", file=sys.stderr)


if __name__ == "__main__":
    main()
