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

// PRECOND: k % 8 == 0, 16-byte aligned, blockDim.x == kThreads, dynamic shared memory kTokens * k * 2 bytes.
template <int kTokens, int kPairs, int kUnroll>
__global__ void __launch_bounds__(kThreads) gate_up_swiglu_norm_kernel(NormGateUpSwigluArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* x = reinterpret_cast<bf16*>(smem_raw);  // (kTokens, k): the normed residual
  pdl_launch_dependents();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t i0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kPairs;
  const uint4* w_rows[2 * kPairs];
#pragma unroll
  for (int p = 0; p < kPairs; ++p) {
    const int64_t i = min(i0 + p, a.inter - 1);
    w_rows[2 * p] = reinterpret_cast<const uint4*>(a.w_gate_up + i * a.k);
    w_rows[2 * p + 1] = reinterpret_cast<const uint4*>(a.w_gate_up + (a.inter + i) * a.k);
  }
  float acc[kTokens][2 * kPairs];
  gemv_fused::warp_rows<kTokens, 2 * kPairs, kUnroll>(x, a.k, w_rows, acc, [&] {
    gemv_fused::norm_prologue<kTokens>(a.residual, a.norm_partials, a.partial_count, a.norm_weight, a.eps, a.k, x);
  });
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      if (lane != p || i0 + p >= a.inter) continue;
      const float g = bf16_round(acc[t][2 * p]), u = bf16_round(acc[t][2 * p + 1]);
      a.out[t * a.inter + i0 + p] = __float2bfloat16_rn(bf16_round(g / (1.0f + expf(-g))) * u);
    }
}

template <int kTokens, int kPairs, int kUnroll>
void launch_shape(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  const size_t smem = size_t(kTokens) * size_t(a.k) * sizeof(bf16);
  if (smem > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(gate_up_swiglu_norm_kernel<kTokens, kPairs, kUnroll>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned blocks = unsigned((a.inter + kWarpsPerBlock * kPairs - 1) / (kWarpsPerBlock * kPairs));
  launch(gate_up_swiglu_norm_kernel<kTokens, kPairs, kUnroll>, dim3(blocks), dim3(kThreads), smem, stream, a);
}

}  // namespace

bool gate_up_swiglu_norm_v4_supports(const NormGateUpSwigluArgs& a) {
  return a.m >= 1 && a.m <= 8 && a.k % 8 == 0 && a.m * a.k * 2 <= 200 * 1024;
}

void launch_gate_up_swiglu_norm_v4(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gate_up_swiglu_norm v4", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_pairs_for(kTokens), gemv_unroll_for(kTokens)>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
