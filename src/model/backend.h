// The one interface every compute path implements: the CPU reference here, the CUDA engine in src/engine.
// The same tests and CLI commands run against either. A backend owns one sequence's KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"

namespace qwen3 {

class Sampler;

struct ForwardOutput {
  std::vector<float> last_logits;      // (vocab) logits of the last position
  std::vector<int32_t> argmax;         // (T) argmax at every position, when requested
  std::vector<float> top2_margin;      // (T) top-1 minus top-2 logit at every position (CPU backend, when requested)
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual const ModelConfig& config() const = 0;
  // Most positions the KV cache can hold.
  virtual int64_t context_length() const = 0;
  // Tokens already in the KV cache.
  virtual int64_t length() const = 0;
  // Drops cached positions >= n (n = 0 starts a new sequence).
  virtual void truncate(int64_t n) = 0;

  // Runs tokens at positions [length(), length() + T) and appends them to the cache.
  // PRECOND: 1 <= T, length() + T <= context_length(), every id in [0, vocab).
  virtual void forward(std::span<const int32_t> tokens, bool want_argmax_per_position, ForwardOutput& out) = 0;

  // forward() of the last position, then one token drawn by the sampler. A backend may sample on its device.
  virtual int32_t forward_and_sample(std::span<const int32_t> tokens, Sampler& sampler);
};

}  // namespace qwen3
