#include "tests/gpu/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/dtype.h"

namespace qwen3::reference {

float to_float(uint16_t bf16_bits) {
  return qwen3::bf16_to_f32(bf16_bits);
}
uint16_t to_bf16(float value) {
  return qwen3::f32_to_bf16(value);
}
float round_bf16(float value) {
  return to_float(to_bf16(value));
}

int64_t ulp_distance(uint16_t a, uint16_t b) {
  auto is_nan = [](uint16_t v) { return (v & 0x7f80) == 0x7f80 && (v & 0x007f) != 0; };
  if (is_nan(a) || is_nan(b)) return std::numeric_limits<int64_t>::max();
  // Map sign-magnitude onto a line where neighbours differ by one (+0 and -0 both map to 0).
  auto line = [](uint16_t v) { return (v & 0x8000) ? -int64_t(v & 0x7fff) : int64_t(v); };
  return std::llabs(line(a) - line(b));
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from (seed, index), 24 random bits: exactly representable in float.
float unit_uniform(uint64_t seed, uint64_t index) {
  return float(splitmix64(seed ^ splitmix64(index)) >> 40) * 0x1.0p-24f;
}

std::vector<float> to_float_vector(const uint16_t* data, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) out[size_t(i)] = to_float(data[i]);
  return out;
}

}  // namespace

uint64_t mix_seed(uint64_t seed, uint64_t salt) {
  return splitmix64(seed ^ splitmix64(salt + 0x51ed270b27a1f5c1ull));
}

void fill_uniform_bf16(std::span<uint16_t> out, uint64_t seed, float lo, float hi) {
  const int64_t n = int64_t(out.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = to_bf16(lo + (hi - lo) * unit_uniform(seed, uint64_t(i)));
}

void fill_uniform_int(std::span<int32_t> out, uint64_t seed, int32_t lo, int32_t hi) {
  const uint64_t range = uint64_t(int64_t(hi) - int64_t(lo) + 1);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = int32_t(int64_t(lo) + int64_t(splitmix64(seed ^ splitmix64(i)) % range));
}

// ---- 00 embedding -----------------------------------------------------------------------------------------
void embedding(std::span<const int32_t> ids, const uint16_t* table, int64_t hidden, uint16_t* out) {
  for (size_t t = 0; t < ids.size(); ++t)
    std::copy(table + int64_t(ids[t]) * hidden, table + (int64_t(ids[t]) + 1) * hidden,
              out + int64_t(t) * hidden);
}

// ---- 01 rmsnorm -------------------------------------------------------------------------------------------
void rmsnorm(const uint16_t* x, const uint16_t* weight, int64_t rows, int64_t n, float eps, uint16_t* y) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* xr = x + r * n;
    uint16_t* yr = y + r * n;
    double sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) sum_sq += double(to_float(xr[i])) * double(to_float(xr[i]));
    // transformers: variance in fp32, hidden * rsqrt(variance + eps) in fp32, .to(bf16), then weight * that.
    const float inv_rms = 1.0f / std::sqrt(float(sum_sq / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) {
      const float normalized = round_bf16(to_float(xr[i]) * inv_rms);
      yr[i] = to_bf16(to_float(weight[i]) * normalized);  // bf16 * bf16 is exact in fp32: one rounding
    }
  }
}

void add(const uint16_t* a, const uint16_t* b, int64_t n, uint16_t* out) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

// ---- 02 gemm ----------------------------------------------------------------------------------------------
void gemm(const uint16_t* x, const uint16_t* w, int64_t n, int64_t k, std::span<const int64_t> rows,
          float* y_exact, float* abs_sum) {
  const int64_t m_checked = int64_t(rows.size());
  std::vector<float> x_rows(size_t(m_checked * k));  // (rows.size(), k)
  for (int64_t r = 0; r < m_checked; ++r)
    for (int64_t i = 0; i < k; ++i) x_rows[size_t(r * k + i)] = to_float(x[rows[size_t(r)] * k + i]);
#pragma omp parallel
  {
    std::vector<float> w_row(static_cast<size_t>(k));
#pragma omp for schedule(static)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < k; ++i) w_row[size_t(i)] = to_float(w[j * k + i]);
      for (int64_t r = 0; r < m_checked; ++r) {
        const float* xr = x_rows.data() + r * k;
        // A product of two bf16 is exact in fp32; the sum is kept in double (4 independent partial sums).
        double acc[4] = {0, 0, 0, 0}, mag[4] = {0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 4 <= k; i += 4)
          for (int lane = 0; lane < 4; ++lane) {
            const double p = double(xr[i + lane] * w_row[size_t(i + lane)]);
            acc[lane] += p;
            mag[lane] += std::fabs(p);
          }
        for (; i < k; ++i) {
          const double p = double(xr[i] * w_row[size_t(i)]);
          acc[0] += p;
          mag[0] += std::fabs(p);
        }
        y_exact[r * n + j] = float((acc[0] + acc[1]) + (acc[2] + acc[3]));
        abs_sum[r * n + j] = float((mag[0] + mag[1]) + (mag[2] + mag[3]));
      }
    }
  }
}

// ---- 03 rope ----------------------------------------------------------------------------------------------
void rope_cos_sin(int32_t position, std::span<const float> inv_freq, float attention_factor, float* cos_out,
                  float* sin_out) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = float(position) * inv_freq[i];  // fp32, as transformers' inv_freq @ position_ids
    cos_out[i] = round_bf16(std::cos(angle) * attention_factor);
    sin_out[i] = round_bf16(std::sin(angle) * attention_factor);
  }
}

void rope_head(uint16_t* head, int64_t head_dim, const float* cos_bf16, const float* sin_bf16,
               float* term_magnitude) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = to_float(head[i]), x2 = to_float(head[i + half]);
    const float c = cos_bf16[i], s = sin_bf16[i];
    // rotate_half(x) = cat(-x2, x1): the first half adds bf16(-x2*s) = -bf16(x2*s), the second adds
    // bf16(x1*s).
    head[i] = to_bf16(round_bf16(x1 * c) - round_bf16(x2 * s));
    head[i + half] = to_bf16(round_bf16(x2 * c) + round_bf16(x1 * s));
    if (term_magnitude) {
      term_magnitude[i] = std::fabs(x1 * c) + std::fabs(x2 * s);
      term_magnitude[i + half] = std::fabs(x2 * c) + std::fabs(x1 * s);
    }
  }
}

void rope(uint16_t* q, uint16_t* k, std::span<const int32_t> positions, std::span<const float> inv_freq,
          float attention_factor, int64_t q_heads, int64_t kv_heads, int64_t head_dim, float* q_magnitude,
          float* k_magnitude) {
  const int64_t tokens = int64_t(positions.size());
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> c(inv_freq.size()), s(inv_freq.size());
    rope_cos_sin(positions[size_t(t)], inv_freq, attention_factor, c.data(), s.data());
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t offset = (t * q_heads + h) * head_dim;
      rope_head(q + offset, head_dim, c.data(), s.data(), q_magnitude ? q_magnitude + offset : nullptr);
    }
    for (int64_t h = 0; h < kv_heads; ++h) {
      const int64_t offset = (t * kv_heads + h) * head_dim;
      rope_head(k + offset, head_dim, c.data(), s.data(), k_magnitude ? k_magnitude + offset : nullptr);
    }
  }
}

// ---- 04 attention -----------------------------------------------------------------------------------------
void attention(const AttentionShape& shape, const uint16_t* q, const uint16_t* k_cache,
               const uint16_t* v_cache, std::span<const int32_t> positions, std::span<const int32_t> slots,
               float* out_exact, float* weighted_abs) {
  const int64_t D = shape.head_dim, group = shape.q_heads / shape.kv_heads;
  const int64_t slot_stride = shape.max_ctx * shape.kv_heads * D;  // elements between cache slots
  int64_t num_slots = 1;
  for (const int32_t s : slots) num_slots = std::max<int64_t>(num_slots, int64_t(s) + 1);
  const std::vector<float> qf = to_float_vector(q, shape.tokens * shape.q_heads * D);
  const std::vector<float> kf = to_float_vector(k_cache, num_slots * slot_stride);
  const std::vector<float> vf = to_float_vector(v_cache, num_slots * slot_stride);
#pragma omp parallel
  {
    std::vector<double> scores;
    std::vector<double> acc(static_cast<size_t>(D)), mag(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t t = 0; t < shape.tokens; ++t) {
      for (int64_t h = 0; h < shape.q_heads; ++h) {
        const int64_t slot = slots.empty() ? 0 : slots[size_t(t)];
        const int64_t n_keys = int64_t(positions[size_t(t)]) + 1;
        const int64_t kv_head = h / group;
        const float* qh = qf.data() + (t * shape.q_heads + h) * D;
        const float* k_base = kf.data() + slot * slot_stride + kv_head * D;
        const float* v_base = vf.data() + slot * slot_stride + kv_head * D;
        scores.assign(size_t(n_keys), 0.0);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n_keys; ++j) {
          const float* kj = k_base + j * shape.kv_heads * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(qh[d] * kj[d]);  // bf16 * bf16 is exact in fp32
          scores[size_t(j)] = dot * double(shape.scale);
          max_score = std::max(max_score, scores[size_t(j)]);
        }
        double denom = 0;
        for (int64_t j = 0; j < n_keys; ++j) {
          scores[size_t(j)] = std::exp(scores[size_t(j)] - max_score);
          denom += scores[size_t(j)];
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        std::fill(mag.begin(), mag.end(), 0.0);
        for (int64_t j = 0; j < n_keys; ++j) {
          const double p = scores[size_t(j)] / denom;
          const float* vj = v_base + j * shape.kv_heads * D;
          for (int64_t d = 0; d < D; ++d) {
            acc[size_t(d)] += p * double(vj[d]);
            mag[size_t(d)] += p * std::fabs(double(vj[d]));
          }
        }
        float* out = out_exact + (t * shape.q_heads + h) * D;
        float* out_mag = weighted_abs + (t * shape.q_heads + h) * D;
        for (int64_t d = 0; d < D; ++d) {
          out[d] = float(acc[size_t(d)]);
          out_mag[d] = float(mag[size_t(d)]);
        }
      }
    }
  }
}

// ---- 05 mlp -----------------------------------------------------------------------------------------------
uint16_t swiglu(uint16_t gate, uint16_t up) {
  const float g = to_float(gate);
  const float silu = round_bf16(g / (1.0f + std::exp(-g)));  // F.silu in fp32, result bf16
  return to_bf16(silu * to_float(up));
}

void silu_mul(const uint16_t* gate_up, int64_t tokens, int64_t inter, uint16_t* out) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < inter; ++i)
      out[t * inter + i] = swiglu(gate_up[t * 2 * inter + i], gate_up[t * 2 * inter + inter + i]);
}

// ---- 07 sampling ------------------------------------------------------------------------------------------
std::vector<double> penalized_logits(std::span<const uint16_t> logits, std::span<const int32_t> counts,
                                     std::span<const uint8_t> in_prompt, const SamplingSpec& spec) {
  std::vector<double> z(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    double value = to_float(logits[i]);
    const int32_t count = counts.empty() ? 0 : counts[i];
    const bool seen = count > 0 || (!in_prompt.empty() && in_prompt[i] != 0);
    if (seen && spec.repetition_penalty != 1.0)
      value = value > 0 ? value / spec.repetition_penalty : value * spec.repetition_penalty;
    if (count > 0) value -= double(count) * spec.frequency_penalty + spec.presence_penalty;
    z[i] = value;
  }
  return z;
}

int32_t argmax(std::span<const double> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

namespace {

// Token ids sorted by logit, highest first, ties by id.
std::vector<int32_t> sorted_ids(std::span<const double> logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  return order;
}

// The sampling filters over `order`, each cut keeping a prefix; returns the prefix length kept and the
// weights exp((l - l_max) / T) of the sorted candidates. lenient: keep ties at every cut, top_p + slack,
// min_p * (1 - slack).
size_t kept_prefix(std::span<const double> logits, const std::vector<int32_t>& order,
                   const SamplingSpec& spec, bool lenient, double slack, std::vector<double>& weights) {
  const size_t vocab = order.size();
  auto extend_ties = [&](size_t n) {
    if (!lenient) return n;
    while (n < vocab && n > 0 && logits[size_t(order[n])] == logits[size_t(order[n - 1])]) ++n;
    return n;
  };
  size_t keep = vocab;
  if (spec.top_k > 0 && size_t(spec.top_k) < vocab) keep = extend_ties(size_t(spec.top_k));
  const double max_logit = logits[size_t(order[0])];
  weights.assign(keep, 0.0);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((logits[size_t(order[i])] - max_logit) / spec.temperature);
    total += weights[i];
  }
  if (spec.top_p < 1.0) {
    const double target = std::min(1.0, spec.top_p + (lenient ? slack : 0.0));
    double cumulative = 0;
    size_t n = 0;
    while (n < keep) {
      cumulative += weights[n] / total;
      ++n;
      if (cumulative >= target) break;
    }
    keep = std::min(keep, extend_ties(n));
  }
  if (spec.min_p > 0.0) {
    const double threshold = spec.min_p * (lenient ? 1.0 - slack : 1.0) * weights[0];
    size_t n = 1;
    while (n < keep && weights[n] >= threshold) ++n;
    keep = std::min(keep, extend_ties(n));
  }
  weights.resize(keep);
  return keep;
}

}  // namespace

std::vector<double> token_probabilities(std::span<const double> logits, const SamplingSpec& spec) {
  const std::vector<int32_t> order = sorted_ids(logits);
  std::vector<double> weights;
  const size_t keep = kept_prefix(logits, order, spec, /*lenient=*/false, 0.0, weights);
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<double> probability(logits.size(), 0.0);
  for (size_t i = 0; i < keep; ++i) probability[size_t(order[i])] = weights[i] / total;
  return probability;
}

std::vector<uint8_t> allowed_tokens(std::span<const double> logits, const SamplingSpec& spec, double slack) {
  const std::vector<int32_t> order = sorted_ids(logits);
  std::vector<double> weights;
  const size_t keep = kept_prefix(logits, order, spec, /*lenient=*/true, slack, weights);
  std::vector<uint8_t> allowed(logits.size(), 0);
  for (size_t i = 0; i < keep; ++i) allowed[size_t(order[i])] = 1;
  return allowed;
}

}  // namespace qwen3::reference
