// v4_gemv_pdl: v2's streaming GEMV made for programmatic dependent launch and deeper pipelining (gemv_core.cuh):
// weight loads double-buffered (8 chunks in flight per lane at batch 1 instead of 4) and the first group issued
// before waiting for the previous kernel, so consecutive GEMVs overlap instead of draining the memory pipe.
#include "kernels/02_gemm/gemv_core.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

// PRECOND: k % 8 == 0, 16-byte aligned x and w, blockDim.x == kWarpsPerBlock * 32.
template <int kTokens, int kRows, int kUnroll>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    gemv_pdl_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y, int64_t n,
                    int64_t k, int64_t ldy) {
  pdl_launch_dependents();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kRows;
  if (row0 >= n) {
    pdl_wait();
    return;
  }
  const uint4* w_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) w_rows[r] = reinterpret_cast<const uint4*>(w + min(row0 + r, n - 1) * k);
  float acc[kTokens][kRows];
  gemv_warp_rows<kTokens, kRows, kUnroll>(x, k, w_rows, acc);
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (lane == r && row0 + r < n) y[t * ldy + row0 + r] = __float2bfloat16_rn(acc[t][r]);
}

template <int kTokens, int kRows, int kUnroll>
void launch_shape(const GemmArgs& a, cudaStream_t stream) {
  const int64_t rows_per_block = int64_t(kWarpsPerBlock) * kRows;
  const unsigned blocks = unsigned((a.n + rows_per_block - 1) / rows_per_block);
  launch(gemv_pdl_kernel<kTokens, kRows, kUnroll>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream, a.x,
         a.w, a.y, a.n, a.k, a.y_stride());
}

}  // namespace

bool gemm_v4_supports(const GemmArgs& a) { return a.m >= 1 && a.m <= 8 && a.k % 8 == 0; }

void launch_gemm_v4(const GemmArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv v4", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_rows_for(kTokens), gemv_unroll_for(kTokens)>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
