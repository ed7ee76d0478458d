// qwen3 tokenize   (--model DIR | --tokenizer FILE) ("TEXT" | --text-file FILE | --batch-json FILE)
// qwen3 detokenize (--model DIR | --tokenizer FILE) (--ids 1,2,3 | --batch-json FILE) [--skip-special-tokens]
// Text <-> token ids with the checkpoint's tokenizer.json, exactly as Hugging Face tokenizers would. stdout
// carries only the JSON result: tokenize prints an id array (or an array of them for a batch), detokenize a
// string (or an array of strings).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.h"
#include "core/error.h"
#include "text/tokenizer.h"

namespace qwen3::cli {
namespace {

struct TokenizerSource {
  std::string model_dir;
  std::string tokenizer_file;
};

void add_tokenizer_source(CLI::App& cmd, TokenizerSource& source) {
  auto* model = cmd.add_option("--model,-m", source.model_dir, "Checkpoint directory holding tokenizer.json");
  auto* file = cmd.add_option("--tokenizer", source.tokenizer_file, "A tokenizer.json file");
  model->excludes(file);
  file->excludes(model);
}

Tokenizer load_tokenizer(const TokenizerSource& source) {
  if (!source.tokenizer_file.empty()) return Tokenizer::from_file(source.tokenizer_file);
  if (!source.model_dir.empty()) return Tokenizer::from_model_dir(source.model_dir);
  throw InputError("give the tokenizer with --model DIR or --tokenizer FILE");
}

std::string read_input_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

nlohmann::json read_json_file(const std::string& path) {
  try {
    return nlohmann::json::parse(read_input_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": invalid JSON: " + e.what());
  }
}

std::vector<int32_t> ids_of(const nlohmann::json& array, const std::string& where) {
  if (!array.is_array()) throw InputError(where + " is not an array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (const auto& value : array) {
    if (!value.is_number_integer()) throw InputError(where + " holds " + value.dump() + ", not a token id");
    const int64_t id = value.get<int64_t>();
    if (id < INT32_MIN || id > INT32_MAX)
      throw InputError("token id " + std::to_string(id) + " is out of range");
    ids.push_back(int32_t(id));
  }
  return ids;
}

void print(const nlohmann::json& result) {
  std::cout << result.dump() << "\n";
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("tokenize", "Text to token ids (a JSON array), as Hugging Face tokenizers would");
  auto source = std::make_shared<TokenizerSource>();
  auto text = std::make_shared<std::string>();
  auto text_file = std::make_shared<std::string>();
  auto batch_file = std::make_shared<std::string>();
  add_tokenizer_source(*cmd, *source);
  auto* text_option = cmd->add_option("text", *text, "The text to encode");
  auto* file_option = cmd->add_option("--text-file", *text_file, "Encode the bytes of this file");
  auto* batch_option =
      cmd->add_option("--batch-json", *batch_file, "A JSON array of strings; prints an array of id arrays");
  text_option->excludes(file_option)->excludes(batch_option);
  file_option->excludes(batch_option);
  cmd->callback([source, text, text_option, text_file, batch_file] {
    if (text_option->count() == 0 && text_file->empty() && batch_file->empty())
      throw InputError("tokenize: give the text, --text-file FILE or --batch-json FILE");
    const Tokenizer tokenizer = load_tokenizer(*source);
    if (!batch_file->empty()) {
      const nlohmann::json batch = read_json_file(*batch_file);
      if (!batch.is_array()) throw InputError(*batch_file + " is not a JSON array of strings");
      nlohmann::json result = nlohmann::json::array();
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!batch[i].is_string())
          throw InputError(*batch_file + ": element " + std::to_string(i) + " is not a string");
        result.push_back(tokenizer.encode(batch[i].get_ref<const std::string&>()));
      }
      print(result);
      return;
    }
    if (!text_file->empty()) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(*text_file, ec);
      if (!ec && size > Tokenizer::kMaxTextBytes)
        throw InputError(*text_file + " holds " + std::to_string(size) +
                         " bytes, over the tokenizer's limit of " + std::to_string(Tokenizer::kMaxTextBytes));
    }
    print(tokenizer.encode(text_file->empty() ? *text : read_input_file(*text_file)));
  });
}

void register_detokenize(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("detokenize", "Token ids to text (a JSON string), as Hugging Face tokenizers would");
  auto source = std::make_shared<TokenizerSource>();
  auto ids_text = std::make_shared<std::string>();
  auto batch_file = std::make_shared<std::string>();
  auto skip_special = std::make_shared<bool>(false);
  add_tokenizer_source(*cmd, *source);
  auto* ids_option = cmd->add_option("--ids", *ids_text, "Token ids, comma separated");
  auto* batch_option =
      cmd->add_option("--batch-json", *batch_file, "A JSON array of id arrays; prints an array of strings");
  ids_option->excludes(batch_option);
  cmd->add_flag("--skip-special-tokens", *skip_special, "Leave out special tokens (<|im_end|> ...)");
  cmd->callback([source, ids_text, batch_file, skip_special] {
    if (ids_text->empty() && batch_file->empty())
      throw InputError("detokenize: give --ids 1,2,3 or --batch-json FILE");
    const Tokenizer tokenizer = load_tokenizer(*source);
    if (!batch_file->empty()) {
      const nlohmann::json batch = read_json_file(*batch_file);
      if (!batch.is_array()) throw InputError(*batch_file + " is not a JSON array of id arrays");
      nlohmann::json result = nlohmann::json::array();
      for (size_t i = 0; i < batch.size(); ++i)
        result.push_back(tokenizer.decode(ids_of(batch[i], *batch_file + ": element " + std::to_string(i)),
                                          *skip_special));
      print(result);
      return;
    }
    print(tokenizer.decode(parse_id_list(*ids_text), *skip_special));
  });
}

}  // namespace qwen3::cli
