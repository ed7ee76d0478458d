// v1_qk_norm_rope_cache: QK-norm, RoPE and the KV-cache store in one pass over the fused QKV projection output,
// where the unfused path makes four (rmsnorm q, rmsnorm k, rope, kv_write) and re-reads q and k each time.
// One warp per head (qk_norm_rope.cuh): each RoPE pair (j, j + head_dim/2) sits in one lane and needs no shuffle.
#include "kernels/03_rope/qk_norm_rope.cuh"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// PRECOND: head_dim == 64 * kPerLane; blockDim.x == kWarpsPerBlock * 32.
// Warps [0, q_heads) of a token normalize+rotate q heads; [q_heads, q_heads + kv_heads) do k heads and copy v.
template <int kPerLane>
__global__ void qk_norm_rope_cache_kernel(QkNormRopeCacheArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  constexpr int kHeadDim = 64 * kPerLane;
  constexpr int kHalf = kHeadDim / 2;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t heads_per_token = a.q_heads + a.kv_heads;
  const int64_t global_warp = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (global_warp >= a.tokens * heads_per_token) return;
  const int64_t token = global_warp / heads_per_token;
  const int64_t head = global_warp % heads_per_token;
  const bool is_q = head < a.q_heads;
  const int64_t qkv_width = (a.q_heads + 2 * a.kv_heads) * kHeadDim;
  const bf16* src = a.qkv + token * qkv_width + head * kHeadDim;  // k heads follow the q heads in the row
  const bf16* norm_w = is_q ? a.q_norm : a.k_norm;

  const int32_t position = a.positions[token];
  float lo[kPerLane], hi[kPerLane];
  qk_norm_rope_warp<kPerLane>(src, norm_w, a.eps, position, a.inv_freq, a.attention_factor, lo, hi);
  bf16* dst;
  if (is_q) {
    dst = a.q_out + (token * a.q_heads + head) * kHeadDim;
  } else {
    const int64_t slot = a.slots ? a.slots[token] : 0;
    dst = a.k_cache + ((slot * a.max_ctx + position) * a.kv_heads + (head - a.q_heads)) * kHeadDim;
  }
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    dst[lane * kPerLane + e] = __float2bfloat16_rn(lo[e]);
    dst[kHalf + lane * kPerLane + e] = __float2bfloat16_rn(hi[e]);
  }
  if (!is_q) {  // v: copied as is
    const int64_t kv_head = head - a.q_heads;
    const bf16* v_src = a.qkv + token * qkv_width + (a.q_heads + a.kv_heads + kv_head) * kHeadDim;
    const int64_t slot = a.slots ? a.slots[token] : 0;
    bf16* v_dst = a.v_cache + ((slot * a.max_ctx + position) * a.kv_heads + kv_head) * kHeadDim;
    for (int i = lane; i < kHeadDim; i += kWarpSize) v_dst[i] = v_src[i];
  }
}

}  // namespace

bool qk_norm_rope_cache_v1_supports(const QkNormRopeCacheArgs& a) { return a.head_dim == 64 || a.head_dim == 128; }

void launch_qk_norm_rope_cache_v1(const QkNormRopeCacheArgs& a, cudaStream_t stream) {
  const int64_t warps = a.tokens * (a.q_heads + a.kv_heads);
  const unsigned blocks = unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (a.head_dim == 128) {
    launch(qk_norm_rope_cache_kernel<2>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream, a);
  } else {
    launch(qk_norm_rope_cache_kernel<1>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream, a);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
