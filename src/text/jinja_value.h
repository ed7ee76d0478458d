// Values of the Jinja interpreter: Python's none, bool, int, float, str, list, tuple and dict
// (insertion-ordered), plus jinja's Undefined, namespace() objects and callables. Every operation follows
// Python's semantics (truthiness, str() and repr() formatting, equality across int/float/bool, floor
// division, slicing), because chat templates are written against CPython and a prompt that differs by one
// character is a different prompt.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace qwen3::jinja {

constexpr int kMaxValueDepth = 200;

// A failure while evaluating an expression (a Python TypeError, an undefined value used, ...). The
// interpreter adds the template line and rethrows it as a TemplateError.
class EvalError : public std::runtime_error {
 public:
  explicit EvalError(const std::string& message) : std::runtime_error(message) {}
};

class Value;

// Insertion-ordered string-keyed map: Python dicts keep insertion order and tojson must reproduce it.
class Dict {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces in place when present (Python keeps the first position)
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() : data_(Undefined{}) {}
  static Value undefined(std::string hint = {}) { return Value(Data(Undefined{std::move(hint)})); }
  static Value none() { return Value(Data(nullptr)); }
  static Value boolean(bool b) { return Value(Data(b)); }
  static Value integer(int64_t i) { return Value(Data(i)); }
  static Value number(double d) { return Value(Data(d)); }
  static Value string(std::string s) { return Value(Data(std::move(s))); }
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  // What jinja's select/map/unique/items/reverse filters return: a Python generator. Always true, iterable,
  // but it has no len(), no index and no printable form (Python would print its memory address).
  static Value generator(std::vector<Value> items);
  static Value dict(Dict entries);
  // A jinja namespace(): the one mutable object (`{% set ns.attr = ... %}`), shared by every copy of the
  // value.
  static Value namespace_object(Dict entries);
  static Value function(std::string name, Function fn);

  Kind kind() const { return Kind(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }  // lists, tuples and generators
  bool is_tuple() const;
  bool is_generator() const;
  bool is_dict() const { return kind() == Kind::kDict; }  // dicts and namespaces
  bool is_namespace() const;
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const std::vector<Value>& items() const;  // list or tuple
  const Dict& as_dict() const;
  Dict& mutable_namespace() const;  // only for namespaces
  const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }
  const std::string& function_name() const;
  Value call(CallArgs& args) const;
  // Nesting of lists and dicts (a namespace counts as a leaf: it is a reference). Bounded by kMaxValueDepth
  // so that printing, comparing and destroying a value cannot exhaust the stack.
  int depth() const;

  // Python int value of a bool or int (bool is a subclass of int); a float as double.
  int64_t int_value() const { return is_bool() ? int64_t(as_bool()) : as_int(); }
  double float_value() const { return is_float() ? as_float() : double(int_value()); }

 private:
  struct Undefined {
    std::string hint;  // why it is undefined, for the error raised when it is used
  };
  struct ListData {
    std::vector<Value> items;
    bool is_tuple = false;
    int depth = 1;
    bool is_generator = false;
  };
  struct DictData {
    Dict dict;
    bool is_namespace = false;
    int depth = 1;
  };
  struct FunctionData {
    std::string name;
    Function fn;
  };
  using Data = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
                            std::shared_ptr<const ListData>, std::shared_ptr<DictData>,
                            std::shared_ptr<const FunctionData>>;
  explicit Value(Data data) : data_(std::move(data)) {}
  Data data_;
};

// ---- Python semantics
// --------------------------------------------------------------------------------------------
bool truthy(const Value& v);
std::string type_name(const Value& v);  // Python's: 'str', 'int', 'NoneType', 'dict', ...
std::string to_str(const Value& v);     // str(v); Undefined prints as the empty string
std::string repr(const Value& v);       // repr(v), as inside a printed list
std::string python_float_repr(double d);
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws EvalError where Python raises TypeError
bool contains(const Value& container, const Value& needle);  // Python's `needle in container`

// ---- JSON
// ---------------------------------------------------------------------------------------------------------
Value from_json(const nlohmann::ordered_json& j);

struct JsonFormat {
  std::string indent;  // empty: one line
  bool use_indent = false;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// json.dumps(v, ensure_ascii=False, ...): what transformers' `tojson` filter prints.
std::string to_python_json(const Value& v, const JsonFormat& format = {});

// ---- UTF-8
// --------------------------------------------------------------------------------------------------------
// Python strings index code points, not bytes.
std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);
std::string encode_utf8(const std::vector<uint32_t>& cps);
size_t count_code_points(std::string_view s);
bool is_valid_utf8(std::string_view s);  // no overlong forms, surrogates or code points past U+10FFFF
bool is_python_space(uint32_t cp);       // str.isspace()

}  // namespace qwen3::jinja
