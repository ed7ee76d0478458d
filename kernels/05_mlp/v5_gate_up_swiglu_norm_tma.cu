// v5_gate_up_swiglu_norm_tma: v4_gate_up_swiglu_norm (the gate|up projection with the post-attention RMSNorm
// in the prologue and SwiGLU in the epilogue) on the persistent TMA-fed core of v9_gemv_tma (gemv_tma.cuh,
// sm_90). CTA b owns gate rows [b*inter/G, (b+1)*inter/G) and the same up rows; each ring slot receives the
// stage's gate rows and its up rows by two bulk copies completing one barrier, so a stage always holds whole
// (gate, up) pairs and the epilogue applies bf16(bf16(silu(g)) * u) with g, u rounded to bf16 first, exactly
// as v4.
#include "kernels/02_gemm/gemv_tma.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_tma::kThreads;

// PRECOND: blockDim.x == kThreads, gridDim.x == the SM count, dynamic smem plan.smem_bytes, k % 8 == 0,
// residual, norm_weight and w_gate_up 16-byte aligned (supports()).
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kThreads, gemv_tma::kMinBlocksPerSm)
    gate_up_swiglu_norm_tma_kernel(NormGateUpSwigluArgs a, gemv_tma::Plan plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  pdl_launch_dependents();
  const gemv_tma::CtaRange range = gemv_tma::cta_range(a.inter);
  if (range.count == 0) {
    pdl_wait();
    return;
  }
  gemv_tma::Pipeline<kTokens, kRows, 2> pipe(plan, smem, a.w_gate_up, a.k, range.begin, range.count, a.inter);
  pipe.start();
  gemv_fused::norm_prologue<kTokens>(a.residual, a.norm_partials, a.partial_count, a.norm_weight, a.eps, a.k,
                                     pipe.x());  // waits for the previous kernel; ends with __syncthreads
  bf16* out = a.out + range.begin;
  pipe.run([&](int item0, int items, const auto& sum) {
    for (int o = threadIdx.x; o < items * kTokens; o += kThreads) {
      const int t = o / items, p = o - t * items;
      const float g = bf16_round(sum(p, t)), u = bf16_round(sum(items + p, t));
      out[t * a.inter + item0 + p] = __float2bfloat16_rn(bf16_round(g / (1.0f + expf(-g))) * u);
    }
  });
#endif
}

gemv_tma::Plan plan_for(const NormGateUpSwigluArgs& a, int tokens, int rows) {
  const int64_t grid = gemv_tma::grid_size();
  if (grid <= 0) return {};
  return gemv_tma::make_plan(tokens, rows, a.k, (a.inter + grid - 1) / grid, 2, size_t(a.m * a.k) * 2, 0);
}

template <int kTokens>
void launch_tokens(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  constexpr int kRows = gemv_rows_for(kTokens);
  static const bool configured =
      (gemv_tma::configure_kernel((const void*)gate_up_swiglu_norm_tma_kernel<kTokens, kRows>), true);
  (void)configured;
  const gemv_tma::Plan plan = plan_for(a, kTokens, kRows);
  if (plan.stages == 0)
    throw std::invalid_argument("gate_up_swiglu_norm v5: shape does not fit (see supports)");
  launch(gate_up_swiglu_norm_tma_kernel<kTokens, kRows>, dim3(unsigned(gemv_tma::grid_size())),
         dim3(kThreads), plan.smem_bytes, stream, a, plan);
}

}  // namespace

// sm_90 only; m in [1, 8]; k % 8 == 0; residual, norm_weight, w_gate_up 16-byte aligned; the normed x plus
// one ring slot (a gate row and an up row) fit the opt-in shared memory.
bool gate_up_swiglu_norm_v5_supports(const NormGateUpSwigluArgs& a) {
  if (!gemv_tma::device_supported() || a.m < 1 || a.m > kMaxBatchTokens || a.inter < 1 || a.k < 8 ||
      a.k % 8 != 0)
    return false;
  if (reinterpret_cast<uintptr_t>(a.residual) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.norm_weight) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.w_gate_up) % 16 != 0)
    return false;
  if (a.inter >= (int64_t(1) << 30) || a.k >= (int64_t(1) << 20)) return false;
  return plan_for(a, int(a.m), gemv_rows_for(int(a.m))).stages > 0;
}

void launch_gate_up_swiglu_norm_v5(const NormGateUpSwigluArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gate_up_swiglu_norm v5",
                        [&](auto tokens) { launch_tokens<decltype(tokens)::value>(a, stream); });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
