// Pieces every `qwen3` subcommand shares: model/backend options, sampling flags, id lists.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/backend.h"
#include "model/generate.h"

namespace qwen3::cli {

struct ModelOptions {
  std::string model_dir;
  std::string backend = "auto";  // auto | cpu | cuda
  int threads = 0;               // CPU threads; 0 = all cores
  int64_t context = 0;           // KV-cache positions; 0 = the model's limit (CPU) or a default (CUDA)
};

void add_model_options(CLI::App& app, ModelOptions& options);

struct SamplingFlags {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  double presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
  int64_t max_tokens = 256;
  bool ignore_eos = false;
};

void add_sampling_flags(CLI::App& app, SamplingFlags& flags);
// Command-line values over generation_config.json's, over defaults (temperature 1, no filters).
GenerateOptions resolve_generate_options(const SamplingFlags& flags, const Checkpoint& checkpoint);

struct LoadedModel {
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Backend> backend;
};
LoadedModel load_model(const ModelOptions& options);

// "1,2,3" or "1 2 3" -> ids; throws InputError on anything else.
std::vector<int32_t> parse_id_list(const std::string& text);

// Registration of each subcommand (one file each). The callback runs when the subcommand is chosen.
void register_info(CLI::App& app);
void register_logits(CLI::App& app);
void register_run(CLI::App& app);
void register_tokenize(CLI::App& app);  // tokenize and detokenize: cmd_tokenize.cpp
void register_detokenize(CLI::App& app);
void register_bench(CLI::App& app);  // cmd_bench.cpp
void register_template(CLI::App& app);  // cmd_template.cpp

}  // namespace qwen3::cli
