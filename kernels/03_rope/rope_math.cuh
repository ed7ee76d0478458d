// The rotary-embedding arithmetic shared by every rope version, in transformers' bf16 rounding order.
#pragma once

#include "kernels/common/dtype.cuh"

namespace qwen3::kernels {

// cos/sin of position * inv_freq in fp32, scaled by attention_factor, rounded to bf16 (cos.to(x.dtype)).
__device__ __forceinline__ void rope_cos_sin_bf16(int32_t position, float inv_freq, float attention_factor,
                                                  float& cos_out, float& sin_out) {
  const float angle = float(position) * inv_freq;
  float s, c;
  sincosf(angle, &s, &c);
  cos_out = bf16_round(c * attention_factor);
  sin_out = bf16_round(s * attention_factor);
}

// For a pair (x1 = x[i], x2 = x[i + half]): x1' = x1*cos - x2*sin, x2' = x2*cos + x1*sin, each product and the
// sum rounded to bf16 as the bf16 tensor ops of `q * cos + rotate_half(q) * sin` do.
__device__ __forceinline__ void rope_rotate_pair(float x1, float x2, float c, float s, float& out1, float& out2) {
  out1 = bf16_round(bf16_round(x1 * c) + bf16_round(-x2 * s));
  out2 = bf16_round(bf16_round(x2 * c) + bf16_round(x1 * s));
}

}  // namespace qwen3::kernels
