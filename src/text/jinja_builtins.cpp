#include "text/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "text/jinja.h"

namespace qwen3::jinja {
namespace {

[[noreturn]] void fail_undefined(const Value& v) {
  throw EvalError(v.undefined_hint().empty() ? "an undefined value was used" : v.undefined_hint());
}

// jinja's description of an object in "has no attribute" messages.
std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

Value no_attribute(const Value& object, const std::string& name) {
  return Value::undefined("'" + object_description(object) + "' has no attribute '" + name + "'");
}

void check_size(size_t bytes) {
  if (bytes > kMaxValueBytes)
    throw EvalError("value too large (over " + std::to_string(kMaxValueBytes) + " bytes)");
}

int64_t require_int(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  throw EvalError(std::string(what) + " must be an integer, not " + type_name(v));
}

const std::string& require_string(const Value& v, const char* what) {
  if (!v.is_string()) throw EvalError(std::string(what) + " must be a string, not " + type_name(v));
  return v.as_string();
}

// ---- Case mapping
// -------------------------------------------------------------------------------------------------- Python's
// str.upper()/lower() for the scripts a prompt is likely to hold: Latin (ASCII, Latin-1, Extended-A) and
// basic Cyrillic, plus scripts without case (CJK, kana, Hangul, Arabic, Hebrew, Indic, Thai, emoji,
// punctuation). Anything else is an error rather than a guess.
bool is_caseless(uint32_t cp) {
  return (cp >= 0x0590 && cp <= 0x06FF) || (cp >= 0x0900 && cp <= 0x0E7F) || (cp >= 0x2000 && cp <= 0x20CF) ||
         (cp >= 0x2190 && cp <= 0x245F) || (cp >= 0x2500 && cp <= 0x2BFF) || (cp >= 0x2E80 && cp <= 0xA4CF) ||
         (cp >= 0xAC00 && cp <= 0xD7AF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE00 && cp <= 0xFE4F) ||
         (cp >= 0x1F000 && cp <= 0x1FAFF) || (cp >= 0x20000 && cp <= 0x3FFFF) ||
         (cp >= 0xE0000 && cp <= 0xE01EF);
}

void append_case_mapped(std::string& out, uint32_t cp, bool upper) {
  if (cp < 0x80) {
    if (upper && cp >= 'a' && cp <= 'z') cp -= 32;
    if (!upper && cp >= 'A' && cp <= 'Z') cp += 32;
    out.push_back(char(cp));
    return;
  }
  uint32_t mapped = cp;
  if (cp < 0x100) {
    if (upper) {
      if (cp == 0xDF) {
        out += "SS";
        return;
      }
      if (cp == 0xB5) mapped = 0x39C;
      if (cp == 0xFF) mapped = 0x178;
      if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) mapped = cp - 0x20;
    } else if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) {
      mapped = cp + 0x20;
    }
  } else if (cp < 0x180) {
    if (cp == 0x130) {
      if (!upper) {
        out += "i\xCC\x87";  // i + combining dot above
        return;
      }
    } else if (cp == 0x131) {
      if (upper) mapped = 'I';
    } else if (cp == 0x149) {
      if (upper) {
        out += "\xCA\xBCN";
        return;
      }
    } else if (cp == 0x178) {
      if (!upper) mapped = 0xFF;
    } else if (cp == 0x17F) {
      if (upper) mapped = 'S';
    } else if (cp != 0x138) {
      // Pairs: even upper/odd lower in [0x100, 0x137] and [0x14A, 0x177]; odd upper/even lower elsewhere.
      const bool even_upper = (cp <= 0x137) || (cp >= 0x14A && cp <= 0x177);
      const bool is_upper = even_upper ? (cp % 2 == 0) : (cp % 2 == 1);
      if (upper && !is_upper) mapped = cp - 1;
      if (!upper && is_upper) mapped = cp + 1;
    }
  } else if (cp >= 0x400 && cp <= 0x45F) {
    if (upper && cp >= 0x430 && cp <= 0x44F) mapped = cp - 0x20;
    if (upper && cp >= 0x450) mapped = cp - 0x50;
    if (!upper && cp >= 0x410 && cp <= 0x42F) mapped = cp + 0x20;
    if (!upper && cp < 0x410) mapped = cp + 0x50;
  } else if (!is_caseless(cp)) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "U+%04X", unsigned(cp));
    throw EvalError(std::string(upper ? "upper" : "lower") + "(): the case mapping of " + hex +
                    " is not known to this interpreter");
  }
  append_utf8(out, mapped);
}

std::string change_case(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : decode_utf8(s)) append_case_mapped(out, cp, upper);
  return out;
}

bool has_case(uint32_t cp) {
  std::string up, low, self;
  append_case_mapped(up, cp, true);
  append_case_mapped(low, cp, false);
  append_utf8(self, cp);
  return up != self || low != self;
}

// Python's title(): a cased character after a cased one is lowered, after anything else raised.
std::string title_case(const std::string& s) {
  std::string out;
  bool previous_cased = false;
  for (uint32_t cp : decode_utf8(s)) {
    append_case_mapped(out, cp, !previous_cased);
    previous_cased = has_case(cp);
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (uint32_t cp : decode_utf8(s)) {
    append_case_mapped(out, cp, first);
    first = false;
  }
  return out;
}

// ---- str methods
// ---------------------------------------------------------------------------------------------------
bool in_strip_set(uint32_t cp, const std::vector<uint32_t>* chars) {
  if (!chars) return is_python_space(cp);
  return std::find(chars->begin(), chars->end(), cp) != chars->end();
}

std::string python_strip(const std::string& s, const Value& chars_arg, bool left, bool right) {
  std::vector<uint32_t> chars;
  const std::vector<uint32_t>* set = nullptr;
  if (!chars_arg.is_undefined() && !chars_arg.is_none()) {
    chars = decode_utf8(require_string(chars_arg, "strip() argument"));
    set = &chars;
  }
  const auto cps = decode_utf8(s);
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && in_strip_set(cps[begin], set)) ++begin;
  if (right)
    while (end > begin && in_strip_set(cps[end - 1], set)) --end;
  return encode_utf8(
      std::vector<uint32_t>(cps.begin() + std::ptrdiff_t(begin), cps.begin() + std::ptrdiff_t(end)));
}

std::vector<Value> python_split(const std::string& s, const Value& sep_arg, int64_t maxsplit,
                                bool from_right) {
  std::vector<std::string> parts;
  if (sep_arg.is_undefined() || sep_arg.is_none()) {
    // Runs of whitespace separate; leading and trailing whitespace yield nothing.
    const auto cps = decode_utf8(s);
    std::vector<std::pair<size_t, size_t>> words;
    for (size_t i = 0; i < cps.size();) {
      while (i < cps.size() && is_python_space(cps[i])) ++i;
      if (i == cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !is_python_space(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    auto piece = [&](size_t a, size_t b) {
      return encode_utf8(
          std::vector<uint32_t>(cps.begin() + std::ptrdiff_t(a), cps.begin() + std::ptrdiff_t(b)));
    };
    const size_t limit = maxsplit < 0 ? words.size() : size_t(maxsplit) + 1;
    if (words.size() <= limit) {
      for (auto [a, b] : words) parts.push_back(piece(a, b));
    } else if (!from_right) {
      for (size_t k = 0; k + 1 < limit; ++k) parts.push_back(piece(words[k].first, words[k].second));
      parts.push_back(piece(words[limit - 1].first, cps.size()));  // the rest keeps its trailing whitespace
    } else {
      const size_t first_kept = words.size() - (limit - 1);
      parts.push_back(piece(0, words[first_kept - 1].second));  // the rest keeps its leading whitespace
      for (size_t k = first_kept; k < words.size(); ++k)
        parts.push_back(piece(words[k].first, words[k].second));
    }
  } else {
    const std::string& sep = require_string(sep_arg, "separator");
    if (sep.empty()) throw EvalError("empty separator");
    int64_t splits = 0;
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || splits < maxsplit) {
        const size_t at = s.find(sep, start);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(start, at - start));
        start = at + sep.size();
        ++splits;
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      std::vector<std::string> reversed;
      while (maxsplit < 0 || splits < maxsplit) {
        if (end < sep.size()) break;
        const size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string::npos) break;
        reversed.push_back(s.substr(at + sep.size(), end - at - sep.size()));
        end = at;
        ++splits;
      }
      reversed.push_back(s.substr(0, end));
      parts.assign(reversed.rbegin(), reversed.rend());
    }
  }
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

bool is_line_break(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
         cp == 0x2028 || cp == 0x2029;
}

std::vector<std::string> python_splitlines(const std::string& s, bool keepends) {
  const auto cps = decode_utf8(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_line_break(cps[i])) continue;
    size_t end = i + 1;
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    lines.push_back(encode_utf8(std::vector<uint32_t>(cps.begin() + std::ptrdiff_t(start),
                                                      cps.begin() + std::ptrdiff_t(keepends ? end : i))));
    start = end;
    i = end - 1;
  }
  if (start < cps.size())
    lines.push_back(encode_utf8(std::vector<uint32_t>(cps.begin() + std::ptrdiff_t(start), cps.end())));
  return lines;
}

std::string python_replace(const std::string& s, const std::string& old, const std::string& replacement,
                           int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const auto cps = decode_utf8(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < cps.size()) append_utf8(out, cps[i]);
      check_size(out.size());
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += replacement;
    check_size(out.size());
    start = at + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

bool python_startswith(const std::string& s, const Value& prefix, bool at_end) {
  auto test = [&](const Value& p) {
    const std::string& text = require_string(p, at_end ? "endswith() argument" : "startswith() argument");
    if (text.size() > s.size()) return false;
    return at_end ? s.compare(s.size() - text.size(), text.size(), text) == 0
                  : s.compare(0, text.size(), text) == 0;
  };
  if (prefix.is_tuple()) {
    for (const Value& p : prefix.items())
      if (test(p)) return true;
    return false;
  }
  return test(prefix);
}

std::string join_strings(const std::string& separator, const std::vector<Value>& items, bool convert) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    if (!convert && !items[i].is_string())
      throw EvalError("sequence item " + std::to_string(i) + ": expected str instance, " +
                      type_name(items[i]) + " found");
    out += to_str(items[i]);
    check_size(out.size());
  }
  return out;
}

// Code-point index of a byte offset.
int64_t code_point_index(const std::string& s, size_t byte_offset) {
  return int64_t(count_code_points(std::string_view(s).substr(0, byte_offset)));
}

bool ascii_only(const std::string& s, const char* method) {
  for (char c : s)
    if (uint8_t(c) >= 0x80)
      throw EvalError(std::string("str.") + method +
                      "() on non-ASCII text is not supported by this interpreter");
  return true;
}

Value call_str_method(const std::string& s, const std::string& method, CallArgs& args) {
  if (method == "startswith" || method == "endswith") {
    auto a = bind_args(method, args, {"prefix"});
    return Value::boolean(python_startswith(s, a[0], method == "endswith"));
  }
  if (method == "strip" || method == "lstrip" || method == "rstrip") {
    auto a = bind_args(method, args, {"chars"});
    return Value::string(python_strip(s, a[0], method != "rstrip", method != "lstrip"));
  }
  if (method == "split" || method == "rsplit") {
    auto a = bind_args(method, args, {"sep", "maxsplit"});
    const int64_t maxsplit = a[1].is_undefined() ? -1 : require_int(a[1], "maxsplit");
    return Value::list(python_split(s, a[0], maxsplit, method == "rsplit"));
  }
  if (method == "splitlines") {
    auto a = bind_args(method, args, {"keepends"});
    std::vector<Value> out;
    for (auto& line : python_splitlines(s, truthy(a[0]))) out.push_back(Value::string(std::move(line)));
    return Value::list(std::move(out));
  }
  if (method == "upper" || method == "lower") {
    bind_args(method, args, {});
    return Value::string(change_case(s, method == "upper"));
  }
  if (method == "title") {
    bind_args(method, args, {});
    return Value::string(title_case(s));
  }
  if (method == "capitalize") {
    bind_args(method, args, {});
    return Value::string(capitalize(s));
  }
  if (method == "replace") {
    auto a = bind_args(method, args, {"old", "new", "count"});
    return Value::string(python_replace(s, require_string(a[0], "replace() argument 1"),
                                        require_string(a[1], "replace() argument 2"),
                                        a[2].is_undefined() ? -1 : require_int(a[2], "count")));
  }
  if (method == "find" || method == "rfind" || method == "index" || method == "rindex") {
    auto a = bind_args(method, args, {"sub"});
    const std::string& sub = require_string(a[0], "substring");
    const size_t at = method[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (method == "index" || method == "rindex") throw EvalError("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(code_point_index(s, at));
  }
  if (method == "count") {
    auto a = bind_args(method, args, {"sub"});
    const std::string& sub = require_string(a[0], "substring");
    if (sub.empty()) return Value::integer(int64_t(count_code_points(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (method == "join") {
    auto a = bind_args(method, args, {"iterable"});
    return Value::string(join_strings(s, iterate(a[0]), false));
  }
  if (method == "removeprefix" || method == "removesuffix") {
    auto a = bind_args(method, args, {"affix"});
    const std::string& affix = require_string(a[0], "argument");
    const bool prefix = method == "removeprefix";
    if (python_startswith(s, a[0], !prefix))
      return Value::string(prefix ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
    return Value::string(s);
  }
  if (method == "isspace") {
    bind_args(method, args, {});
    const auto cps = decode_utf8(s);
    return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), is_python_space));
  }
  if (method == "isascii") {
    bind_args(method, args, {});
    return Value::boolean(std::all_of(s.begin(), s.end(), [](char c) { return uint8_t(c) < 0x80; }));
  }
  if (method == "isdigit" || method == "isdecimal" || method == "isnumeric" || method == "isalpha" ||
      method == "isalnum") {
    bind_args(method, args, {});
    ascii_only(s, method.c_str());
    auto pred = [&](char c) {
      const bool digit = c >= '0' && c <= '9';
      const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      return method == "isalpha" ? alpha : method == "isalnum" ? (alpha || digit) : digit;
    };
    return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), pred));
  }
  if (method == "islower" || method == "isupper") {
    bind_args(method, args, {});
    bool any_cased = false;
    for (uint32_t cp : decode_utf8(s)) {
      std::string up, low, self;
      append_case_mapped(up, cp, true);
      append_case_mapped(low, cp, false);
      append_utf8(self, cp);
      if (up == self && low == self) continue;
      any_cased = true;
      if (method == "islower" ? up == self : low == self) return Value::boolean(false);
    }
    return Value::boolean(any_cased);
  }
  throw EvalError("str." + method + "() is not supported by this interpreter");
}

const char* const kStrMethods[] = {
    "capitalize", "casefold",     "center",       "count",   "encode",     "endswith",    "expandtabs",
    "find",       "format",       "format_map",   "index",   "isalnum",    "isalpha",     "isascii",
    "isdecimal",  "isdigit",      "isidentifier", "islower", "isnumeric",  "isprintable", "isspace",
    "istitle",    "isupper",      "join",         "ljust",   "lower",      "lstrip",      "maketrans",
    "partition",  "removeprefix", "removesuffix", "replace", "rfind",      "rindex",      "rjust",
    "rpartition", "rsplit",       "rstrip",       "split",   "splitlines", "startswith",  "strip",
    "swapcase",   "title",        "translate",    "upper",   "zfill"};
const char* const kDictMethods[] = {"clear", "copy",    "fromkeys",   "get",    "items", "keys",
                                    "pop",   "popitem", "setdefault", "update", "values"};
const char* const kUnsafeDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char* const kListMethods[] = {"append", "clear", "copy",   "count",   "extend", "index",
                                    "insert", "pop",   "remove", "reverse", "sort"};
const char* const kUnsafeListMethods[] = {"append", "clear",  "extend",  "insert",
                                          "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool one_of(const std::string& name, const char* const (&names)[N]) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

std::vector<Value> dict_items(const Dict& d) {
  std::vector<Value> out;
  out.reserve(d.size());
  for (const auto& [key, value] : d.entries()) out.push_back(Value::tuple({Value::string(key), value}));
  return out;
}

Value call_dict_method(const Value& object, const std::string& method, CallArgs& args) {
  const Dict& d = object.as_dict();
  if (method == "items") {
    bind_args(method, args, {});
    return Value::list(dict_items(d));
  }
  if (method == "keys" || method == "values") {
    bind_args(method, args, {});
    std::vector<Value> out;
    for (const auto& [key, value] : d.entries()) out.push_back(method == "keys" ? Value::string(key) : value);
    return Value::list(std::move(out));
  }
  if (method == "get") {
    auto a = bind_args(method, args, {"key", "default"});
    const Value* found = a[0].is_string() ? d.find(a[0].as_string()) : nullptr;
    if (found) return *found;
    return a[1].is_undefined() ? Value::none() : a[1];
  }
  if (method == "copy") {
    bind_args(method, args, {});
    return Value::dict(d);
  }
  throw EvalError("dict." + method + "() is not supported by this interpreter");
}

Value call_list_method(const Value& object, const std::string& method, CallArgs& args) {
  const auto& items = object.items();
  if (method == "count") {
    auto a = bind_args(method, args, {"value"});
    return Value::integer(
        int64_t(std::count_if(items.begin(), items.end(), [&](const Value& v) { return equals(v, a[0]); })));
  }
  if (method == "index") {
    auto a = bind_args(method, args, {"value"});
    for (size_t i = 0; i < items.size(); ++i)
      if (equals(items[i], a[0])) return Value::integer(int64_t(i));
    throw EvalError(repr(a[0]) + " is not in list");
  }
  if (method == "copy") {
    bind_args(method, args, {});
    return Value::list(items);
  }
  throw EvalError("list." + method + "() is not supported by this interpreter");
}

Value bound_method(const Value& object, const std::string& method) {
  return Value::function(type_name(object) + "." + method, [object, method](CallArgs& args) {
    if (object.is_string()) return call_str_method(object.as_string(), method, args);
    if (object.is_dict()) return call_dict_method(object, method, args);
    return call_list_method(object, method, args);
  });
}

}  // namespace

// ---- Access
// ------------------------------------------------------------------------------------------------------
Value get_attribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      fail_undefined(object);
    case Value::Kind::kDict: {
      if (object.is_namespace()) {
        const Value* found = object.as_dict().find(name);
        return found ? *found : no_attribute(object, name);
      }
      // Python's getattr comes first: `message.items` is the method even when the dict has an "items" key.
      if (one_of(name, kUnsafeDictMethods))
        throw EvalError("access to attribute '" + name + "' of 'dict' object is unsafe.");
      if (one_of(name, kDictMethods)) return bound_method(object, name);
      const Value* found = object.as_dict().find(name);
      return found ? *found : no_attribute(object, name);
    }
    case Value::Kind::kString:
      if (one_of(name, kStrMethods)) return bound_method(object, name);
      return no_attribute(object, name);
    case Value::Kind::kList:
      if (object.is_generator()) return no_attribute(object, name);
      if (object.is_tuple() && (name == "count" || name == "index")) return bound_method(object, name);
      if (!object.is_tuple() && one_of(name, kUnsafeListMethods))
        throw EvalError("access to attribute '" + name + "' of 'list' object is unsafe.");
      if (!object.is_tuple() && one_of(name, kListMethods)) return bound_method(object, name);
      return no_attribute(object, name);
    default:
      return no_attribute(object, name);
  }
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) fail_undefined(object);
  if (key.is_undefined()) fail_undefined(key);
  const bool int_key = key.is_int() || key.is_bool();
  if (object.is_list() && !object.is_generator() && int_key) {
    const auto& items = object.items();
    int64_t i = key.int_value();
    if (i < 0) i += int64_t(items.size());
    if (i < 0 || i >= int64_t(items.size())) return no_attribute(object, to_str(key));
    return items[size_t(i)];
  }
  if (object.is_string() && int_key) {
    const auto cps = decode_utf8(object.as_string());
    int64_t i = key.int_value();
    if (i < 0) i += int64_t(cps.size());
    if (i < 0 || i >= int64_t(cps.size())) return no_attribute(object, to_str(key));
    std::string out;
    append_utf8(out, cps[size_t(i)]);
    return Value::string(std::move(out));
  }
  if (object.is_dict() && key.is_string()) {
    const Value* found = object.as_dict().find(key.as_string());
    if (found) return *found;
  }
  if (key.is_string()) return get_attribute(object, key.as_string());
  return no_attribute(object, to_str(key));
}

Value get_slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (object.is_undefined()) fail_undefined(object);
  // jinja compiles a slice to a plain Python subscript: slicing something unsliceable is a TypeError.
  if (!object.is_string() && !(object.is_list() && !object.is_generator()))
    throw EvalError("'" + type_name(object) + "' object is not subscriptable");
  for (const Value* b : {&start_v, &stop_v, &step_v})
    if (!b->is_undefined() && !b->is_none() && !b->is_int() && !b->is_bool())
      throw EvalError("slice indices must be integers or None");
  auto bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return v.int_value();
  };
  const int64_t step = bound(step_v).value_or(1);
  if (step == 0) throw EvalError("slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t length;
  if (object.is_string()) {
    cps = decode_utf8(object.as_string());
    length = int64_t(cps.size());
  } else {
    length = int64_t(object.items().size());
  }
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, bool is_start) {
    if (!v) return is_start ? (step < 0 ? length - 1 : 0) : (step < 0 ? -1 : length);
    int64_t i = *v;
    if (i < 0) {
      i += length;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    return i;
  };
  const int64_t start = adjust(bound(start_v), true);
  const int64_t stop = adjust(bound(stop_v), false);
  std::vector<size_t> picked;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picked.push_back(size_t(i));
  if (object.is_string()) {
    std::string out;
    for (size_t i : picked) append_utf8(out, cps[i]);
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(picked.size());
  for (size_t i : picked) out.push_back(object.items()[i]);
  return object.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.items();
    case Value::Kind::kDict: {
      if (v.is_namespace()) break;
      std::vector<Value> keys;
      keys.reserve(v.as_dict().size());
      for (const auto& [key, value] : v.as_dict().entries()) keys.push_back(Value::string(key));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (uint32_t cp : decode_utf8(v.as_string())) {
        std::string c;
        append_utf8(c, cp);
        chars.push_back(Value::string(std::move(c)));
      }
      return chars;
    }
    default:
      break;
  }
  throw EvalError("'" + type_name(v) + "' object is not iterable");
}

// ---- Operators
// -----------------------------------------------------------------------------------------------------
namespace {

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
  if (op == "+" && a.is_string())
    throw EvalError("can only concatenate str (not \"" + type_name(b) + "\") to str");
  if (op == "+" && a.is_list() && !a.is_tuple())
    throw EvalError("can only concatenate list (not \"" + type_name(b) + "\") to list");
  throw EvalError("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" +
                  type_name(b) + "'");
}

Value repeat(const Value& sequence, int64_t count) {
  if (count <= 0)
    return sequence.is_string()  ? Value::string("")
           : sequence.is_tuple() ? Value::tuple({})
                                 : Value::list({});
  if (sequence.is_string()) {
    check_size(sequence.as_string().size() * size_t(std::min<int64_t>(count, int64_t(kMaxValueBytes) + 1)));
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += sequence.as_string();
    return Value::string(std::move(out));
  }
  check_size(sequence.items().size() * size_t(std::min<int64_t>(count, int64_t(kMaxValueBytes) + 1)));
  std::vector<Value> out;
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), sequence.items().begin(), sequence.items().end());
  return sequence.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

double python_float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

// printf-style `"%s" % value`: %s %r %d %i %f with optional flags, width and precision.
std::string percent_format(const std::string& format, const Value& args) {
  std::vector<Value> values = args.is_tuple() ? args.items() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) throw EvalError("incomplete format");
    if (format[i] == '%') {
      out.push_back('%');
      continue;
    }
    std::string spec = "%";
    while (i < format.size() && std::strchr("-+ 0#", format[i])) spec.push_back(format[i++]);
    while (i < format.size() && std::isdigit(uint8_t(format[i]))) spec.push_back(format[i++]);
    if (i < format.size() && format[i] == '.') {
      spec.push_back(format[i++]);
      while (i < format.size() && std::isdigit(uint8_t(format[i]))) spec.push_back(format[i++]);
    }
    if (i >= format.size()) throw EvalError("incomplete format");
    const char conversion = format[i];
    if (next >= values.size()) throw EvalError("not enough arguments for format string");
    const Value& v = values[next++];
    char buf[512];
    if (conversion == 's' || conversion == 'r') {
      if (spec != "%") throw EvalError("width and precision on %s are not supported by this interpreter");
      out += conversion == 's' ? to_str(v) : repr(v);
    } else if (conversion == 'd' || conversion == 'i') {
      if (!v.is_number()) throw EvalError("%d format: a real number is required, not " + type_name(v));
      const long long n = v.is_float() ? (long long)(std::trunc(v.as_float())) : (long long)(v.int_value());
      std::snprintf(buf, sizeof(buf), (spec + "lld").c_str(), n);
      out += buf;
    } else if (conversion == 'f' || conversion == 'F') {
      if (!v.is_number()) throw EvalError("must be real number, not " + type_name(v));
      std::snprintf(buf, sizeof(buf), (spec + "f").c_str(), v.float_value());
      out += buf;
    } else {
      throw EvalError(std::string("unsupported format character '") + conversion + "'");
    }
  }
  // Python's rule: every argument is used, except a lone argument with __getitem__ (a dict, a list, jinja's
  // Undefined), which Python takes for a mapping.
  const bool mapping_like =
      args.is_dict() || args.is_undefined() || (args.is_list() && !args.is_tuple() && !args.is_generator());
  if (next < values.size() && !mapping_like)
    throw EvalError("not all arguments converted during string formatting");
  return out;
}

}  // namespace

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value::number(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (v.int_value() == std::numeric_limits<int64_t>::min()) throw EvalError("integer overflow");
    return Value::integer(-v.int_value());
  }
  throw EvalError("bad operand type for unary -: '" + type_name(v) + "'");
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string out = to_str(a);
    out += to_str(b);
    check_size(out.size());
    return Value::string(std::move(out));
  }
  if (op == "%" && a.is_string())
    return Value::string(percent_format(a.as_string(), b));  // str.__mod__ first
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool numbers = a.is_number() && b.is_number();
  const bool floats = numbers && (a.is_float() || b.is_float());
  if (op == "+") {
    if (numbers && !floats) {
      int64_t r;
      if (__builtin_add_overflow(a.int_value(), b.int_value(), &r)) throw EvalError("integer overflow");
      return Value::integer(r);
    }
    if (floats) return Value::number(a.float_value() + b.float_value());
    if (a.is_string() && b.is_string()) {
      check_size(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() &&
        !b.is_generator()) {
      check_size(a.items().size() + b.items().size());
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    unsupported_operands(op, a, b);
  }
  if (op == "-") {
    if (numbers && !floats) {
      int64_t r;
      if (__builtin_sub_overflow(a.int_value(), b.int_value(), &r)) throw EvalError("integer overflow");
      return Value::integer(r);
    }
    if (floats) return Value::number(a.float_value() - b.float_value());
    unsupported_operands(op, a, b);
  }
  if (op == "*") {
    if (numbers && !floats) {
      int64_t r;
      if (__builtin_mul_overflow(a.int_value(), b.int_value(), &r)) throw EvalError("integer overflow");
      return Value::integer(r);
    }
    if (floats) return Value::number(a.float_value() * b.float_value());
    auto repeatable = [](const Value& v) { return v.is_string() || (v.is_list() && !v.is_generator()); };
    if (repeatable(a) && (b.is_int() || b.is_bool())) return repeat(a, b.int_value());
    if (repeatable(b) && (a.is_int() || a.is_bool())) return repeat(b, a.int_value());
    unsupported_operands(op, a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported_operands(op, a, b);
    if (b.float_value() == 0) throw EvalError("division by zero");
    return Value::number(a.float_value() / b.float_value());
  }
  if (op == "//" || op == "%") {
    if (!numbers) unsupported_operands(op, a, b);
    if (floats) {
      const double x = a.float_value(), y = b.float_value();
      if (y == 0) throw EvalError("float division by zero");
      const double mod = python_float_mod(x, y);
      return Value::number(op == "%" ? mod : std::round((x - mod) / y));
    }
    const int64_t x = a.int_value(), y = b.int_value();
    if (y == 0) throw EvalError("integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) {
      if (op == "%") return Value::integer(0);
      throw EvalError("integer overflow");
    }
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return Value::integer(op == "%" ? r : q);
  }
  if (op == "**") {
    if (!numbers) unsupported_operands(op, a, b);
    if (!floats && b.int_value() >= 0) {
      int64_t result = 1, base = a.int_value();
      for (int64_t e = b.int_value(); e > 0; e >>= 1) {
        if (e & 1)
          if (__builtin_mul_overflow(result, base, &result)) throw EvalError("integer overflow");
        if (e > 1)
          if (__builtin_mul_overflow(base, base, &base)) throw EvalError("integer overflow");
      }
      return Value::integer(result);
    }
    if (a.float_value() == 0 && b.float_value() < 0)
      throw EvalError("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(a.float_value(), b.float_value()));
  }
  throw EvalError("unknown operator " + std::string(op));
}

std::vector<Value> bind_args(std::string_view function, CallArgs& args,
                             std::initializer_list<const char*> names) {
  std::vector<Value> bound(names.size());
  if (args.positional.size() > names.size())
    throw EvalError(std::string(function) + "() takes at most " + std::to_string(names.size()) +
                    " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  std::vector<bool> given(names.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    bound[i] = std::move(args.positional[i]);
    given[i] = true;
  }
  for (auto& [key, value] : args.keyword) {
    size_t index = 0;
    for (const char* name : names) {
      if (key == name) break;
      ++index;
    }
    if (index == names.size())
      throw EvalError(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    if (given[index])
      throw EvalError(std::string(function) + "() got multiple values for argument '" + key + "'");
    bound[index] = std::move(value);
    given[index] = true;
  }
  return bound;
}

// ---- Filters
// -------------------------------------------------------------------------------------------------------
namespace {

// jinja's attribute getter for filters (`map(attribute='a.b')`): dotted parts, digits as indexes.
Value get_path(const Value& v, const Value& path) {
  if (path.is_int()) return get_item(v, path);
  Value current = v;
  const std::string& text = require_string(path, "attribute");
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    const std::string part = text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = get_item(current, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// Sort key with jinja's default case-insensitivity for strings.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(change_case(v.as_string(), false));
  return v;
}

Value filter_abs(const Value& in, CallArgs& args) {
  bind_args("abs", args, {});
  if (in.is_float()) return Value::number(std::fabs(in.as_float()));
  if (in.is_int() || in.is_bool()) return in.int_value() < 0 ? negate(in) : Value::integer(in.int_value());
  throw EvalError("bad operand type for abs(): '" + type_name(in) + "'");
}

Value filter_capitalize(const Value& in, CallArgs& args) {
  bind_args("capitalize", args, {});
  return Value::string(capitalize(to_str(in)));
}

Value filter_length(const Value& in, CallArgs& args) {
  bind_args("length", args, {});
  switch (in.kind()) {
    case Value::Kind::kUndefined:
      return Value::integer(0);
    case Value::Kind::kString:
      return Value::integer(int64_t(count_code_points(in.as_string())));
    case Value::Kind::kList:
      if (in.is_generator()) break;
      return Value::integer(int64_t(in.items().size()));
    case Value::Kind::kDict:
      if (!in.is_namespace()) return Value::integer(int64_t(in.as_dict().size()));
      break;
    default:
      break;
  }
  throw EvalError("object of type '" + type_name(in) + "' has no len()");
}

Value filter_default(const Value& in, CallArgs& args) {
  auto a = bind_args("default", args, {"default_value", "boolean"});
  const Value fallback = a[0].is_undefined() ? Value::string("") : a[0];
  if (in.is_undefined() || (truthy(a[1]) && !truthy(in))) return fallback;
  return in;
}

Value filter_dictsort(const Value& in, CallArgs& args) {
  auto a = bind_args("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!in.is_dict() || in.is_namespace()) throw EvalError("dictsort: a mapping is required");
  const bool by_value = a[1].is_string() && a[1].as_string() == "value";
  if (!a[1].is_undefined() && !by_value && !(a[1].is_string() && a[1].as_string() == "key"))
    throw EvalError("You can only sort by either 'key' or 'value'");
  std::vector<Value> items = dict_items(in.as_dict());
  const bool case_sensitive = truthy(a[0]), reverse = truthy(a[2]);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = sort_key(x.items()[by_value ? 1 : 0], case_sensitive);
    const Value ky = sort_key(y.items()[by_value ? 1 : 0], case_sensitive);
    return reverse ? compare(ky, kx) < 0 : compare(kx, ky) < 0;
  });
  return Value::list(std::move(items));
}

Value filter_escape(const Value& in, CallArgs& args) {
  bind_args("escape", args, {});
  std::string out;
  for (char c : to_str(in)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::string(std::move(out));
}

Value filter_first(const Value& in, CallArgs& args) {
  bind_args("first", args, {});
  if (in.is_list())
    return in.items().empty() ? Value::undefined("No first item, sequence was empty.") : in.items()[0];
  const auto items = iterate(in);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(const Value& in, CallArgs& args) {
  bind_args("last", args, {});
  if (in.is_generator()) throw EvalError("'generator' object is not reversible");
  if (in.is_list())
    return in.items().empty() ? Value::undefined("No last item, sequence was empty.") : in.items().back();
  const auto items = iterate(in);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

std::optional<double> parse_python_float(const std::string& text) {
  std::string s = python_strip(text, Value(), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

Value filter_float(const Value& in, CallArgs& args) {
  auto a = bind_args("float", args, {"default"});
  if (in.is_undefined()) fail_undefined(in);  // Undefined.__float__ raises
  const Value fallback = a[0].is_undefined() ? Value::number(0.0) : a[0];
  if (in.is_number()) return Value::number(in.float_value());
  if (in.is_string()) {
    if (auto d = parse_python_float(in.as_string())) return Value::number(*d);
  }
  return fallback;
}

Value filter_int(const Value& in, CallArgs& args) {
  auto a = bind_args("int", args, {"default", "base"});
  if (in.is_undefined()) fail_undefined(in);  // Undefined.__int__ raises
  const Value fallback = a[0].is_undefined() ? Value::integer(0) : a[0];
  const int base = a[1].is_undefined() ? 10 : int(require_int(a[1], "base"));
  if (in.is_int() || in.is_bool()) return Value::integer(in.int_value());
  if (in.is_float()) {
    const double d = std::trunc(in.as_float());
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(int64_t(d));
  }
  if (in.is_string()) {
    std::string s = python_strip(in.as_string(), Value(), true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    int64_t n = 0;
    const char* begin = s.c_str() + (!s.empty() && s[0] == '+' ? 1 : 0);
    const auto [ptr, ec] = std::from_chars(begin, s.c_str() + s.size(), n, base);
    if (!s.empty() && ec == std::errc() && ptr == s.c_str() + s.size()) return Value::integer(n);
    if (auto d = parse_python_float(in.as_string())) {
      if (std::isfinite(*d) && std::fabs(*d) < 9.2e18) return Value::integer(int64_t(std::trunc(*d)));
    }
  }
  return fallback;
}

Value filter_indent(const Value& in, CallArgs& args) {
  auto a = bind_args("indent", args, {"width", "first", "blank"});
  const std::string indention =
      a[0].is_string() ? a[0].as_string()
                       : std::string(size_t(a[0].is_undefined() ? 4 : require_int(a[0], "width")), ' ');
  const std::vector<std::string> lines = python_splitlines(to_str(in) + "\n", false);
  std::string out;
  if (truthy(a[2])) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" + indention : "") + lines[i];
  } else {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i == 0) {
        out += lines[i];
      } else {
        out += "\n" + (lines[i].empty() ? lines[i] : indention + lines[i]);
      }
    }
  }
  if (truthy(a[1])) out = indention + out;
  return Value::string(std::move(out));
}

Value filter_items(const Value& in, CallArgs& args) {
  bind_args("items", args, {});
  if (in.is_undefined()) return Value::generator({});
  if (!in.is_dict() || in.is_namespace()) throw EvalError("Can only get item pairs from a mapping.");
  return Value::generator(dict_items(in.as_dict()));
}

Value filter_join(const Value& in, CallArgs& args) {
  auto a = bind_args("join", args, {"d", "attribute"});
  std::vector<Value> items = iterate(in);
  if (!a[1].is_undefined())
    for (Value& item : items) item = get_path(item, a[1]);
  return Value::string(join_strings(a[0].is_undefined() ? "" : to_str(a[0]), items, true));
}

Value filter_list(const Value& in, CallArgs& args) {
  bind_args("list", args, {});
  return Value::list(iterate(in));
}

Value filter_lower(const Value& in, CallArgs& args) {
  bind_args("lower", args, {});
  return Value::string(change_case(to_str(in), false));
}

Value filter_upper(const Value& in, CallArgs& args) {
  bind_args("upper", args, {});
  return Value::string(change_case(to_str(in), true));
}

// jinja's title filter is not str.title(): it upper-cases the first character of each piece between runs of
// whitespace, '-', '(', '{', '[' and '<', and lower-cases the rest ("they're" -> "They're").
Value filter_title(const Value& in, CallArgs& args) {
  bind_args("title", args, {});
  auto separator = [](uint32_t cp) {
    return is_python_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
  };
  const auto cps = decode_utf8(to_str(in));
  std::string out;
  for (size_t i = 0; i < cps.size();) {
    const bool is_separator = separator(cps[i]);
    size_t j = i;
    while (j < cps.size() && separator(cps[j]) == is_separator) ++j;
    for (size_t k = i; k < j; ++k) append_case_mapped(out, cps[k], k == i);
    i = j;
  }
  return Value::string(std::move(out));
}

Value filter_map(const Value& in, CallArgs& args) {
  std::vector<Value> items = iterate(in);
  Value attribute, fallback;
  bool by_attribute = false;
  for (auto& [key, value] : args.keyword) {
    if (key == "attribute") {
      attribute = value;
      by_attribute = true;
    } else if (key == "default") {
      fallback = value;
    } else if (!by_attribute && args.positional.empty()) {
      throw EvalError("map(): unexpected keyword argument '" + key + "'");
    }
  }
  if (by_attribute) {
    if (!args.positional.empty()) throw EvalError("map(): attribute= takes no positional arguments");
    for (Value& item : items) {
      item = get_path(item, attribute);
      if (item.is_undefined() && !fallback.is_undefined()) item = fallback;
    }
    return Value::generator(std::move(items));
  }
  if (args.positional.empty()) throw EvalError("map(): a filter name or attribute= is required");
  const std::string name = require_string(args.positional[0], "map() filter name");
  const FilterFn fn = find_filter(name);
  if (!fn) throw EvalError("no filter named '" + name + "'");
  for (Value& item : items) {
    CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
    item = fn(item, rest);
  }
  return Value::generator(std::move(items));
}

Value min_max(const Value& in, CallArgs& args, bool want_max) {
  auto a = bind_args(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const std::vector<Value> items = iterate(in);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Value* best = &items[0];
  auto key = [&](const Value& v) {
    return sort_key(a[1].is_undefined() ? v : get_path(v, a[1]), truthy(a[0]));
  };
  for (size_t i = 1; i < items.size(); ++i) {
    const int c = compare(key(items[i]), key(*best));
    if (want_max ? c > 0 : c < 0) best = &items[i];
  }
  return *best;
}

Value filter_max(const Value& in, CallArgs& args) {
  return min_max(in, args, true);
}
Value filter_min(const Value& in, CallArgs& args) {
  return min_max(in, args, false);
}

// select/reject/selectattr/rejectattr share this: keep items whose (attribute's) test result equals `keep`.
Value select_items(const Value& in, CallArgs& args, bool keep, bool by_attribute) {
  const char* name = by_attribute ? (keep ? "selectattr" : "rejectattr") : (keep ? "select" : "reject");
  if (!args.keyword.empty()) throw EvalError(std::string(name) + "(): keyword arguments are not supported");
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) throw EvalError(std::string(name) + "(): an attribute is required");
    attribute = args.positional[next++];
  }
  TestFn test = nullptr;
  if (next < args.positional.size()) {
    const std::string test_name = require_string(args.positional[next++], "test name");
    test = find_test(test_name);
    if (!test) throw EvalError("no test named '" + test_name + "'");
  }
  std::vector<Value> out;
  for (const Value& item : iterate(in)) {
    const Value subject = by_attribute ? get_path(item, attribute) : item;
    bool passed;
    if (test) {
      CallArgs test_args{
          std::vector<Value>(args.positional.begin() + std::ptrdiff_t(next), args.positional.end()), {}};
      passed = test(subject, test_args);
    } else {
      passed = truthy(subject);
    }
    if (passed == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value filter_select(const Value& in, CallArgs& args) {
  return select_items(in, args, true, false);
}
Value filter_reject(const Value& in, CallArgs& args) {
  return select_items(in, args, false, false);
}
Value filter_selectattr(const Value& in, CallArgs& args) {
  return select_items(in, args, true, true);
}
Value filter_rejectattr(const Value& in, CallArgs& args) {
  return select_items(in, args, false, true);
}

Value filter_replace(const Value& in, CallArgs& args) {
  auto a = bind_args("replace", args, {"old", "new", "count"});
  return Value::string(
      python_replace(to_str(in), to_str(a[0]), to_str(a[1]),
                     a[2].is_undefined() || a[2].is_none() ? -1 : require_int(a[2], "count")));
}

Value filter_reverse(const Value& in, CallArgs& args) {
  bind_args("reverse", args, {});
  if (in.is_string()) {
    auto cps = decode_utf8(in.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(encode_utf8(cps));
  }
  std::vector<Value> items = iterate(in);
  std::reverse(items.begin(), items.end());
  return Value::generator(std::move(items));  // reversed(): an iterator
}

Value filter_round(const Value& in, CallArgs& args) {
  auto a = bind_args("round", args, {"precision", "method"});
  const int64_t precision = a[0].is_undefined() ? 0 : require_int(a[0], "precision");
  const std::string method = a[1].is_undefined() ? "common" : require_string(a[1], "method");
  if (!in.is_number()) throw EvalError("round: a number is required, not " + type_name(in));
  if (method == "common" && !in.is_float()) {
    // Python's round() of an int stays an int; a negative precision rounds to tens, hundreds... half to even.
    if (precision >= 0) return Value::integer(in.int_value());
    if (precision < -18) return Value::integer(0);
    int64_t unit = 1;
    for (int64_t i = 0; i < -precision; ++i) unit *= 10;
    const int64_t x = in.int_value();
    int64_t q = x / unit, r = x % unit;
    if (r < 0) {
      r += unit;
      --q;
    }
    if (2 * r > unit || (2 * r == unit && q % 2 != 0)) ++q;
    return Value::integer(q * unit);
  }
  const double scale = std::pow(10.0, double(precision));
  const double x = in.float_value() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // round half to even, as Python's round()
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    throw EvalError("method must be common, ceil or floor");
  }
  return Value::number(r / scale);
}

Value filter_safe(const Value& in, CallArgs& args) {
  bind_args("safe", args, {});
  return in;
}

Value filter_sort(const Value& in, CallArgs& args) {
  auto a = bind_args("sort", args, {"reverse", "case_sensitive", "attribute"});
  std::vector<Value> items = iterate(in);
  const bool reverse = truthy(a[0]), case_sensitive = truthy(a[1]);
  auto key = [&](const Value& v) {
    return sort_key(a[2].is_undefined() ? v : get_path(v, a[2]), case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
  });
  return Value::list(std::move(items));
}

Value filter_string(const Value& in, CallArgs& args) {
  bind_args("string", args, {});
  return Value::string(to_str(in));
}

Value filter_sum(const Value& in, CallArgs& args) {
  auto a = bind_args("sum", args, {"attribute", "start"});
  Value total = a[1].is_undefined() ? Value::integer(0) : a[1];
  for (const Value& item : iterate(in))
    total = binary_op("+", total, a[0].is_undefined() ? item : get_path(item, a[0]));
  return total;
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value filter_tojson(const Value& in, CallArgs& args) {
  auto a = bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  if (truthy(a[0])) throw EvalError("tojson(ensure_ascii=True) is not supported by this interpreter");
  JsonFormat format;
  if (!a[1].is_undefined() && !a[1].is_none()) {
    format.use_indent = true;
    format.indent = a[1].is_string()
                        ? a[1].as_string()
                        : std::string(size_t(std::max<int64_t>(0, require_int(a[1], "indent"))), ' ');
    format.item_separator = ",";  // json.dumps drops the space before a newline when indenting
  }
  if (!a[2].is_undefined() && !a[2].is_none()) {
    if (!a[2].is_list() || a[2].items().size() != 2)
      throw EvalError("tojson: separators must be a pair of strings");
    format.item_separator = require_string(a[2].items()[0], "separator");
    format.key_separator = require_string(a[2].items()[1], "separator");
  }
  format.sort_keys = truthy(a[3]);
  return Value::string(to_python_json(in, format));
}

Value filter_trim(const Value& in, CallArgs& args) {
  auto a = bind_args("trim", args, {"chars"});
  return Value::string(python_strip(to_str(in), a[0], true, true));
}

Value filter_unique(const Value& in, CallArgs& args) {
  auto a = bind_args("unique", args, {"case_sensitive", "attribute"});
  std::vector<Value> out, seen;
  for (const Value& item : iterate(in)) {
    const Value key = sort_key(a[1].is_undefined() ? item : get_path(item, a[1]), truthy(a[0]));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value filter_format(const Value& in, CallArgs& args) {
  if (!args.keyword.empty())
    throw EvalError("format(): keyword arguments are not supported by this interpreter");
  return Value::string(percent_format(to_str(in), Value::tuple(args.positional)));
}

Value filter_attr(const Value& in, CallArgs& args) {
  auto a = bind_args("attr", args, {"name"});
  return get_attribute(in, require_string(a[0], "attribute name"));
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs", filter_abs},
      {"attr", filter_attr},
      {"capitalize", filter_capitalize},
      {"count", filter_length},
      {"d", filter_default},
      {"default", filter_default},
      {"dictsort", filter_dictsort},
      {"e", filter_escape},
      {"escape", filter_escape},
      {"first", filter_first},
      {"float", filter_float},
      {"format", filter_format},
      {"indent", filter_indent},
      {"int", filter_int},
      {"items", filter_items},
      {"join", filter_join},
      {"last", filter_last},
      {"length", filter_length},
      {"list", filter_list},
      {"lower", filter_lower},
      {"map", filter_map},
      {"max", filter_max},
      {"min", filter_min},
      {"reject", filter_reject},
      {"rejectattr", filter_rejectattr},
      {"replace", filter_replace},
      {"reverse", filter_reverse},
      {"round", filter_round},
      {"safe", filter_safe},
      {"select", filter_select},
      {"selectattr", filter_selectattr},
      {"sort", filter_sort},
      {"string", filter_string},
      {"sum", filter_sum},
      {"title", filter_title},
      {"tojson", filter_tojson},
      {"trim", filter_trim},
      {"unique", filter_unique},
      {"upper", filter_upper},
  };
  return table;
}

// ---- Tests
// ---------------------------------------------------------------------------------------------------------
Value one_arg(std::string_view test, CallArgs& args) {
  return bind_args(test, args, {"other"})[0];
}
void no_args(std::string_view test, CallArgs& args) {
  bind_args(test, args, {});
}

bool test_defined(const Value& v, CallArgs& a) {
  return no_args("defined", a), !v.is_undefined();
}
bool test_undefined(const Value& v, CallArgs& a) {
  return no_args("undefined", a), v.is_undefined();
}
bool test_none(const Value& v, CallArgs& a) {
  return no_args("none", a), v.is_none();
}
bool test_boolean(const Value& v, CallArgs& a) {
  return no_args("boolean", a), v.is_bool();
}
bool test_true(const Value& v, CallArgs& a) {
  return no_args("true", a), v.is_bool() && v.as_bool();
}
bool test_false(const Value& v, CallArgs& a) {
  return no_args("false", a), v.is_bool() && !v.as_bool();
}
bool test_integer(const Value& v, CallArgs& a) {
  return no_args("integer", a), v.is_int();
}
bool test_float(const Value& v, CallArgs& a) {
  return no_args("float", a), v.is_float();
}
bool test_number(const Value& v, CallArgs& a) {
  return no_args("number", a), v.is_number();
}
bool test_string(const Value& v, CallArgs& a) {
  return no_args("string", a), v.is_string();
}
bool test_mapping(const Value& v, CallArgs& a) {
  return no_args("mapping", a), v.is_dict() && !v.is_namespace();
}
bool test_callable(const Value& v, CallArgs& a) {
  return no_args("callable", a), v.is_callable();
}
bool test_escaped(const Value&, CallArgs& a) {
  return no_args("escaped", a), false;
}
// Python's iter() and len()+__getitem__ checks; jinja's Undefined passes both.
bool test_iterable(const Value& v, CallArgs& a) {
  no_args("iterable", a);
  return v.is_undefined() || v.is_list() || v.is_string() || (v.is_dict() && !v.is_namespace());
}
bool test_sequence(const Value& v, CallArgs& a) {
  no_args("sequence", a);
  return v.is_undefined() || (v.is_list() && !v.is_generator()) || v.is_string() ||
         (v.is_dict() && !v.is_namespace());
}
// Python's `is`: identity for containers, value and type for the immutable scalars (None, True, False, small
// ints).
bool test_sameas(const Value& v, CallArgs& a) {
  const Value other = one_arg("sameas", a);
  if (v.kind() != other.kind()) return false;
  if (v.is_list()) return &v.items() == &other.items();
  if (v.is_dict()) return &v.as_dict() == &other.as_dict();
  return equals(v, other);
}
bool test_eq(const Value& v, CallArgs& a) {
  return equals(v, one_arg("eq", a));
}
bool test_ne(const Value& v, CallArgs& a) {
  return !equals(v, one_arg("ne", a));
}
bool test_lt(const Value& v, CallArgs& a) {
  return compare(v, one_arg("lt", a)) < 0;
}
bool test_le(const Value& v, CallArgs& a) {
  return compare(v, one_arg("le", a)) <= 0;
}
bool test_gt(const Value& v, CallArgs& a) {
  return compare(v, one_arg("gt", a)) > 0;
}
bool test_ge(const Value& v, CallArgs& a) {
  return compare(v, one_arg("ge", a)) >= 0;
}
bool test_in(const Value& v, CallArgs& a) {
  return contains(one_arg("in", a), v);
}
// jinja: value % 2 == 1 (a float such as 1.5 is neither odd nor even).
bool test_odd(const Value& v, CallArgs& a) {
  no_args("odd", a);
  return equals(binary_op("%", v, Value::integer(2)), Value::integer(1));
}
bool test_even(const Value& v, CallArgs& a) {
  no_args("even", a);
  return equals(binary_op("%", v, Value::integer(2)), Value::integer(0));
}
bool test_divisibleby(const Value& v, CallArgs& a) {
  const Value num = one_arg("divisibleby", a);
  return equals(binary_op("%", v, num), Value::integer(0));
}
bool test_lower(const Value& v, CallArgs& a) {
  no_args("lower", a);
  CallArgs none;
  return truthy(call_str_method(to_str(v), "islower", none));
}
bool test_upper(const Value& v, CallArgs& a) {
  no_args("upper", a);
  CallArgs none;
  return truthy(call_str_method(to_str(v), "isupper", none));
}
bool test_filter(const Value& v, CallArgs& a) {
  return no_args("filter", a), v.is_string() && find_filter(v.as_string());
}
bool test_test(const Value& v, CallArgs& a) {
  return no_args("test", a), v.is_string() && find_test(v.as_string());
}

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"!=", test_ne},
      {"<", test_lt},
      {"<=", test_le},
      {"==", test_eq},
      {">", test_gt},
      {">=", test_ge},
      {"boolean", test_boolean},
      {"callable", test_callable},
      {"defined", test_defined},
      {"divisibleby", test_divisibleby},
      {"eq", test_eq},
      {"equalto", test_eq},
      {"escaped", test_escaped},
      {"even", test_even},
      {"false", test_false},
      {"filter", test_filter},
      {"float", test_float},
      {"ge", test_ge},
      {"greaterthan", test_gt},
      {"gt", test_gt},
      {"in", test_in},
      {"integer", test_integer},
      {"iterable", test_iterable},
      {"le", test_le},
      {"lessthan", test_lt},
      {"lower", test_lower},
      {"lt", test_lt},
      {"mapping", test_mapping},
      {"ne", test_ne},
      {"none", test_none},
      {"number", test_number},
      {"odd", test_odd},
      {"sameas", test_sameas},
      {"sequence", test_sequence},
      {"string", test_string},
      {"test", test_test},
      {"true", test_true},
      {"undefined", test_undefined},
      {"upper", test_upper},
  };
  return table;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

TestFn find_test(std::string_view name) {
  auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

// ---- Globals
// -------------------------------------------------------------------------------------------------------
Dict make_globals(int64_t max_range) {
  Dict globals;
  globals.set(
      "range", Value::function("range", [max_range](CallArgs& args) {
        if (!args.keyword.empty()) throw EvalError("range() takes no keyword arguments");
        const auto& p = args.positional;
        if (p.empty() || p.size() > 3) throw EvalError("range expected 1 to 3 arguments");
        int64_t start = 0, stop, step = 1;
        if (p.size() == 1) {
          stop = require_int(p[0], "range() argument");
        } else {
          start = require_int(p[0], "range() argument");
          stop = require_int(p[1], "range() argument");
          if (p.size() == 3) step = require_int(p[2], "range() argument");
        }
        if (step == 0) throw EvalError("range() arg 3 must not be zero");
        // The length first (in unsigned arithmetic, which cannot overflow here), so a huge range fails before
        // allocating anything.
        uint64_t length = 0;
        if (step > 0 && start < stop) length = (uint64_t(stop) - uint64_t(start) - 1) / uint64_t(step) + 1;
        if (step < 0 && start > stop)
          length = (uint64_t(start) - uint64_t(stop) - 1) / (uint64_t(0) - uint64_t(step)) + 1;
        if (length > uint64_t(max_range))
          throw EvalError("range() is longer than the limit of " + std::to_string(max_range) + " items");
        std::vector<Value> out;
        out.reserve(size_t(length));
        for (uint64_t k = 0; k < length; ++k)
          out.push_back(Value::integer(int64_t(uint64_t(start) + k * uint64_t(step))));
        return Value::list(std::move(out));
      }));
  auto keyword_dict = [](const char* name, CallArgs& args) {
    Dict d;
    if (args.positional.size() > 1)
      throw EvalError(std::string(name) + "() takes at most one positional argument");
    if (!args.positional.empty()) {
      const Value& initial = args.positional[0];
      if (!initial.is_dict() || initial.is_namespace())
        throw EvalError(std::string(name) + "(): the positional argument must be a mapping");
      d = initial.as_dict();
    }
    for (auto& [key, value] : args.keyword) d.set(key, value);
    return d;
  };
  globals.set("namespace", Value::function("namespace", [keyword_dict](CallArgs& args) {
                return Value::namespace_object(keyword_dict("namespace", args));
              }));
  globals.set("dict", Value::function("dict", [keyword_dict](CallArgs& args) {
                return Value::dict(keyword_dict("dict", args));
              }));
  globals.set("raise_exception", Value::function("raise_exception", [](CallArgs& args) -> Value {
                auto a = bind_args("raise_exception", args, {"message"});
                throw TemplateRaisedError(to_str(a[0]));
              }));
  globals.set("strftime_now", Value::function("strftime_now", [](CallArgs& args) {
                auto a = bind_args("strftime_now", args, {"format"});
                const std::string& format = require_string(a[0], "strftime_now() format");
                const std::time_t now = std::time(nullptr);
                std::tm local{};
                localtime_r(&now, &local);
                char buf[512];
                const size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &local);
                if (n == 0 && !format.empty())
                  throw EvalError("strftime_now(): the formatted date is empty or too long");
                return Value::string(std::string(buf, n));
              }));
  return globals;
}

}  // namespace qwen3::jinja
