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

template <int kTokens, int kRows, int kUnroll>
void launch_shape(const NormGemvArgs& a, cudaStream_t stream) {
  const size_t smem = size_t(kTokens) * size_t(a.k) * sizeof(bf16);
  if (smem > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(gemv_fused::norm_gemv_kernel<kTokens, kRows, kUnroll>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned blocks = unsigned((a.n + kWarpsPerBlock * kRows - 1) / (kWarpsPerBlock * kRows));
  launch(gemv_fused::norm_gemv_kernel<kTokens, kRows, kUnroll>, dim3(blocks), dim3(kThreads), smem, stream, a);
}

}  // namespace

bool gemv_norm_v8_supports(const NormGemvArgs& a) {
  return a.m >= 1 && a.m <= 8 && a.k % 8 == 0 && a.m * a.k * 2 <= 200 * 1024 &&
         reinterpret_cast<uintptr_t>(a.residual_delta) % 16 == 0 && a.delta_copies >= 1;  // (float4 loads)
}

void launch_gemv_norm_v8(const NormGemvArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv_norm v8", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_rows_for(kTokens), gemv_unroll_for(kTokens)>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
