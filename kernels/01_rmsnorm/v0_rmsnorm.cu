// v0_rmsnorm: one block per row, scalar loads, two passes over the row (sum of squares, then scale).
// Also v0_add_rmsnorm, the residual add and the norm in one block but still scalar.
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kThreads = 256;

// PRECOND: blockDim.x == kThreads; y may alias x (each element is read before it is written by the same thread).
__global__ void rmsnorm_kernel(const bf16* x, const bf16* __restrict__ weight, bf16* y, int64_t n, float eps) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float scratch[32];
  const bf16* row = x + blockIdx.x * n;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = __bfloat162float(row[i]);
    sum_sq += v * v;
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float inv_rms = 1.0f / sqrtf(sum_sq / float(n) + eps);
  bf16* out = y + blockIdx.x * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float normalized = bf16_round(__bfloat162float(row[i]) * inv_rms);  // .to(bf16) before the weight
    out[i] = __float2bfloat16_rn(__bfloat162float(weight[i]) * normalized);
  }
}

__global__ void add_rmsnorm_kernel(bf16* residual, const bf16* __restrict__ delta, const bf16* __restrict__ weight,
                                   bf16* __restrict__ y, int64_t n, float eps) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float scratch[32];
  bf16* row = residual + blockIdx.x * n;
  const bf16* d = delta + blockIdx.x * n;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const bf16 sum = __float2bfloat16_rn(__bfloat162float(row[i]) + __bfloat162float(d[i]));
    row[i] = sum;
    const float v = __bfloat162float(sum);
    sum_sq += v * v;
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float inv_rms = 1.0f / sqrtf(sum_sq / float(n) + eps);
  bf16* out = y + blockIdx.x * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float normalized = bf16_round(__bfloat162float(row[i]) * inv_rms);
    out[i] = __float2bfloat16_rn(__bfloat162float(weight[i]) * normalized);
  }
}

}  // namespace

void launch_rmsnorm_v0(const RmsnormArgs& a, cudaStream_t stream) {
  launch(rmsnorm_kernel, dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a.x, a.weight, a.y, a.n, a.eps);
  CUDA_CHECK_LAUNCH();
}

void launch_add_rmsnorm_v0(const AddRmsnormArgs& a, cudaStream_t stream) {
  launch(add_rmsnorm_kernel, dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a.residual, a.delta, a.weight, a.y, a.n, a.eps);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
