// What the interpreter can do to values: operators, attribute and item access (including Python's str, dict
// and list methods), iteration, jinja's filters and tests, and the global functions transformers provides.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja_value.h"

namespace qwen3::jinja {

// Strings and lists built by a template (repetition, joins, concatenation) stay below this size.
constexpr size_t kMaxValueBytes = size_t(256) << 20;

using FilterFn = Value (*)(const Value& input, CallArgs& args);
using TestFn = bool (*)(const Value& input, CallArgs& args);

FilterFn find_filter(std::string_view name);  // nullptr when jinja has no such filter here
TestFn find_test(std::string_view name);

// `object.name`: a dict key, a bound str/dict/list method, a namespace attribute, else undefined (as jinja
// does).
Value get_attribute(const Value& object, const std::string& name);
// `object[key]`: an index (negative counts from the end), a dict key, else falls back to get_attribute.
Value get_item(const Value& object, const Value& key);
// `object[start:stop:step]` with Python's bounds rules; an absent bound is undefined.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// + - * / // % ** ~ with Python's semantics (int overflow is an error rather than a silent wrap).
Value binary_op(std::string_view op, const Value& a, const Value& b);
Value negate(const Value& v);

// What `for x in v` visits: list items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);

// range, namespace, dict, raise_exception, strftime_now. `max_range` bounds range()'s length.
Dict make_globals(int64_t max_range);

// Binds a builtin's arguments to its parameter names (positional first, then keywords); absent ones are
// undefined. Throws EvalError for too many or unknown arguments.
std::vector<Value> bind_args(std::string_view function, CallArgs& args,
                             std::initializer_list<const char*> names);

}  // namespace qwen3::jinja
