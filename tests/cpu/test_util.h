// Helpers for CPU tests: temporary directories, raw safetensors images, running the qwen3 binary.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace qwen3::test {

inline std::filesystem::path make_temp_dir(const std::string& tag) {
  static std::mt19937_64 rng(std::random_device{}());
  auto dir = std::filesystem::temp_directory_path() / ("qwen3-test-" + tag + "-" + std::to_string(rng()));
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// 8-byte little-endian length + header + data, exactly as given (so tests can lie in any field).
inline std::string safetensors_image(const std::string& header, const std::string& data, int64_t length_override = -1) {
  uint64_t n = length_override >= 0 ? uint64_t(length_override) : header.size();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return bytes + header + data;
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command line, capturing stdout and stderr (stderr through a temp file).
inline CommandResult run_command(const std::string& command) {
  static int counter = 0;
  const auto err_path = std::filesystem::temp_directory_path() /
                        ("qwen3-test-stderr-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>" + err_path.string()).c_str(), "r");
  if (!pipe) return r;
  std::array<char, 65536> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err(err_path);
  r.err.assign(std::istreambuf_iterator<char>(err), {});
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace qwen3::test

#include <map>

#include "core/config.h"
#include "core/dtype.h"
#include "model/qwen3_weights.h"

namespace qwen3::test {

// A valid safetensors image of named BF16 tensors (random normal values, std 0.5), in the given order.
// `overrides` replaces a tensor's shape (to plant mismatches); `skip` leaves a tensor out.
inline std::string random_bf16_safetensors(const std::vector<TensorSpec>& specs, uint64_t seed,
                                           const std::map<std::string, std::vector<int64_t>>& overrides = {},
                                           const std::string& skip = "") {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::string header = "{";
  std::string data;
  for (const TensorSpec& spec : specs) {
    if (spec.name == skip) continue;
    std::vector<int64_t> shape = overrides.count(spec.name) ? overrides.at(spec.name) : spec.shape;
    int64_t numel = 1;
    std::string shape_json = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
      numel *= shape[i];
      shape_json += (i ? "," : "") + std::to_string(shape[i]);
    }
    shape_json += "]";
    const size_t begin = data.size();
    for (int64_t i = 0; i < numel; ++i) {
      const uint16_t v = f32_to_bf16(dist(rng));
      data.push_back(char(v & 0xff));
      data.push_back(char(v >> 8));
    }
    if (header.size() > 1) header += ",";
    header += "\"" + spec.name + "\":{\"dtype\":\"BF16\",\"shape\":" + shape_json + ",\"data_offsets\":[" +
              std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  while ((8 + header.size()) % 8) header += ' ';
  return safetensors_image(header, data);
}

inline std::string tiny_config_json(bool tied = true, int64_t max_positions = 64) {
  return std::string(R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":32,)") +
         R"("intermediate_size":48,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,)" +
         R"("head_dim":16,"vocab_size":50,"rms_norm_eps":1e-6,"rope_theta":10000,"max_position_embeddings":)" +
         std::to_string(max_positions) + R"(,"tie_word_embeddings":)" + (tied ? "true" : "false") +
         R"(,"eos_token_id":[7]})";
}

// Writes a tiny random checkpoint (config.json + model.safetensors) and returns its directory.
inline std::filesystem::path make_tiny_checkpoint(const std::string& tag, bool tied = true,
                                                  const std::map<std::string, std::vector<int64_t>>& overrides = {},
                                                  const std::string& skip = "") {
  const auto dir = make_temp_dir(tag);
  const std::string config = tiny_config_json(tied);
  write_file(dir / "config.json", config);
  write_file(dir / "model.safetensors",
             random_bf16_safetensors(expected_qwen3_tensors(parse_model_config(config)), 1234, overrides, skip));
  return dir;
}

}  // namespace qwen3::test
