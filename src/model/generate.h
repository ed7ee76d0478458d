// The generation loop every front end drives (run, chat, serve, bench): prefill the prompt, then sample one token
// at a time until max_tokens, an eos id, the context end, or the caller says stop.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/sampler.h"

namespace qwen3 {

struct GenerateOptions {
  int64_t max_tokens = 256;
  SamplingParams sampling;
  std::vector<int64_t> eos_token_ids;
  bool ignore_eos = false;
};

enum class FinishReason { kLength, kStop, kContextFull, kCancelled };
std::string finish_reason_name(FinishReason reason);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (an eos id that stopped generation included)
  FinishReason finish_reason = FinishReason::kLength;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;   // prompt forward up to and including the first sampled token
  double decode_seconds = 0;    // every later step
};

// Validates the prompt (non-empty, ids in range, fits the context) and throws InputError otherwise.
void validate_prompt(const Backend& backend, std::span<const int32_t> prompt);

// Starts from an empty cache. on_token is called for each generated token; returning false stops generation.
GenerateResult generate(Backend& backend, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<bool(int32_t)>& on_token = {});

}  // namespace qwen3
