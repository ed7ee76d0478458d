#include "core/config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;

json parse_json_object(std::string_view text, std::string_view what) {
  json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) throw FormatError(std::string(what) + " is not valid JSON");
  if (!root.is_object()) throw FormatError(std::string(what) + " must be a JSON object");
  return root;
}

std::optional<int64_t> opt_int(const json& obj, const char* key, int64_t lo, int64_t hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    throw FormatError(std::string("config field '") + key + "' must be an integer");
  // Integers beyond int64 parse as unsigned; treat them as out of range.
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX))
    throw FormatError(std::string("config field '") + key + "' is out of range");
  int64_t value = it->get<int64_t>();
  if (value < lo || value > hi)
    throw FormatError(std::string("config field '") + key + "' = " + std::to_string(value) + " is out of range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return value;
}

int64_t req_int(const json& obj, const char* key, int64_t lo, int64_t hi) {
  auto value = opt_int(obj, key, lo, hi);
  if (!value) throw FormatError(std::string("config.json is missing '") + key + "'");
  return *value;
}

std::optional<double> opt_number(const json& obj, const char* key, double lo, double hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw FormatError(std::string("config field '") + key + "' must be a number");
  double value = it->get<double>();
  if (!std::isfinite(value) || value < lo || value > hi)
    throw FormatError(std::string("config field '") + key + "' = " + it->dump() + " is out of range");
  return value;
}

std::optional<bool> opt_bool(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) throw FormatError(std::string("config field '") + key + "' must be true or false");
  return it->get<bool>();
}

std::optional<std::string> opt_string(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw FormatError(std::string("config field '") + key + "' must be a string");
  return it->get<std::string>();
}

// eos_token_id may be an integer, a list of integers, or null.
std::vector<int64_t> token_id_list(const json& obj, const char* key) {
  std::vector<int64_t> ids;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return ids;
  auto check = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 31))
      throw FormatError(std::string("config field '") + key + "' must hold non-negative integer token ids");
    ids.push_back(v.get<int64_t>());
  };
  if (it->is_array()) {
    for (const auto& v : *it) check(v);
  } else {
    check(*it);
  }
  return ids;
}

RopeConfig parse_rope(const json& root) {
  RopeConfig rope;
  // transformers 5.x: "rope_parameters": {...}; 4.x: top-level "rope_theta" and "rope_scaling": null | {...}.
  json params = json::object();
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    if (!it->is_object()) throw FormatError(std::string("config field '") + key + "' must be an object or null");
    params = *it;
    break;
  }
  auto theta = opt_number(params, "rope_theta", 1.0, 1e12);
  if (!theta) theta = opt_number(root, "rope_theta", 1.0, 1e12);
  rope.theta = theta.value_or(10000.0);

  auto type = opt_string(params, "rope_type");
  if (!type) type = opt_string(params, "type");
  rope.type = type.value_or("default");
  if (rope.type != "default" && rope.type != "linear" && rope.type != "yarn")
    throw FormatError("unsupported rope type '" + rope.type + "' (supported: default, linear, yarn)");
  if (auto partial = opt_number(params, "partial_rotary_factor", 0.0, 1.0); partial && *partial != 1.0)
    throw FormatError("partial rotary embeddings are not supported for Qwen3");

  if (rope.type != "default") {
    auto factor = opt_number(params, "factor", 1.0, 1e6);
    if (!factor && rope.type == "linear") throw FormatError("rope type 'linear' needs 'factor'");
    rope.factor = factor.value_or(0.0);  // yarn: 0 means max_position_embeddings / original (resolved later)
  }
  if (rope.type == "yarn") {
    rope.original_max_position_embeddings =
        opt_int(params, "original_max_position_embeddings", 1, int64_t(1) << 31).value_or(0);
    rope.attention_factor = opt_number(params, "attention_factor", 0.0, 1e6);
    rope.mscale = opt_number(params, "mscale", 0.0, 1e6);
    rope.mscale_all_dim = opt_number(params, "mscale_all_dim", 0.0, 1e6);
    if (auto v = opt_number(params, "beta_fast", 0.0, 1e6); v && *v != 0) rope.beta_fast = *v;
    if (auto v = opt_number(params, "beta_slow", 0.0, 1e6); v && *v != 0) rope.beta_slow = *v;
    rope.truncate = opt_bool(params, "truncate").value_or(true);
  }
  return rope;
}

}  // namespace

int64_t ModelConfig::parameter_count() const {
  const int64_t per_layer = hidden_size * (q_dim() + 2 * kv_dim()) + q_dim() * hidden_size +
                            3 * hidden_size * intermediate_size + 2 * hidden_size + 2 * head_dim;
  const int64_t embeddings = vocab_size * hidden_size * (tie_word_embeddings ? 1 : 2);
  return num_layers * per_layer + embeddings + hidden_size;
}

int64_t ModelConfig::decode_parameter_count() const {
  const int64_t per_layer = hidden_size * (q_dim() + 2 * kv_dim()) + q_dim() * hidden_size +
                            3 * hidden_size * intermediate_size + 2 * hidden_size + 2 * head_dim;
  return num_layers * per_layer + hidden_size + vocab_size * hidden_size;
}

ModelConfig parse_model_config(std::string_view json_text) {
  const json root = parse_json_object(json_text, "config.json");
  ModelConfig cfg;

  std::string architecture;
  if (auto it = root.find("architectures"); it != root.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string())
      throw FormatError("config field 'architectures' must be a non-empty list of strings");
    architecture = (*it)[0].get<std::string>();
  }
  const std::string model_type = opt_string(root, "model_type").value_or("");
  if (architecture.empty() && model_type.empty())
    throw FormatError("config.json names no architecture (neither 'architectures' nor 'model_type')");
  if (architecture != "Qwen3ForCausalLM" && !(architecture.empty() && model_type == "qwen3")) {
    throw FormatError("unsupported architecture '" + (architecture.empty() ? model_type : architecture) +
                      "': this engine runs Qwen3ForCausalLM (dense Qwen3)");
  }
  if (!model_type.empty() && model_type != "qwen3")
    throw FormatError("unsupported model_type '" + model_type + "': this engine runs model_type 'qwen3'");
  cfg.architecture = "Qwen3ForCausalLM";

  // Bounds keep every derived byte count far from int64 overflow (see the safetensors checks too).
  cfg.hidden_size = req_int(root, "hidden_size", 1, 1 << 16);
  cfg.intermediate_size = req_int(root, "intermediate_size", 1, 1 << 18);
  cfg.num_layers = req_int(root, "num_hidden_layers", 1, 1024);
  cfg.num_heads = req_int(root, "num_attention_heads", 1, 1024);
  cfg.num_kv_heads = opt_int(root, "num_key_value_heads", 1, 1024).value_or(cfg.num_heads);
  cfg.head_dim = opt_int(root, "head_dim", 2, 1024).value_or(128);  // Qwen3Config's default
  cfg.vocab_size = req_int(root, "vocab_size", 1, 1 << 24);
  cfg.max_position_embeddings = opt_int(root, "max_position_embeddings", 1, 1 << 24).value_or(32768);
  cfg.rms_norm_eps = opt_number(root, "rms_norm_eps", 0.0, 1.0).value_or(1e-6);
  cfg.tie_word_embeddings = opt_bool(root, "tie_word_embeddings").value_or(false);
  cfg.rope = parse_rope(root);
  if (cfg.rope.type == "yarn") {
    if (cfg.rope.original_max_position_embeddings == 0)
      cfg.rope.original_max_position_embeddings = cfg.max_position_embeddings;
    if (cfg.rope.factor == 0.0)
      cfg.rope.factor = double(cfg.max_position_embeddings) / double(cfg.rope.original_max_position_embeddings);
  }

  if (cfg.num_heads % cfg.num_kv_heads != 0)
    throw FormatError("num_attention_heads (" + std::to_string(cfg.num_heads) +
                      ") must be a multiple of num_key_value_heads (" + std::to_string(cfg.num_kv_heads) + ")");
  if (cfg.head_dim % 2 != 0) throw FormatError("head_dim must be even (rotary embeddings pair dimensions)");

  cfg.dtype = opt_string(root, "dtype").value_or(opt_string(root, "torch_dtype").value_or("bfloat16"));
  if (auto act = opt_string(root, "hidden_act"); act && *act != "silu")
    throw FormatError("unsupported hidden_act '" + *act + "' (Qwen3 uses silu)");
  if (opt_bool(root, "attention_bias").value_or(false))
    throw FormatError("attention_bias = true is not supported (Qwen3 has no attention biases)");
  if (opt_bool(root, "use_sliding_window").value_or(false))
    throw FormatError("use_sliding_window = true is not supported");
  if (auto it = root.find("layer_types"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) throw FormatError("config field 'layer_types' must be a list");
    for (const auto& type : *it)
      if (!type.is_string() || type.get<std::string>() != "full_attention")
        throw FormatError("unsupported layer type " + type.dump() + " (only full_attention)");
  }
  if (auto it = root.find("quantization_config"); it != root.end() && !it->is_null()) {
    std::string method = "unknown";
    if (it->is_object() && it->contains("quant_method") && (*it)["quant_method"].is_string())
      method = (*it)["quant_method"].get<std::string>();
    throw FormatError("quantized checkpoints (quant_method '" + method + "') are not supported yet");
  }
  cfg.bos_token_id = opt_int(root, "bos_token_id", 0, int64_t(1) << 31);
  cfg.eos_token_ids = token_id_list(root, "eos_token_id");
  return cfg;
}

GenerationConfig parse_generation_config(std::string_view json_text) {
  const json root = parse_json_object(json_text, "generation_config.json");
  GenerationConfig gen;
  gen.eos_token_ids = token_id_list(root, "eos_token_id");
  gen.do_sample = opt_bool(root, "do_sample");
  gen.temperature = opt_number(root, "temperature", 0.0, 1e6);
  gen.top_k = opt_int(root, "top_k", 0, int64_t(1) << 31);
  gen.top_p = opt_number(root, "top_p", 0.0, 1.0);
  gen.min_p = opt_number(root, "min_p", 0.0, 1.0);
  gen.repetition_penalty = opt_number(root, "repetition_penalty", 1e-6, 1e6);
  return gen;
}

std::string read_text_file(const std::filesystem::path& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw FormatError("cannot read " + path.string() + ": no such file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw FormatError("cannot read " + path.string() + ": " + ec.message());
  if (size > max_bytes)
    throw FormatError(path.string() + " is too large (" + std::to_string(size) + " bytes, limit " +
                      std::to_string(max_bytes) + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError("cannot open " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ModelConfig load_model_config(const std::filesystem::path& config_json) {
  try {
    return parse_model_config(read_text_file(config_json));
  } catch (const FormatError& e) {
    throw FormatError(config_json.string() + ": " + e.what());
  }
}

GenerationConfig load_generation_config(const std::filesystem::path& generation_config_json) {
  std::error_code ec;
  if (!std::filesystem::exists(generation_config_json, ec)) return {};
  try {
    return parse_generation_config(read_text_file(generation_config_json));
  } catch (const FormatError& e) {
    throw FormatError(generation_config_json.string() + ": " + e.what());
  }
}

}  // namespace qwen3
