// v1_embedding_stats: v0 plus the row's sum of squares in norm_partials[t][0], so layer 0's QKV projection can
// normalize the embedding itself (v8_gemv_norm) and no rmsnorm kernel runs before it.
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kThreads = 256;

// PRECOND: hidden % 8 == 0, 16-byte aligned, blockDim.x == kThreads.
__global__ void embedding_stats_kernel(const int32_t* __restrict__ ids, const bf16* __restrict__ table,
                                       bf16* __restrict__ out, int64_t hidden, float* partials) {
  __shared__ float scratch[32];
  pdl_launch_dependents();
  pdl_wait();
  const int64_t token = blockIdx.x;
  const Bf16x8* src = reinterpret_cast<const Bf16x8*>(table + int64_t(ids[token]) * hidden);
  Bf16x8* dst = reinterpret_cast<Bf16x8*>(out + token * hidden);
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden / 8; i += kThreads) {
    const Bf16x8 v = src[i];
    dst[i] = v;
    float f[8];
    bf16x8_to_float(v, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) sum_sq += f[e] * f[e];
  }
  sum_sq = block_sum(sum_sq, scratch);
  if (partials && threadIdx.x == 0) partials[token * kMaxNormPartials] = sum_sq;
}

}  // namespace

void launch_embedding_v1(const EmbeddingArgs& a, cudaStream_t stream) {
  launch(embedding_stats_kernel, dim3(unsigned(a.tokens)), dim3(kThreads), 0, stream, a.ids, a.table, a.out,
         a.hidden, a.norm_partials);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
