// Pieces every `qwen3` subcommand shares: model/backend options, sampling flags, id lists.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/checkpoint.h"
#include "model/backend.h"
#include "model/generate.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

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

// What a sampling field falls back to when neither a flag nor generation_config.json sets it.
struct SamplingFallback {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
};
// The Qwen3 model card's recommendation for chat: thinking 0.6 / 0.95 / 20, non-thinking 0.7 / 0.8 / 20.
// Used only where generation_config.json is silent (the published checkpoints ship the thinking values).
SamplingFallback qwen3_chat_sampling(bool thinking);

// Command-line values over generation_config.json's, over `fallback` (default: temperature 1, no filters).
GenerateOptions resolve_generate_options(const SamplingFlags& flags, const Checkpoint& checkpoint,
                                         const SamplingFallback& fallback = {});

// The text side of a checkpoint: DIR/tokenizer.json, or the file given with --tokenizer; the chat template
// from beside that tokenizer.json (tokenizer_config.json or chat_template.jinja), else from DIR.
void add_tokenizer_option(CLI::App& app, std::string& tokenizer_file);
Tokenizer load_checkpoint_tokenizer(const std::string& model_dir, const std::string& tokenizer_file);
ChatTemplate load_checkpoint_template(const std::string& model_dir, const std::string& tokenizer_file);
// Whether a tokenizer is there to load (run --prompt-ids prints ids when there is none).
bool checkpoint_has_tokenizer(const std::string& model_dir, const std::string& tokenizer_file);

// InputError naming `what` and the byte offset when `text` is not valid UTF-8.
void require_valid_utf8(std::string_view text, const std::string& what);

// "1 2 3": ids as --print-ids and --verbose-prompt print them.
std::string join_ids(std::span<const int32_t> ids);

struct LoadedModel {
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Backend> backend;
};
LoadedModel load_model(const ModelOptions& options);

// "1,2,3" or "1 2 3" -> ids; throws InputError on anything else.
std::vector<int32_t> parse_id_list(const std::string& text);

// A streaming-read ceiling measured by bench/measure_peaks: read_GB_s of one of its peaks-<UTC>.json files.
struct MeasuredReadPeak {
  double gb_s = 0;
  std::string file;  // the file's name
};
// The newest peaks-*.json in `dir` measured on `gpu_name` with a positive read_GB_s (core/peaks.h), none where no
// file has one.
std::optional<MeasuredReadPeak> newest_read_peak(const std::filesystem::path& dir, const std::string& gpu_name);

// Registration of each subcommand (one file each). The callback runs when the subcommand is chosen.
void register_info(CLI::App& app);
void register_logits(CLI::App& app);
void register_run(CLI::App& app);
void register_tokenize(CLI::App& app);  // tokenize and detokenize: cmd_tokenize.cpp
void register_detokenize(CLI::App& app);
void register_bench(CLI::App& app);  // cmd_bench.cpp
void register_template(CLI::App& app);  // cmd_template.cpp
void register_chat(CLI::App& app);      // cmd_chat.cpp

}  // namespace qwen3::cli
