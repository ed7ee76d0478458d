// v0_gemm_naive: one thread per output element, scalar loads, fp32 accumulation. The correctness baseline for
// every shape: neighbouring threads read different weight rows, so loads are uncoalesced and nothing is reused.
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

__global__ void gemm_naive_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y,
                                  int64_t n, int64_t k, int64_t ldy) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = blockIdx.y;
  if (col >= n) return;
  const bf16* xr = x + row * k;
  const bf16* wr = w + col * k;
  float acc = 0.0f;
  for (int64_t i = 0; i < k; ++i) acc += __bfloat162float(xr[i]) * __bfloat162float(wr[i]);
  y[row * ldy + col] = __float2bfloat16_rn(acc);
}

}  // namespace

void launch_gemm_v0(const GemmArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned((a.n + 255) / 256), unsigned(a.m));
  launch(gemm_naive_kernel, dim3(grid), dim3(256), 0, stream, a.x, a.w, a.y, a.n, a.k, a.y_stride());
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
