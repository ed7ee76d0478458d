#include "cli/common.h"

#include <omp.h>

#include <charconv>
#include <chrono>
#include <iostream>

#include "cli/backend_factory.h"
#include "core/error.h"

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

GenerateOptions resolve_generate_options(const SamplingFlags& f, const Checkpoint& checkpoint) {
  const GenerationConfig& gen = checkpoint.generation();
  GenerateOptions o;
  o.max_tokens = f.max_tokens;
  o.ignore_eos = f.ignore_eos;
  o.eos_token_ids = checkpoint.eos_token_ids();
  SamplingParams& s = o.sampling;
  // generation_config.json: do_sample false means greedy, as in transformers.
  s.temperature = gen.do_sample.value_or(true) ? gen.temperature.value_or(1.0) : 0.0;
  s.top_k = gen.top_k.value_or(0);
  s.top_p = gen.top_p.value_or(1.0);
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

}  // namespace qwen3::cli
