#include "model/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace qwen3 {

int32_t Backend::forward_and_sample(std::span<const int32_t> tokens, Sampler& sampler) {
  ForwardOutput out;
  forward(tokens, /*want_argmax_per_position=*/false, out);
  return sampler.sample(out.last_logits);
}

std::string finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kContextFull: return "context_full";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "unknown";
}

void validate_prompt(const Backend& backend, std::span<const int32_t> prompt) {
  QWEN3_CHECK_INPUT(!prompt.empty(), "the prompt is empty");
  const int64_t vocab = backend.config().vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i)
    QWEN3_CHECK_INPUT(prompt[i] >= 0 && prompt[i] < vocab,
                      "token id " + std::to_string(prompt[i]) + " at position " + std::to_string(i) +
                          " is out of range [0, " + std::to_string(vocab) + ")");
  QWEN3_CHECK_INPUT(int64_t(prompt.size()) <= backend.context_length(),
                    "the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                        std::to_string(backend.context_length()));
}

GenerateResult generate(Backend& backend, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<bool(int32_t)>& on_token) {
  validate_prompt(backend, prompt);
  QWEN3_CHECK_INPUT(options.max_tokens >= 0, "max tokens must be >= 0");
  using clock = std::chrono::steady_clock;
  GenerateResult result;
  result.prompt_tokens = int64_t(prompt.size());
  if (options.max_tokens == 0) return result;

  Sampler sampler(options.sampling, backend.config().vocab_size);
  sampler.add_prompt(prompt);
  backend.truncate(0);

  auto is_eos = [&](int32_t t) {
    return !options.ignore_eos &&
           std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), int64_t(t)) !=
               options.eos_token_ids.end();
  };

  const auto t0 = clock::now();
  int32_t token = backend.forward_and_sample(prompt, sampler);
  const auto t1 = clock::now();
  result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  while (true) {
    sampler.accept(token);
    result.tokens.push_back(token);
    if (on_token && !on_token(token)) {
      result.finish_reason = FinishReason::kCancelled;
      break;
    }
    if (is_eos(token)) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    if (int64_t(result.tokens.size()) >= options.max_tokens) {
      result.finish_reason = FinishReason::kLength;
      break;
    }
    if (backend.length() >= backend.context_length()) {
      result.finish_reason = FinishReason::kContextFull;
      break;
    }
    token = backend.forward_and_sample(std::span<const int32_t>(&token, 1), sampler);
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return result;
}

}  // namespace qwen3
