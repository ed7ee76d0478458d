// A small Jinja interpreter for chat templates: what Hugging Face transformers' `apply_chat_template`
// renders, byte for byte, for the templates Qwen models ship (and the common constructs of others).
// Environment as transformers sets it: trim_blocks, lstrip_blocks, loop controls, `tojson` =
// json.dumps(ensure_ascii=False), `raise_exception`, `strftime_now`. No autoescaping, no file access, no
// attribute access beyond Python's str/dict/list methods.
//
// A construct it does not implement is an error at parse time (or, for a method or filter argument, when it
// is reached), never a silently different prompt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace qwen3::jinja {

// A template that does not parse, uses something unsupported, or fails while rendering (a Python TypeError,
// an undefined value used). The message starts with "chat template line N:".
class TemplateError : public FormatError {
 public:
  using FormatError::FormatError;
};

// The template called raise_exception(message): it rejects its input (roles out of order, a missing
// field...). The message is the template's own.
class TemplateRaisedError : public InputError {
 public:
  using InputError::InputError;
};

// Bounds on one render, so a hostile template or conversation cannot take the process down.
struct RenderLimits {
  size_t max_output_bytes = size_t(64) << 20;  // InputError beyond it
  int max_call_depth = 64;                     // macro recursion
  int64_t max_loop_iterations = 10'000'000;    // over the whole render
};

struct Program;

class Template {
 public:
  // Parses; throws TemplateError.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the top-level variables of `context` (a JSON object; key order is kept, as Python dicts keep
  // it). A JSON null is Python's None (`x is none`, `x is defined`); an absent key is undefined.
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

// json.dumps(value, ensure_ascii=False): the text transformers' `tojson` prints, e.g. {"a": 1, "b": [true,
// null]}.
std::string python_json_dumps(const nlohmann::ordered_json& value);

}  // namespace qwen3::jinja
