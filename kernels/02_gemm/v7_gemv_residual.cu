// v7_gemv_residual: the O and down projections at decode with the residual add in the epilogue: the residual
// stream is updated in place and each block leaves the sum of squares of its new residual values, which the next
// norm GEMV turns into the RMSNorm (v8_gemv_norm, v4_gate_up_swiglu_norm). Replaces GEMV + add_rmsnorm: one
// kernel and one round trip of the sublayer output through memory less per projection.
#include "kernels/02_gemm/gemv_fused.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_fused::kThreads;
using gemv_fused::kWarpsPerBlock;

// PRECOND: k % 8 == 0, 16-byte aligned x and w, blockDim.x == kThreads, gridDim.x <= kMaxNormPartials.
template <int kTokens, int kRows, int kUnroll>
__global__ void __launch_bounds__(kThreads)
    gemv_residual_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* residual, float* partials,
                         int64_t n, int64_t k) {
  pdl_launch_dependents();
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kRows;
  const uint4* w_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) w_rows[r] = reinterpret_cast<const uint4*>(w + min(row0 + r, n - 1) * k);
  float acc[kTokens][kRows];
  gemv_fused::warp_rows<kTokens, kRows, kUnroll>(x, k, w_rows, acc, [] { pdl_wait(); });
  gemv_fused::residual_epilogue<kTokens, kRows>(acc, row0, n, residual, partials);
}

template <int kTokens, int kRows, int kUnroll>
void launch_shape(const GemvResidualArgs& a, cudaStream_t stream) {
  const unsigned blocks = unsigned((a.n + kWarpsPerBlock * kRows - 1) / (kWarpsPerBlock * kRows));
  launch(gemv_residual_kernel<kTokens, kRows, kUnroll>, dim3(blocks), dim3(kThreads), 0, stream, a.x, a.w,
         a.residual, a.norm_partials, a.n, a.k);
}

}  // namespace

int64_t gemv_residual_partials(int64_t m, int64_t n) {
  const int64_t rows_per_block = int64_t(kWarpsPerBlock) * gemv_rows_for(int(m));
  return (n + rows_per_block - 1) / rows_per_block;
}

bool gemv_residual_v7_supports(const GemvResidualArgs& a) {
  return a.m >= 1 && a.m <= 8 && a.k % 8 == 0 && gemv_residual_partials(a.m, a.n) <= kMaxNormPartials;
}

void launch_gemv_residual_v7(const GemvResidualArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv_residual v7", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_rows_for(kTokens), gemv_unroll_for(kTokens)>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
