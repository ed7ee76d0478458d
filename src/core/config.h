// Model and generation configuration, parsed once from a Hugging Face checkpoint's config.json and
// generation_config.json (both dialects: the 4.51-era files Qwen published and what transformers 5.x writes).
// Everything downstream trusts these values: parse_* validates ranges and refuses what the engine cannot run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

// How rotary frequencies are derived. "default": inv_freq[i] = theta^(-2i/head_dim). "linear": positions divided by
// factor. "yarn": NTK-by-parts interpolation plus a cos/sin scale (attention_factor), as transformers computes it.
struct RopeConfig {
  std::string type = "default";
  double theta = 10000.0;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> attention_factor;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  bool truncate = true;
};

struct ModelConfig {
  std::string architecture;  // "Qwen3ForCausalLM"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // key/value heads (GQA)
  int64_t head_dim = 0;      // explicit in Qwen3; num_heads * head_dim need not equal hidden_size
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  std::string dtype;  // "bfloat16", "float16", "float32" as declared (informational; tensors carry their own)
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // from config.json; generation_config.json's list takes precedence

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t gqa_group() const { return num_heads / num_kv_heads; }

  // Parameters of the transformer (embeddings counted once when tied).
  int64_t parameter_count() const;
  // Parameters a decode step reads: all layers, the final norm and lm_head (the embedding is only gathered).
  int64_t decode_parameter_count() const;
};

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
};

// Throws FormatError with a message naming the field on anything malformed, out of range or unsupported.
ModelConfig parse_model_config(std::string_view json_text);
GenerationConfig parse_generation_config(std::string_view json_text);

ModelConfig load_model_config(const std::filesystem::path& config_json);
// A missing generation_config.json is not an error (transformers 5.x may not write one): returns defaults.
GenerationConfig load_generation_config(const std::filesystem::path& generation_config_json);

// Reads a whole (small) text file; refuses files over max_bytes so a hostile path cannot exhaust memory.
std::string read_text_file(const std::filesystem::path& path, size_t max_bytes = 64u << 20);

}  // namespace qwen3
