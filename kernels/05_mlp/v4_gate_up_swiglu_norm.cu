// v4_gate_up_swiglu_norm: v2_gate_up_swiglu with the post-attention RMSNorm in the prologue (see v8_gemv_norm):
// the MLP's first half reads the residual stream directly; no add_rmsnorm kernel runs before it.
#include "kernels/02_gemm/gemv_fused.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_fused::kThreads;
using gemv_fused::kWarpsPerBlock;

template <int kTokens, int kPairs, int kUnroll, int kEarlyGroups>
void launch_shape(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  const auto kernel = gemv_fused::gate_up_swiglu_norm_kernel<kTokens, kPairs, kUnroll, kEarlyGroups>;
  const size_t smem = size_t(kTokens) * size_t(a.k) * sizeof(bf16);
  if (smem > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned blocks = unsigned((a.inter + kWarpsPerBlock * kPairs - 1) / (kWarpsPerBlock * kPairs));
  launch(kernel, dim3(blocks), dim3(kThreads), smem, stream, a);
}

template <int kEarlyGroups>
void launch_gate_up(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gate_up_swiglu_norm v4/v6", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_pairs_for(kTokens), gemv_unroll_for(kTokens), kEarlyGroups>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gate_up_swiglu_norm_v4_supports(const NormGateUpSwigluArgs& a) {
  return a.m >= 1 && a.m <= 8 && a.k % 8 == 0 && a.m * a.k * 2 <= 200 * 1024;
}

void launch_gate_up_swiglu_norm_v4(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  launch_gate_up<1>(a, stream);
}

// v6_gate_up_swiglu_norm_early: v4 with both weight buffers of each warp loaded before the PDL wait (gemv_fused.cuh
// warp_rows, kEarlyGroups = 2). Same shapes.
bool gate_up_swiglu_norm_v6_supports(const NormGateUpSwigluArgs& a) { return gate_up_swiglu_norm_v4_supports(a); }

void launch_gate_up_swiglu_norm_v6(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  launch_gate_up<2>(a, stream);
}

}  // namespace qwen3::kernels
