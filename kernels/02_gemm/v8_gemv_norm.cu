// v8_gemv_norm: the QKV projection at decode with the RMSNorm in the prologue: each block normalizes the residual
// into shared memory from the previous residual GEMV's partial sums of squares (no add_rmsnorm kernel, no normed
// activations in memory), then streams its weight rows as v5 does. The weight loads of the first group are issued
// before the PDL wait, so they overlap the previous kernel and this prologue.
#include "kernels/02_gemm/gemv_fused.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_fused::kThreads;
using gemv_fused::kWarpsPerBlock;

// PRECOND: k % 8 == 0, 16-byte aligned, blockDim.x == kThreads, dynamic shared memory kTokens * k * 2 bytes.
template <int kTokens, int kRows, int kUnroll>
__global__ void __launch_bounds__(kThreads) gemv_norm_kernel(NormGemvArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* x = reinterpret_cast<bf16*>(smem_raw);  // (kTokens, k): the normed residual
  pdl_launch_dependents();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kRows;
  const uint4* w_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) w_rows[r] = reinterpret_cast<const uint4*>(a.w + min(row0 + r, a.n - 1) * a.k);
  float acc[kTokens][kRows];
  gemv_fused::warp_rows<kTokens, kRows, kUnroll>(x, a.k, w_rows, acc, [&] {
    gemv_fused::norm_prologue<kTokens>(a.residual, a.norm_partials, a.partial_count, a.norm_weight, a.eps, a.k, x);
  });
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (lane == r && row0 + r < a.n) a.y[t * a.n + row0 + r] = __float2bfloat16_rn(acc[t][r]);
}

template <int kTokens, int kRows, int kUnroll>
void launch_shape(const NormGemvArgs& a, cudaStream_t stream) {
  const size_t smem = size_t(kTokens) * size_t(a.k) * sizeof(bf16);
  if (smem > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(gemv_norm_kernel<kTokens, kRows, kUnroll>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned blocks = unsigned((a.n + kWarpsPerBlock * kRows - 1) / (kWarpsPerBlock * kRows));
  launch(gemv_norm_kernel<kTokens, kRows, kUnroll>, dim3(blocks), dim3(kThreads), smem, stream, a);
}

}  // namespace

bool gemv_norm_v8_supports(const NormGemvArgs& a) {
  return a.m >= 1 && a.m <= 8 && a.k % 8 == 0 && a.m * a.k * 2 <= 200 * 1024;
}

void launch_gemv_norm_v8(const NormGemvArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv_norm v8", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_rows_for(kTokens), gemv_unroll_for(kTokens)>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
