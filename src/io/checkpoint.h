// A Hugging Face checkpoint directory: config.json, generation_config.json (optional), and model.safetensors or
// shards listed in model.safetensors.index.json. Nothing here knows about GPUs or about which tensors a model needs.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/tensor.h"
#include "io/safetensors.h"

namespace qwen3 {

class Checkpoint {
 public:
  // Throws FormatError when a file is missing, malformed, or the shards disagree with the index.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const GenerationConfig& generation() const { return generation_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;
  uint64_t file_bytes() const { return file_bytes_; }
  size_t shard_count() const { return files_.size(); }

  // eos ids to stop on: generation_config.json's list when it has one, else config.json's.
  std::vector<int64_t> eos_token_ids() const;

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  GenerationConfig generation_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> tensors_;
  uint64_t file_bytes_ = 0;
};

}  // namespace qwen3
