// The chat template a checkpoint ships (tokenizer_config.json's Jinja `chat_template`), rendered as Hugging
// Face transformers' `tokenizer.apply_chat_template(messages, tools=..., tokenize=False,
// add_generation_prompt=...,
// **chat_template_kwargs)` renders it: byte for byte (tests/data/chat-template holds the evidence for Qwen3).
//
// JSON inputs are nlohmann::ordered_json on purpose: Python dicts keep insertion order and `tojson` prints
// tool schemas in that order, so a std::map-ordered json would change the prompt.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja.h"

namespace qwen3 {

struct ChatTemplateOptions {
  // null: no tools (the template sees `tools` = None); else an array of tool definitions (JSON schemas), e.g.
  // [{"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}].
  nlohmann::ordered_json tools = nullptr;
  // Append the assistant header so the model writes the reply (false to render a finished conversation).
  bool add_generation_prompt = true;
  // Extra template variables: the OpenAI `chat_template_kwargs`, e.g. {"enable_thinking": false}. They
  // override the special tokens and anything else of the same name, as in transformers.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // `chat_template` of a parsed tokenizer_config.json (a string, or a list of {"name", "template"}, from
  // which "default" is used, or "tool_use" when tools are given). Throws FormatError when there is none or it
  // does not parse.
  static ChatTemplate from_tokenizer_config(const nlohmann::ordered_json& tokenizer_config);
  static ChatTemplate from_tokenizer_config_file(const std::filesystem::path& path);
  // DIR/tokenizer_config.json, with DIR/chat_template.jinja taking precedence when present (newer checkpoints
  // keep the template in that file).
  static ChatTemplate from_model_dir(const std::filesystem::path& dir);
  // A template given directly, with the special tokens it may refer to ({"eos_token": "<|im_end|>", ...}).
  ChatTemplate(const std::string& source, std::map<std::string, std::string> special_tokens);

  // The prompt for `messages` (an array of {"role", "content", ...} in OpenAI chat format; assistant messages
  // may carry "reasoning_content" and "tool_calls", tool results use role "tool"). Throws InputError for
  // malformed input, jinja::TemplateRaisedError when the template rejects the conversation,
  // jinja::TemplateError when the template fails. `limits` bounds the work and the output size.
  std::string render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options = {},
                     const jinja::RenderLimits& limits = {}) const;

  const std::string& source() const { return default_source_; }
  // The named special tokens of tokenizer_config.json as strings (bos_token, eos_token, unk_token, sep_token,
  // pad_token, cls_token, mask_token; absent ones are left out), the variables the template sees.
  const std::map<std::string, std::string>& special_tokens() const { return special_tokens_; }
  std::optional<std::string> bos_token() const { return token("bos_token"); }
  std::optional<std::string> eos_token() const { return token("eos_token"); }

 private:
  ChatTemplate() = default;
  std::optional<std::string> token(const std::string& name) const;

  std::string default_source_;
  std::shared_ptr<const jinja::Template> default_template_;
  std::shared_ptr<const jinja::Template> tool_use_template_;  // null unless the config names one
  std::map<std::string, std::string> special_tokens_;
};

// OpenAI-style messages in the shape chat templates expect (a copy; the input is untouched): content given as
// an array of parts becomes its text parts joined by newlines (as vLLM does), and a null content (an
// assistant turn that only calls tools) becomes "". transformers does neither (Qwen3's template fails on a
// null content), so the server calls this before render(); the parity tests do not.
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

// Whether a rendered prompt leaves the model inside a reasoning block (the template wrote "<think>" and no
// "</think>" after it, as Qwen3 thinking-only models do): then the reply starts with reasoning and has no
// <think>.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace qwen3
