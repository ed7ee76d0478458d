#include "text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace qwen3::jinja {

// ---- Dict
// ----------------------------------------------------------------------------------------------------------
const Value* Dict::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

// ---- Value
// ---------------------------------------------------------------------------------------------------------
namespace {

int checked_depth(int deepest_child) {
  if (deepest_child + 1 > kMaxValueDepth)
    throw EvalError("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  return deepest_child + 1;
}

}  // namespace

Value Value::list(std::vector<Value> items) {
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth());
  const int depth = checked_depth(deepest);
  return Value(Data(std::make_shared<const ListData>(ListData{std::move(items), false, depth})));
}
Value Value::tuple(std::vector<Value> items) {
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth());
  const int depth = checked_depth(deepest);
  return Value(Data(std::make_shared<const ListData>(ListData{std::move(items), true, depth})));
}
Value Value::generator(std::vector<Value> items) {
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.depth());
  const int depth = checked_depth(deepest);
  return Value(Data(std::make_shared<const ListData>(ListData{std::move(items), false, depth, true})));
}
Value Value::dict(Dict entries) {
  int deepest = 0;
  for (const auto& entry : entries.entries()) deepest = std::max(deepest, entry.second.depth());
  const int depth = checked_depth(deepest);
  return Value(Data(std::make_shared<DictData>(DictData{std::move(entries), false, depth})));
}
Value Value::namespace_object(Dict entries) {
  return Value(Data(std::make_shared<DictData>(DictData{std::move(entries), true, 1})));
}

int Value::depth() const {
  if (is_list()) return std::get<std::shared_ptr<const ListData>>(data_)->depth;
  if (is_dict())
    return std::get<std::shared_ptr<DictData>>(data_)->is_namespace
               ? 1
               : std::get<std::shared_ptr<DictData>>(data_)->depth;
  return 0;
}
Value Value::function(std::string name, Function fn) {
  return Value(Data(std::make_shared<const FunctionData>(FunctionData{std::move(name), std::move(fn)})));
}

bool Value::is_tuple() const {
  return is_list() && std::get<std::shared_ptr<const ListData>>(data_)->is_tuple;
}
bool Value::is_generator() const {
  return is_list() && std::get<std::shared_ptr<const ListData>>(data_)->is_generator;
}
bool Value::is_namespace() const {
  return is_dict() && std::get<std::shared_ptr<DictData>>(data_)->is_namespace;
}
const std::vector<Value>& Value::items() const {
  return std::get<std::shared_ptr<const ListData>>(data_)->items;
}
const Dict& Value::as_dict() const {
  return std::get<std::shared_ptr<DictData>>(data_)->dict;
}
Dict& Value::mutable_namespace() const {
  return std::get<std::shared_ptr<DictData>>(data_)->dict;
}
const std::string& Value::function_name() const {
  return std::get<std::shared_ptr<const FunctionData>>(data_)->name;
}
Value Value::call(CallArgs& args) const {
  return std::get<std::shared_ptr<const FunctionData>>(data_)->fn(args);
}

// ---- UTF-8
// ---------------------------------------------------------------------------------------------------------
std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = uint8_t(s[i]);
    const int extra = b < 0x80 ? 0 : b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : -1;
    if (extra < 0 || i + size_t(extra) >= s.size()) {
      // Inputs are validated UTF-8 (JSON parsing, the template check); a stray byte decodes as U+FFFD.
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    uint32_t cp = extra == 0 ? b : extra == 1 ? (b & 0x1F) : extra == 2 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k <= extra; ++k) cp = (cp << 6) | (uint8_t(s[i + size_t(k)]) & 0x3F);
    out.push_back(cp);
    i += size_t(extra) + 1;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(const std::vector<uint32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) append_utf8(out, cp);
  return out;
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = uint8_t(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t extra;
    uint32_t cp;
    if ((b & 0xE0) == 0xC0) {
      extra = 1;
      cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      extra = 2;
      cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      extra = 3;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto c = uint8_t(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinimum[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

bool is_python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// ---- Python semantics
// ----------------------------------------------------------------------------------------------
bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return v.is_generator() || !v.items().empty();  // a Python generator object is always true
    case Value::Kind::kDict:
      return v.is_namespace() || !v.as_dict().empty();  // a namespace is an object: always true
    case Value::Kind::kCallable:
      return true;
  }
  return false;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return v.is_generator() ? "generator" : v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return v.is_namespace() ? "Namespace" : "dict";
    case Value::Kind::kCallable:
      return "function";
  }
  return "object";
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Python's repr is the shortest string that reads back to the same double: what to_chars produces. Only the
  // layout differs: Python writes fixed notation when the decimal point falls within (-4, 16] digits.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view text(buf, size_t(result.ptr - buf));
  std::string out;
  if (text.front() == '-') {
    out = "-";
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e))
    if (c != '.') digits.push_back(c);
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(), exponent);
  const int decimal_point = exponent + 1;  // value = 0.<digits> * 10^decimal_point
  const int n = int(digits.size());
  if (decimal_point > -4 && decimal_point <= 16) {
    if (decimal_point <= 0) {
      out += "0." + std::string(size_t(-decimal_point), '0') + digits;
    } else if (decimal_point >= n) {
      out += digits + std::string(size_t(decimal_point - n), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(decimal_point)) + "." + digits.substr(size_t(decimal_point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  const int magnitude = std::abs(exponent);
  out += exponent < 0 ? "e-" : "e+";
  if (magnitude < 10) out += "0";
  out += std::to_string(magnitude);
  return out;
}

namespace {

// Code points Python's str.isprintable() rejects that a template could plausibly meet (controls, format
// characters, separators, private use). Unassigned code points are not known here and print as themselves.
bool is_unprintable(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || cp == 0x061C || cp == 0x1680 ||
         cp == 0x180E || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
         (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || (cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF ||
         (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF || cp >= 0xF0000;
}

void append_hex(std::string& out, uint32_t value, int width) {
  static const char* kHex = "0123456789abcdef";
  for (int shift = (width - 1) * 4; shift >= 0; shift -= 4) out.push_back(kHex[(value >> shift) & 0xF]);
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : decode_utf8(s)) {
    if (cp == uint32_t(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(char(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (is_unprintable(cp)) {
      if (cp < 0x100) {
        out += "\\x";
        append_hex(out, cp, 2);
      } else if (cp < 0x10000) {
        out += "\\u";
        append_hex(out, cp, 4);
      } else {
        out += "\\U";
        append_hex(out, cp, 8);
      }
    } else {
      append_utf8(out, cp);
    }
  }
  out.push_back(quote);
  return out;
}

std::string repr_dict(const Dict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += repr_string(key) + ": " + repr(value);
  }
  return out + "}";
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kString:
      return repr_string(v.as_string());
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return python_float_repr(v.as_float());
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kList: {
      if (v.is_generator())
        throw EvalError("cannot print a generator (jinja would print its memory address); add |list");
      const bool tuple = v.is_tuple();
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ", ";
        out += repr(v.items()[i]);
      }
      if (tuple && v.items().size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::kDict:
      // A namespace may contain itself; jinja would print its contents, so refuse rather than differ.
      if (v.is_namespace())
        throw EvalError("printing a namespace object is not supported by this interpreter");
      return repr_dict(v.as_dict());
    case Value::Kind::kCallable:
      return "<function " + v.function_name() + ">";
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.float_value() == b.float_value();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_generator() || b.is_generator()) return &a.items() == &b.items();
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equals(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      if (a.is_namespace() || b.is_namespace()) return &a.as_dict() == &b.as_dict();
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [key, value] : a.as_dict().entries()) {
        const Value* other = b.as_dict().find(key);
        if (!other || !equals(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return a.function_name() == b.function_name();
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.float_value(), y = b.float_value();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.int_value(), y = b.int_value();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 is code point order, which is Python's string order.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() && !b.is_generator()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw EvalError("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;  // jinja's Undefined iterates as empty
    case Value::Kind::kString:
      if (!needle.is_string())
        throw EvalError("'in <string>' requires string as left operand, not " + type_name(needle));
      return container.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& item : container.items())
        if (equals(item, needle)) return true;
      return false;
    case Value::Kind::kDict:
      if ((needle.is_list() && !needle.is_tuple()) || needle.is_dict())
        throw EvalError("unhashable type: '" + type_name(needle) + "'");
      return needle.is_string() && container.as_dict().find(needle.as_string()) != nullptr;
    default:
      throw EvalError("argument of type '" + type_name(container) + "' is not iterable");
  }
}

// ---- JSON
// ----------------------------------------------------------------------------------------------------------
namespace {

// Deep enough for any tool schema; shallow enough to stay far from kMaxValueDepth.
constexpr int kMaxJsonDepth = 128;

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth)
    throw InputError("chat template input: JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                     " levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max()))
        throw InputError("chat template input: integer " + std::to_string(u) +
                         " is too large (limit 2^63-1)");
      return Value::integer(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_at(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [key, value] : j.items()) d.set(key, from_json_at(value, depth + 1));
      return Value::dict(std::move(d));
    }
    case nlohmann::ordered_json::value_t::binary:
      break;
  }
  throw InputError("chat template input: binary JSON values are not supported");
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 0);
}

namespace {

void append_json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (uint8_t(c) < 0x20) {
          out += "\\u";
          append_hex(out, uint8_t(c), 4);
        } else {
          out.push_back(c);  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  out.push_back('"');
}

void append_json(std::string& out, const Value& v, const JsonFormat& f, int depth) {
  auto newline = [&](int level) {
    if (!f.use_indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += f.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = v.as_float();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += python_float_repr(d);
      }
      return;
    }
    case Value::Kind::kString:
      append_json_string(out, v.as_string());
      return;
    case Value::Kind::kList: {
      if (v.is_generator()) break;
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += f.item_separator;
        newline(depth + 1);
        append_json(out, v.items()[i], f, depth + 1);
      }
      newline(depth);
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      if (v.is_namespace()) break;
      if (v.as_dict().empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : v.as_dict().entries()) entries.push_back(&entry);
      if (f.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += f.item_separator;
        newline(depth + 1);
        append_json_string(out, entries[i]->first);
        out += f.key_separator;
        append_json(out, entries[i]->second, f, depth + 1);
      }
      newline(depth);
      out.push_back('}');
      return;
    }
    default:
      break;
  }
  throw EvalError("Object of type " + type_name(v) + " is not JSON serializable");
}

}  // namespace

std::string to_python_json(const Value& v, const JsonFormat& format) {
  std::string out;
  append_json(out, v, format, 0);
  return out;
}

}  // namespace qwen3::jinja
