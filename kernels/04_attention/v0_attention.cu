// v0_attention: one warp per (token, q head) walks its keys one at a time with an online softmax (running max and
// sum, fp32). Correct for prefill and decode at any length, but each key costs a dependent warp reduction, so a
// warp has one key in flight: latency bound, and at decode only q_heads warps run on a 132-SM GPU.
#include <cfloat>

#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// PRECOND: head_dim == 32 * kPerLane.
template <int kPerLane>
__global__ void attention_kernel(AttentionArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  constexpr int kHeadDim = 32 * kPerLane;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t global_warp = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (global_warp >= a.tokens * a.q_heads) return;
  const int64_t token = global_warp / a.q_heads, head = global_warp % a.q_heads;
  const int64_t kv_head = head / (a.q_heads / a.kv_heads);
  const int64_t slot = a.slots ? a.slots[token] : 0;
  const int32_t last_key = a.positions[token];

  float q[kPerLane], acc[kPerLane] = {};
  const bf16* q_row = a.q + (token * a.q_heads + head) * kHeadDim + lane * kPerLane;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) q[e] = __bfloat162float(q_row[e]);
  float running_max = -FLT_MAX, running_sum = 0.0f;
  const int64_t key_stride = a.kv_heads * kHeadDim;
  const bf16* k_base = a.k_cache + (slot * a.max_ctx * a.kv_heads + kv_head) * kHeadDim + lane * kPerLane;
  const bf16* v_base = a.v_cache + (slot * a.max_ctx * a.kv_heads + kv_head) * kHeadDim + lane * kPerLane;
  for (int32_t j = 0; j <= last_key; ++j) {
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) dot += q[e] * __bfloat162float(k_base[j * key_stride + e]);
    const float score = warp_sum(dot) * a.scale;
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max);
    const float p = expf(score - new_max);
    running_sum = running_sum * correction + p;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e)
      acc[e] = acc[e] * correction + p * __bfloat162float(v_base[j * key_stride + e]);
    running_max = new_max;
  }
  bf16* out = a.out + (token * a.q_heads + head) * kHeadDim + lane * kPerLane;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) out[e] = __float2bfloat16_rn(acc[e] / running_sum);
}

}  // namespace

bool attention_v0_supports(const AttentionArgs& a) { return a.head_dim == 64 || a.head_dim == 128; }

void launch_attention_v0(const AttentionArgs& a, cudaStream_t stream) {
  const int64_t warps = a.tokens * a.q_heads;
  const unsigned blocks = unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (a.head_dim == 128) {
    launch(attention_kernel<4>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream, a);
  } else {
    launch(attention_kernel<2>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream, a);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
