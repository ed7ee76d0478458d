#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace qwen3 {

RopeTable make_rope_table(const ModelConfig& c) {
  const int64_t dim = c.head_dim;
  const int64_t half = dim / 2;
  const RopeConfig& r = c.rope;
  RopeTable table;
  table.inv_freq.resize(size_t(half));
  // transformers: base ** (arange(0, dim, 2).float() / dim) in fp32, then 1 / that.
  std::vector<float> pos_freqs(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    pos_freqs[size_t(i)] = std::pow(float(r.theta), float(2 * i) / float(dim));

  if (r.type == "default" || r.type == "linear") {
    const float factor = r.type == "linear" ? float(r.factor) : 1.0f;
    for (int64_t i = 0; i < half; ++i) table.inv_freq[size_t(i)] = 1.0f / pos_freqs[size_t(i)] / factor;
    return table;
  }

  // YaRN (transformers' _compute_yarn_parameters).
  const double factor = r.factor;
  auto get_mscale = [](double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; };
  if (r.attention_factor) {
    table.attention_factor = float(*r.attention_factor);
  } else if (r.mscale && r.mscale_all_dim && *r.mscale != 0 && *r.mscale_all_dim != 0) {
    table.attention_factor = float(get_mscale(factor, *r.mscale) / get_mscale(factor, *r.mscale_all_dim));
  } else {
    table.attention_factor = float(get_mscale(factor, 1.0));
  }
  auto correction_dim = [&](double rotations) {
    return (double(dim) * std::log(double(r.original_max_position_embeddings) / (rotations * 2 * std::numbers::pi))) /
           (2 * std::log(r.theta));
  };
  double low = correction_dim(r.beta_fast);
  double high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp((float(i) - float(low)) / (float(high) - float(low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float extrapolation = 1.0f / pos_freqs[size_t(i)];
    const float interpolation = 1.0f / (float(factor) * pos_freqs[size_t(i)]);
    table.inv_freq[size_t(i)] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return table;
}

void rope_cos_sin(const RopeTable& table, int64_t position, float* cos_out, float* sin_out) {
  for (size_t i = 0; i < table.inv_freq.size(); ++i) {
    const float angle = float(position) * table.inv_freq[i];
    cos_out[i] = std::cos(angle) * table.attention_factor;
    sin_out[i] = std::sin(angle) * table.attention_factor;
  }
}

}  // namespace qwen3
