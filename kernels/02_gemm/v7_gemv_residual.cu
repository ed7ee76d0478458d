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

template <int kTokens, int kRows, int kUnroll, int kEarlyGroups>
void launch_shape(const GemvResidualArgs& a, cudaStream_t stream) {
  const unsigned blocks = unsigned((a.n + kWarpsPerBlock * kRows - 1) / (kWarpsPerBlock * kRows));
  launch(gemv_fused::residual_gemv_kernel<kTokens, kRows, kUnroll, kEarlyGroups>, dim3(blocks), dim3(kThreads), 0,
         stream, a.x, a.w, a.residual, a.norm_partials, a.n, a.k, a.pdl_trigger);
}

template <int kEarlyGroups>
void launch_residual(const GemvResidualArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv_residual v7/v10", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_rows_for(kTokens), gemv_unroll_for(kTokens), kEarlyGroups>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t gemv_residual_partials(int64_t m, int64_t n) {
  const int64_t rows_per_block = int64_t(kWarpsPerBlock) * gemv_rows_for(int(m));
  return (n + rows_per_block - 1) / rows_per_block;
}

bool gemv_residual_v7_supports(const GemvResidualArgs& a) {
  return a.m >= 1 && a.m <= 8 && a.k % 8 == 0 && gemv_residual_partials(a.m, a.n) <= kMaxNormPartials;
}

void launch_gemv_residual_v7(const GemvResidualArgs& a, cudaStream_t stream) { launch_residual<1>(a, stream); }

// v10_gemv_residual_early: v7 with both weight buffers of each warp loaded before the PDL wait (gemv_fused.cuh
// warp_rows, kEarlyGroups = 2): while the attention kernel before the O projection runs, twice the O weights are
// already in flight. Same grid, so the same partial count as v7.
bool gemv_residual_v10_supports(const GemvResidualArgs& a) { return gemv_residual_v7_supports(a); }

void launch_gemv_residual_v10(const GemvResidualArgs& a, cudaStream_t stream) { launch_residual<2>(a, stream); }

}  // namespace qwen3::kernels
