// v1_gemv_warp: the decode GEMV. One warp per weight row; lanes read consecutive 16-byte chunks, so a warp streams
// its row with fully coalesced 512-byte loads, and the m <= 8 activation rows (a few KB) stay in L1/L2.
// Reduction across lanes with shuffles. One load in flight per lane at a time: latency bound (see v2).
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// PRECOND: k % 8 == 0, x/w 16-byte aligned, 1 <= kTokens <= 8.
template <int kTokens>
__global__ void gemv_warp_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y,
                                 int64_t n, int64_t k, int64_t ldy) {
  pdl_launch_dependents();
  pdl_wait();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const Bf16x8* wr = reinterpret_cast<const Bf16x8*>(w + row * k);
  float acc[kTokens] = {};
  for (int64_t v = lane; v < k / 8; v += kWarpSize) {
    float wf[8];
    bf16x8_to_float(wr[v], wf);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float xf[8];
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(x + t * k)[v], xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[t] += wf[e] * xf[e];
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const float sum = warp_sum(acc[t]);
    if (lane == 0) y[t * ldy + row] = __float2bfloat16_rn(sum);
  }
}

template <int kTokens>
void launch_tokens(const GemmArgs& a, cudaStream_t stream) {
  const unsigned blocks = unsigned((a.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch(gemv_warp_kernel<kTokens>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream, a.x, a.w, a.y, a.n, a.k, a.y_stride());
}

}  // namespace

bool gemm_v1_supports(const GemmArgs& a) { return a.m >= 1 && a.m <= 8 && a.k % 8 == 0; }

void launch_gemm_v1(const GemmArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv v1", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_tokens<kTokens>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
