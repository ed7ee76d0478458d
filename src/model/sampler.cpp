#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace qwen3 {

void validate_sampling_params(const SamplingParams& p) {
  QWEN3_CHECK_INPUT(std::isfinite(p.temperature) && p.temperature >= 0.0 && p.temperature <= 100.0,
                    "temperature must be in [0, 100]");
  QWEN3_CHECK_INPUT(p.top_k >= 0, "top-k must be >= 0 (0 turns it off)");
  QWEN3_CHECK_INPUT(std::isfinite(p.top_p) && p.top_p > 0.0 && p.top_p <= 1.0, "top-p must be in (0, 1]");
  QWEN3_CHECK_INPUT(std::isfinite(p.min_p) && p.min_p >= 0.0 && p.min_p <= 1.0, "min-p must be in [0, 1]");
  QWEN3_CHECK_INPUT(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0,
                    "repetition penalty must be > 0 (1 turns it off)");
  QWEN3_CHECK_INPUT(std::isfinite(p.presence_penalty) && std::abs(p.presence_penalty) <= 2.0,
                    "presence penalty must be in [-2, 2]");
  QWEN3_CHECK_INPUT(std::isfinite(p.frequency_penalty) && std::abs(p.frequency_penalty) <= 2.0,
                    "frequency penalty must be in [-2, 2]");
}

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[size_t(best)]) best = int32_t(i);
  return best;
}

Sampler::Sampler(const SamplingParams& params, int64_t vocab_size) : params_(params), rng_(params.seed) {
  validate_sampling_params(params);
  if (params.has_penalties()) {
    in_context_.assign(size_t(vocab_size), 0);
    generated_counts_.assign(size_t(vocab_size), 0);
  }
}

void Sampler::add_prompt(std::span<const int32_t> tokens) {
  if (in_context_.empty()) return;
  for (int32_t t : tokens) {
    if (!in_context_[size_t(t)] && generated_counts_[size_t(t)] == 0) touched_.push_back(t);
    in_context_[size_t(t)] = 1;
  }
}

void Sampler::accept(int32_t token) {
  if (in_context_.empty()) return;
  if (!in_context_[size_t(token)] && generated_counts_[size_t(token)] == 0) touched_.push_back(token);
  in_context_[size_t(token)] = 1;
  generated_counts_[size_t(token)] += 1;
}

void Sampler::apply_penalties(std::span<float> logits) const {
  for (int32_t t : touched_) {
    float& l = logits[size_t(t)];
    if (in_context_[size_t(t)] && params_.repetition_penalty != 1.0)  // transformers: shrink toward zero
      l = l > 0 ? float(l / params_.repetition_penalty) : float(l * params_.repetition_penalty);
    const int32_t count = generated_counts_[size_t(t)];
    if (count > 0) l -= float(params_.frequency_penalty * count + params_.presence_penalty);
  }
}

int32_t Sampler::sample(std::span<float> logits) {
  if (params_.has_penalties()) apply_penalties(logits);
  if (params_.greedy()) return argmax(logits);

  // Candidates sorted by logit (ties by id, so the order is deterministic).
  const size_t vocab = logits.size();
  size_t keep = vocab;
  if (params_.top_k > 0) keep = std::min(vocab, size_t(params_.top_k));
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  };
  if (keep < vocab) {
    std::partial_sort(order_.begin(), order_.begin() + ptrdiff_t(keep), order_.end(), by_logit);
    order_.resize(keep);
  } else {
    std::sort(order_.begin(), order_.end(), by_logit);
  }

  // Softmax of logits / temperature over the candidates, in double.
  const double inv_t = 1.0 / params_.temperature;
  const double max_logit = double(logits[size_t(order_[0])]) * inv_t;
  probs_.resize(order_.size());
  double total = 0;
  for (size_t i = 0; i < order_.size(); ++i) {
    const double l = double(logits[size_t(order_[i])]);
    probs_[i] = std::isinf(l) && l < 0 ? 0.0 : std::exp(l * inv_t - max_logit);
    total += probs_[i];
  }
  if (params_.top_p < 1.0) {  // smallest prefix whose mass reaches top_p (at least one token)
    double cumulative = 0;
    size_t n = 0;
    while (n < probs_.size()) {
      cumulative += probs_[n] / total;
      ++n;
      if (cumulative >= params_.top_p) break;
    }
    probs_.resize(n);
    total = std::accumulate(probs_.begin(), probs_.end(), 0.0);
  }
  if (params_.min_p > 0.0) {  // drop tokens below min_p * (probability of the most likely)
    const double threshold = params_.min_p * probs_[0];
    size_t n = 1;
    while (n < probs_.size() && probs_[n] >= threshold) ++n;
    probs_.resize(n);
    total = std::accumulate(probs_.begin(), probs_.end(), 0.0);
  }
  const double target = rng_.uniform() * total;
  double cumulative = 0;
  for (size_t i = 0; i < probs_.size(); ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return order_[i];
  }
  return order_[probs_.size() - 1];
}

}  // namespace qwen3
