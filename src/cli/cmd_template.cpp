// qwen3 template (--model DIR | --tokenizer-config FILE) --messages FILE [--tools FILE] [--no-think]
//                [--no-generation-prompt] [--kwargs JSON]
// Prints the checkpoint's chat template rendered for a conversation, exactly and nothing else (no newline
// added): the text the model reads. FILE holds a JSON array of messages, or an OpenAI request body whose
// "messages", "tools" and "chat_template_kwargs" are used; "-" reads stdin.
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.h"
#include "core/error.h"
#include "text/chat_template.h"

namespace qwen3::cli {
namespace {

struct TemplateFlags {
  std::string model_dir;
  std::string tokenizer_config;
  std::string messages_file;
  std::string tools_file;
  std::string kwargs_json;
  bool no_think = false;
  bool no_generation_prompt = false;
};

nlohmann::ordered_json read_json_input(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot open " + path);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    text = std::move(buffer).str();
  }
  try {
    return nlohmann::ordered_json::parse(text);  // ordered: tojson must keep the file's key order
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": invalid JSON: " + e.what());
  }
}

}  // namespace

void register_template(CLI::App& app) {
  auto* cmd = app.add_subcommand("template",
                                 "Print the chat template rendered for a conversation (the exact prompt)");
  auto flags = std::make_shared<TemplateFlags>();
  auto* model = cmd->add_option("--model,-m", flags->model_dir,
                                "Checkpoint directory (tokenizer_config.json, or chat_template.jinja)");
  auto* config =
      cmd->add_option("--tokenizer-config", flags->tokenizer_config, "A tokenizer_config.json file");
  model->excludes(config);
  config->excludes(model);
  cmd->add_option(
         "--messages", flags->messages_file,
         "JSON file: an array of {role, content, ...} messages, or an OpenAI request body; - for stdin")
      ->required();
  cmd->add_option("--tools", flags->tools_file, "JSON file: an array of tool definitions");
  cmd->add_flag("--no-think", flags->no_think, "Render with enable_thinking=false");
  cmd->add_flag("--no-generation-prompt", flags->no_generation_prompt,
                "Do not append the assistant header (render a finished conversation)");
  cmd->add_option("--kwargs", flags->kwargs_json,
                  "Extra template variables as a JSON object, e.g. '{\"x\": 1}'");
  cmd->callback([flags] {
    if (flags->model_dir.empty() && flags->tokenizer_config.empty())
      throw InputError("give the template with --model DIR or --tokenizer-config FILE");
    const ChatTemplate chat_template = flags->model_dir.empty()
                                           ? ChatTemplate::from_tokenizer_config_file(flags->tokenizer_config)
                                           : ChatTemplate::from_model_dir(flags->model_dir);

    ChatTemplateOptions options;
    options.add_generation_prompt = !flags->no_generation_prompt;
    nlohmann::ordered_json input = read_json_input(flags->messages_file);
    nlohmann::ordered_json messages;
    if (input.is_object()) {
      if (!input.contains("messages"))
        throw InputError(flags->messages_file + ": no \"messages\" in the object");
      messages = input["messages"];
      if (input.contains("tools") && !input["tools"].is_null()) options.tools = input["tools"];
      if (input.contains("chat_template_kwargs")) {
        if (!input["chat_template_kwargs"].is_object())
          throw InputError(flags->messages_file + ": chat_template_kwargs must be an object");
        options.kwargs = input["chat_template_kwargs"];
      }
    } else {
      messages = std::move(input);
    }
    if (!flags->tools_file.empty()) options.tools = read_json_input(flags->tools_file);
    if (!flags->kwargs_json.empty()) {
      const auto extra =
          nlohmann::ordered_json::parse(flags->kwargs_json, nullptr, /*allow_exceptions=*/false);
      if (extra.is_discarded() || !extra.is_object()) throw InputError("--kwargs must be a JSON object");
      for (const auto& [name, value] : extra.items()) options.kwargs[name] = value;
    }
    if (flags->no_think) options.kwargs["enable_thinking"] = false;

    // As the server will: content parts joined, a null content read as "".
    const std::string prompt = chat_template.render(normalize_chat_messages(messages), options);
    std::cout.write(prompt.data(), std::streamsize(prompt.size()));
    std::cout.flush();
  });
}

}  // namespace qwen3::cli
