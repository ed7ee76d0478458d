#include "io/checkpoint.h"

#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;

// Shard names come from a file we do not trust: a plain file name only, never a path out of the directory.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<int64_t> Checkpoint::eos_token_ids() const {
  return generation_.eos_token_ids.empty() ? config_.eos_token_ids : generation_.eos_token_ids;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw FormatError("model directory " + dir.string() + " does not exist or is not a directory");
  auto ckpt = std::unique_ptr<Checkpoint>(new Checkpoint());
  ckpt->dir_ = dir;
  if (!std::filesystem::exists(dir / "config.json", ec))
    throw FormatError("no config.json in " + dir.string() + " (expected a Hugging Face checkpoint directory)");
  ckpt->config_ = load_model_config(dir / "config.json");
  ckpt->generation_ = load_generation_config(dir / "generation_config.json");

  const auto index_path = dir / "model.safetensors.index.json";
  const auto single_path = dir / "model.safetensors";
  auto add_file = [&](const std::filesystem::path& path) -> SafetensorsFile& {
    ckpt->files_.push_back(std::make_unique<SafetensorsFile>(path));
    ckpt->file_bytes_ += std::filesystem::file_size(path, ec);
    return *ckpt->files_.back();
  };

  if (std::filesystem::exists(index_path, ec)) {
    const json index = json::parse(read_text_file(index_path), nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object())
      throw FormatError(index_path.string() + " is not a valid JSON object");
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object() || map_it->empty())
      throw FormatError(index_path.string() + " has no weight_map");
    std::map<std::string, std::vector<std::string>> names_by_file;
    for (const auto& [name, file] : map_it->items()) {
      if (!file.is_string() || !is_plain_file_name(file.get<std::string>()))
        throw FormatError(index_path.string() + ": weight_map entry for '" + name +
                          "' must be a plain file name in the model directory");
      names_by_file[file.get<std::string>()].push_back(name);
    }
    for (const auto& [file, names] : names_by_file) {
      const SafetensorsFile& shard = add_file(dir / file);
      for (const auto& name : names) {
        auto it = shard.tensors().find(name);
        if (it == shard.tensors().end())
          throw FormatError(index_path.string() + " maps '" + name + "' to " + file + ", which does not contain it");
        ckpt->tensors_.emplace(name, it->second);
      }
      // A tensor stored in a shard but mapped elsewhere would be ambiguous.
      for (const auto& [name, view] : shard.tensors()) {
        (void)view;
        auto mapped = map_it->find(name);
        if (mapped != map_it->end() && mapped->get<std::string>() != file)
          throw FormatError("tensor '" + name + "' is stored in " + file + " but the index maps it to " +
                            mapped->get<std::string>());
      }
    }
  } else if (std::filesystem::exists(single_path, ec)) {
    const SafetensorsFile& file = add_file(single_path);
    ckpt->tensors_ = file.tensors();
  } else {
    throw FormatError("no model.safetensors or model.safetensors.index.json in " + dir.string());
  }
  return ckpt;
}

}  // namespace qwen3
