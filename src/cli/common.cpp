#include "cli/common.h"

#include <omp.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli/backend_factory.h"
#include "core/error.h"
#include "core/peaks.h"
#include "text/unicode.h"

namespace qwen3::cli {

void add_model_options(CLI::App& app, ModelOptions& options) {
  app.add_option("--model,-m", options.model_dir, "Hugging Face checkpoint directory (config.json, *.safetensors)")
      ->required();
  app.add_option("--backend", options.backend, "Compute backend: auto (GPU when present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--threads", options.threads, "CPU threads (0 = all cores)")->check(CLI::Range(0, 4096));
  app.add_option("--ctx-size", options.context, "KV-cache positions (0 = the model's max_position_embeddings)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
}

void add_sampling_flags(CLI::App& app, SamplingFlags& f) {
  app.add_option("--max-tokens,-n", f.max_tokens, "Most tokens to generate")->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  app.add_option("--temperature,-t", f.temperature, "Sampling temperature (0 = greedy)");
  app.add_option("--top-k", f.top_k, "Keep the k most likely tokens (0 = off)");
  app.add_option("--top-p", f.top_p, "Nucleus sampling mass (1 = off)");
  app.add_option("--min-p", f.min_p, "Drop tokens below min-p x the top probability (0 = off)");
  app.add_option("--repetition-penalty", f.repetition_penalty, "transformers-style repetition penalty (1 = off)");
  app.add_option("--presence-penalty", f.presence_penalty, "OpenAI presence penalty over generated tokens");
  app.add_option("--frequency-penalty", f.frequency_penalty, "OpenAI frequency penalty over generated tokens");
  app.add_option("--seed", f.seed, "Random seed (default: from the clock, printed on stderr)");
  app.add_flag("--ignore-eos", f.ignore_eos, "Keep generating past end-of-sequence tokens");
}

SamplingFallback qwen3_chat_sampling(bool thinking) {
  return thinking ? SamplingFallback{0.6, 0.95, 20} : SamplingFallback{0.7, 0.8, 20};
}

GenerateOptions resolve_generate_options(const SamplingFlags& f, const Checkpoint& checkpoint,
                                         const SamplingFallback& fallback) {
  const GenerationConfig& gen = checkpoint.generation();
  GenerateOptions o;
  o.max_tokens = f.max_tokens;
  o.ignore_eos = f.ignore_eos;
  o.eos_token_ids = checkpoint.eos_token_ids();
  SamplingParams& s = o.sampling;
  // generation_config.json: do_sample false means greedy, as in transformers.
  s.temperature = gen.do_sample.value_or(true) ? gen.temperature.value_or(fallback.temperature) : 0.0;
  s.top_k = gen.top_k.value_or(fallback.top_k);
  s.top_p = gen.top_p.value_or(fallback.top_p);
  s.min_p = gen.min_p.value_or(0.0);
  s.repetition_penalty = gen.repetition_penalty.value_or(1.0);
  if (f.temperature) s.temperature = *f.temperature;
  if (f.top_k) s.top_k = *f.top_k;
  if (f.top_p) s.top_p = *f.top_p;
  if (f.min_p) s.min_p = *f.min_p;
  if (f.repetition_penalty) s.repetition_penalty = *f.repetition_penalty;
  s.presence_penalty = f.presence_penalty;
  s.frequency_penalty = f.frequency_penalty;
  if (f.seed) {
    s.seed = *f.seed;
  } else {
    s.seed = uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count());
    if (!s.greedy()) std::cerr << "seed: " << s.seed << "\n";
  }
  validate_sampling_params(s);
  return o;
}

LoadedModel load_model(const ModelOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  LoadedModel m;
  m.checkpoint = Checkpoint::open(options.model_dir);
  m.backend = make_backend(options.backend, *m.checkpoint, options.context);
  return m;
}

void add_tokenizer_option(CLI::App& app, std::string& tokenizer_file) {
  app.add_option("--tokenizer", tokenizer_file,
                 "tokenizer.json to use instead of DIR/tokenizer.json (the chat template is then read from "
                 "tokenizer_config.json beside it)");
}

namespace {

std::filesystem::path tokenizer_path(const std::string& model_dir, const std::string& tokenizer_file) {
  return tokenizer_file.empty() ? std::filesystem::path(model_dir) / "tokenizer.json"
                                : std::filesystem::path(tokenizer_file);
}

}  // namespace

bool checkpoint_has_tokenizer(const std::string& model_dir, const std::string& tokenizer_file) {
  std::error_code ec;
  return std::filesystem::is_regular_file(tokenizer_path(model_dir, tokenizer_file), ec);
}

Tokenizer load_checkpoint_tokenizer(const std::string& model_dir, const std::string& tokenizer_file) {
  const std::filesystem::path path = tokenizer_path(model_dir, tokenizer_file);
  if (!checkpoint_has_tokenizer(model_dir, tokenizer_file)) {
    if (!tokenizer_file.empty()) throw InputError("tokenizer file " + path.string() + " does not exist");
    std::error_code ec;
    if (!std::filesystem::is_directory(model_dir, ec))
      throw InputError("model directory " + model_dir + " does not exist");
    throw InputError("no tokenizer.json in " + model_dir +
                     " (copy the checkpoint's tokenizer files there or name one with --tokenizer FILE)");
  }
  return Tokenizer::from_file(path);
}

ChatTemplate load_checkpoint_template(const std::string& model_dir, const std::string& tokenizer_file) {
  if (!tokenizer_file.empty()) {
    // A tokenizer named on its own usually travels with its tokenizer_config.json (the template's home).
    const std::filesystem::path beside = std::filesystem::path(tokenizer_file).parent_path();
    const std::filesystem::path dir = beside.empty() ? std::filesystem::path(".") : beside;
    std::error_code ec;
    if (std::filesystem::exists(dir / "tokenizer_config.json", ec) ||
        std::filesystem::exists(dir / "chat_template.jinja", ec))
      return ChatTemplate::from_model_dir(dir);
  }
  try {
    return ChatTemplate::from_model_dir(model_dir);
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + ": no chat template to apply (pass --raw to use the prompt as is)");
  }
}

void require_valid_utf8(std::string_view text, const std::string& what) {
  const size_t bad = unicode::find_invalid_utf8(text);
  if (bad != std::string_view::npos)
    throw InputError(what + " is not valid UTF-8 (byte " + std::to_string(bad) + " of " +
                     std::to_string(text.size()) + ")");
}

std::string join_ids(std::span<const int32_t> ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out;
}

std::vector<int32_t> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    while (p < end && (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n')) ++p;
    if (p == end) break;
    int64_t value = 0;
    auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc() || next == p || (next < end && *next != ',' && *next != ' ' && *next != '\t' && *next != '\n'))
      throw InputError("cannot parse token ids '" + text + "': expected integers separated by commas");
    if (value < 0 || value > INT32_MAX) throw InputError("token id " + std::to_string(value) + " is out of range");
    ids.push_back(int32_t(value));
    p = next;
  }
  if (ids.empty()) throw InputError("no token ids given");
  return ids;
}

std::optional<MeasuredReadPeak> newest_read_peak(const std::filesystem::path& dir, const std::string& gpu_name) {
  for (const auto& [file, j] : measured_peaks({dir}, gpu_name)) {
    const auto read = j.find("read_GB_s");
    if (read != j.end() && read->is_number() && read->get<double>() > 0)
      return MeasuredReadPeak{read->get<double>(), file.filename().string()};
  }
  return std::nullopt;
}

}  // namespace qwen3::cli
