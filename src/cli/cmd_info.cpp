// qwen3 info --model DIR [--json]: what a checkpoint is and what a decode step costs, without running it.
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "model/qwen3_weights.h"

namespace qwen3::cli {

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a checkpoint: architecture, sizes, parameters, bytes per token");
  auto model_dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("--model,-m", *model_dir, "Hugging Face checkpoint directory")->required();
  cmd->add_flag("--json", *as_json, "Print one JSON object");
  cmd->callback([model_dir, as_json] {
    auto checkpoint = Checkpoint::open(*model_dir);
    const Qwen3Weights weights = bind_qwen3_weights(*checkpoint);  // validates every tensor
    const ModelConfig& c = checkpoint->config();

    std::map<std::string, int64_t> params_by_dtype;
    int64_t decode_weight_bytes = 0;
    for (const TensorSpec& spec : expected_qwen3_tensors(c)) {
      const TensorView* t = checkpoint->find(spec.name);
      params_by_dtype[std::string(dtype_name(t->dtype))] += t->numel();
      if (spec.name != "model.embed_tokens.weight") decode_weight_bytes += int64_t(t->nbytes);
    }
    if (c.tie_word_embeddings) decode_weight_bytes += int64_t(weights.lm_head.nbytes);  // lm_head reads the table
    const int64_t kv_bytes_per_position = 2 * c.num_layers * c.kv_dim() * 2;  // K and V, bf16 cache

    nlohmann::ordered_json j;
    j["architecture"] = c.architecture;
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["num_layers"] = c.num_layers;
    j["num_heads"] = c.num_heads;
    j["num_kv_heads"] = c.num_kv_heads;
    j["head_dim"] = c.head_dim;
    j["vocab_size"] = c.vocab_size;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["rope_type"] = c.rope.type;
    j["rope_theta"] = c.rope.theta;
    j["parameters"] = c.parameter_count();
    j["parameters_by_dtype"] = params_by_dtype;
    j["decode_weight_bytes_per_token"] = decode_weight_bytes;
    j["kv_cache_bytes_per_position_bf16"] = kv_bytes_per_position;
    j["eos_token_ids"] = checkpoint->eos_token_ids();
    j["checkpoint_files"] = checkpoint->shard_count();
    j["checkpoint_bytes"] = checkpoint->file_bytes();
    if (*as_json) {
      std::cout << j.dump() << "\n";
      return;
    }
    for (const auto& [key, value] : j.items()) std::cout << key << ": " << value.dump() << "\n";
  });
}

}  // namespace qwen3::cli
