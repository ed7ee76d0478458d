// Token sampling on the host, applied in the order transformers applies its processors: repetition penalty,
// presence/frequency penalties (OpenAI semantics, over generated tokens), temperature, top-k, top-p, min-p.
// Seeded: the same seed, logits and history give the same tokens on every machine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qwen3 {

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy (argmax; ties go to the lowest id)
  int64_t top_k = 0;         // 0 = off
  double top_p = 1.0;        // 1 = off
  double min_p = 0.0;        // 0 = off
  double repetition_penalty = 1.0;  // over prompt and generated tokens (transformers)
  double presence_penalty = 0.0;    // over generated tokens (OpenAI)
  double frequency_penalty = 0.0;   // over generated tokens (OpenAI)
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0; }
  bool has_penalties() const {
    return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0;
  }
};

// Validates ranges; throws InputError with the flag's meaning on a bad value.
void validate_sampling_params(const SamplingParams& params);

// xoshiro256** seeded through splitmix64: a tiny, portable, well-tested generator.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits
 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int64_t vocab_size);

  const SamplingParams& params() const { return params_; }
  // Tokens the penalties see: the prompt (repetition penalty only) and every accepted token.
  void add_prompt(std::span<const int32_t> tokens);
  void accept(int32_t token);
  // Applies penalties and filters to logits (modified in place) and returns the chosen token.
  int32_t sample(std::span<float> logits);

  // Used by device samplers: one uniform draw per step from the same stream.
  double next_uniform() { return rng_.uniform(); }

 private:
  void apply_penalties(std::span<float> logits) const;

  SamplingParams params_;
  Rng rng_;
  std::vector<uint8_t> in_context_;       // (vocab) seen in prompt or output
  std::vector<int32_t> generated_counts_;  // (vocab) times generated
  std::vector<int32_t> touched_;          // ids with a non-zero entry above (keeps penalties O(history))
  std::vector<int32_t> order_;            // scratch
  std::vector<double> probs_;             // scratch
};

int32_t argmax(std::span<const float> logits);

}  // namespace qwen3
