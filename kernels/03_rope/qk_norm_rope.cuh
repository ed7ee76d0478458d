// QK-norm followed by RoPE for one head by one warp, shared by v1_qk_norm_rope_cache and the fused decode
// attention (04_attention/v1_qkv_attention_cluster). Lane l holds dims [l*E, l*E + E) of the first half and the same
// dims of the second half (E = head_dim / 64), so each RoPE pair (j, j + head_dim/2) sits in one lane.
#pragma once

#include "kernels/03_rope/rope_math.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {

// On return lo[e] / hi[e] hold dims lane*E + e and head_dim/2 + lane*E + e of rope(w * bf16(x * inv_rms)), each a
// bf16 value (transformers' rounding points). PRECOND: the whole warp calls it; head_dim == 64 * kPerLane.
template <int kPerLane>
__device__ __forceinline__ void qk_norm_rope_warp(const bf16* __restrict__ src, const bf16* __restrict__ norm_w,
                                                  float eps, int32_t position, const float* __restrict__ inv_freq,
                                                  float attention_factor, float (&lo)[kPerLane],
                                                  float (&hi)[kPerLane]) {
  constexpr int kHalf = 32 * kPerLane;
  const int lane = threadIdx.x % kWarpSize;
  float sum_sq = 0.0f;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    lo[e] = __bfloat162float(src[lane * kPerLane + e]);
    hi[e] = __bfloat162float(src[kHalf + lane * kPerLane + e]);
    sum_sq += lo[e] * lo[e] + hi[e] * hi[e];
  }
  sum_sq = warp_sum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / float(2 * kHalf) + eps);
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int i = lane * kPerLane + e;
    const float n_lo = bf16_round(__bfloat162float(norm_w[i]) * bf16_round(lo[e] * inv_rms));
    const float n_hi = bf16_round(__bfloat162float(norm_w[i + kHalf]) * bf16_round(hi[e] * inv_rms));
    float c, s;
    rope_cos_sin_bf16(position, inv_freq[i], attention_factor, c, s);
    rope_rotate_pair(n_lo, n_hi, c, s, lo[e], hi[e]);
  }
}

}  // namespace qwen3::kernels
