// v0_rope: one block per token, one thread per (head, pair), in place on q and k. The unfused path: QK-norm runs
// before it (rmsnorm over head_dim) and the KV-cache store after it (v0_kv_write).
#include "kernels/03_rope/rope_math.cuh"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

__global__ void rope_kernel(bf16* q, bf16* k, const int32_t* __restrict__ positions,
                            const float* __restrict__ inv_freq, float attention_factor, int64_t q_heads,
                            int64_t kv_heads, int64_t head_dim) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t token = blockIdx.x;
  const int64_t half = head_dim / 2;
  const int32_t position = positions[token];
  const int64_t pairs = (q_heads + kv_heads) * half;
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int64_t head = p / half, i = p % half;
    bf16* base = head < q_heads ? q + (token * q_heads + head) * head_dim
                                : k + (token * kv_heads + (head - q_heads)) * head_dim;
    float c, s, o1, o2;
    rope_cos_sin_bf16(position, inv_freq[i], attention_factor, c, s);
    rope_rotate_pair(__bfloat162float(base[i]), __bfloat162float(base[i + half]), c, s, o1, o2);
    base[i] = __float2bfloat16_rn(o1);
    base[i + half] = __float2bfloat16_rn(o2);
  }
}

__global__ void kv_write_kernel(const bf16* __restrict__ k, const bf16* __restrict__ v, bf16* __restrict__ k_cache,
                                bf16* __restrict__ v_cache, const int32_t* __restrict__ positions,
                                const int32_t* __restrict__ slots, int64_t kv_width, int64_t max_ctx,
                                int64_t k_row_stride, int64_t v_row_stride) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t token = blockIdx.x;
  const int64_t slot = slots ? slots[token] : 0;
  const int64_t dst = (slot * max_ctx + positions[token]) * kv_width;
  for (int64_t i = threadIdx.x; i < kv_width; i += blockDim.x) {
    k_cache[dst + i] = k[token * k_row_stride + i];
    v_cache[dst + i] = v[token * v_row_stride + i];
  }
}

}  // namespace

void launch_rope_v0(const RopeArgs& a, cudaStream_t stream) {
  launch(rope_kernel, dim3(unsigned(a.tokens)), dim3(256), 0, stream, a.q, a.k, a.positions, a.inv_freq, a.attention_factor,
                                                       a.q_heads, a.kv_heads, a.head_dim);
  CUDA_CHECK_LAUNCH();
}

void launch_kv_write_v0(const KvWriteArgs& a, cudaStream_t stream) {
  launch(kv_write_kernel, dim3(unsigned(a.tokens)), dim3(256), 0, stream, a.k, a.v, a.k_cache, a.v_cache, a.positions, a.slots,
                                                          a.kv_heads * a.head_dim, a.max_ctx, a.k_row_stride,
                                                          a.v_row_stride);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
