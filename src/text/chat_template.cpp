#include "text/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace qwen3 {
namespace {

// transformers' SPECIAL_TOKENS_ATTRIBUTES: the tokens apply_chat_template passes to the template as
// variables.
const char* const kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::ordered_json parse_json_file(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path.string() + ": invalid JSON: " + e.what());
  }
}

// A special token is a string or, as saved by older transformers, an AddedToken object {"content": ...}.
std::optional<std::string> special_token_text(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

std::shared_ptr<const jinja::Template> compile(const std::string& source) {
  return std::make_shared<const jinja::Template>(source);
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::map<std::string, std::string> special_tokens)
    : default_source_(source),
      default_template_(compile(source)),
      special_tokens_(std::move(special_tokens)) {}

ChatTemplate ChatTemplate::from_tokenizer_config(const nlohmann::ordered_json& config) {
  if (!config.is_object()) throw FormatError("tokenizer_config.json: not a JSON object");
  ChatTemplate t;
  for (const char* name : kSpecialTokenNames) {
    if (!config.contains(name)) continue;
    if (auto text = special_token_text(config[name])) t.special_tokens_[name] = *text;
  }
  if (!config.contains("chat_template") || config["chat_template"].is_null())
    throw FormatError("tokenizer_config.json has no chat_template");
  const auto& chat_template = config["chat_template"];
  if (chat_template.is_string()) {
    t.default_source_ = chat_template.get<std::string>();
    t.default_template_ = compile(t.default_source_);
    return t;
  }
  if (!chat_template.is_array())
    throw FormatError("tokenizer_config.json: chat_template must be a string or a list");
  for (const auto& entry : chat_template) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string())
      throw FormatError(
          "tokenizer_config.json: each named chat_template needs a string 'name' and 'template'");
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") {
      t.default_source_ = entry["template"].get<std::string>();
      t.default_template_ = compile(t.default_source_);
    } else if (name == "tool_use") {
      t.tool_use_template_ = compile(entry["template"].get<std::string>());
    }
  }
  if (!t.default_template_) {
    if (!t.tool_use_template_) throw FormatError("tokenizer_config.json: no 'default' chat_template");
    // Only a tool template: transformers would refuse a call without tools; keep it as the one template.
    t.default_template_ = t.tool_use_template_;
  }
  return t;
}

ChatTemplate ChatTemplate::from_tokenizer_config_file(const std::filesystem::path& path) {
  return from_tokenizer_config(parse_json_file(path));
}

ChatTemplate ChatTemplate::from_model_dir(const std::filesystem::path& dir) {
  const auto config_path = dir / "tokenizer_config.json";
  const auto jinja_path = dir / "chat_template.jinja";
  nlohmann::ordered_json config =
      std::filesystem::exists(config_path) ? parse_json_file(config_path) : nlohmann::ordered_json::object();
  if (std::filesystem::exists(jinja_path)) config["chat_template"] = read_text_file(jinja_path);
  if (!std::filesystem::exists(config_path) && !std::filesystem::exists(jinja_path))
    throw InputError(dir.string() + " has neither tokenizer_config.json nor chat_template.jinja");
  return from_tokenizer_config(config);
}

std::optional<std::string> ChatTemplate::token(const std::string& name) const {
  auto it = special_tokens_.find(name);
  if (it == special_tokens_.end()) return std::nullopt;
  return it->second;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options,
                                 const jinja::RenderLimits& limits) const {
  if (!messages.is_array()) throw InputError("chat messages must be a JSON array");
  if (messages.empty()) throw InputError("cannot apply the chat template to an empty conversation");
  const bool has_tools = !options.tools.is_null();
  if (has_tools) {
    if (!options.tools.is_array()) throw InputError("tools must be a JSON array of tool definitions");
    for (const auto& tool : options.tools)
      if (!tool.is_object()) throw InputError("each tool must be a JSON object (a JSON schema)");
  }
  if (!options.kwargs.is_object()) throw InputError("chat template kwargs must be a JSON object");

  // The variables transformers passes: special tokens, then messages, tools, documents,
  // add_generation_prompt, then the caller's kwargs (which win).
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  for (const auto& [name, text] : special_tokens_) context[name] = text;
  context["messages"] = messages;
  context["tools"] = options.tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = options.add_generation_prompt;
  for (const auto& [name, value] : options.kwargs.items()) context[name] = value;

  const jinja::Template& chosen = has_tools && tool_use_template_ ? *tool_use_template_ : *default_template_;
  return chosen.render(context, limits);
}

nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages) {
  if (!messages.is_array()) throw InputError("chat messages must be a JSON array");
  nlohmann::ordered_json out = messages;
  for (auto& message : out) {
    if (!message.is_object()) throw InputError("each chat message must be a JSON object");
    if (!message.contains("content")) continue;
    auto& content = message["content"];
    if (content.is_null()) {
      content = "";
    } else if (content.is_array()) {
      std::string text;
      bool first = true;
      for (const auto& part : content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text") {
          throw InputError("only text content parts are supported (got " +
                           (part.is_object() && part.contains("type") ? part["type"].dump() : part.dump()) +
                           ")");
        }
        if (!part.contains("text") || !part["text"].is_string())
          throw InputError("a text content part needs a string 'text'");
        if (!first) text += "\n";  // vLLM joins text parts with a newline
        text += part["text"].get<std::string>();
        first = false;
      }
      content = text;
    }
  }
  return out;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  size_t end = prompt.size();
  while (end > 0 && (prompt[end - 1] == '\n' || prompt[end - 1] == ' ' || prompt[end - 1] == '\r' ||
                     prompt[end - 1] == '\t'))
    --end;
  constexpr std::string_view kOpen = "<think>";
  return end >= kOpen.size() && prompt.substr(end - kOpen.size(), kOpen.size()) == kOpen;
}

}  // namespace qwen3
