// v9_gemv_norm_tma: v8_gemv_norm (the QKV projection with the RMSNorm in the prologue) on the persistent
// TMA-fed core of v9_gemv_tma (gemv_tma.cuh, sm_90). The ring is filled before the PDL wait; the prologue
// then normalizes the residual into shared memory (gemv_fused::norm_prologue: the same bits as v8). The
// normed x takes m * k * 2 bytes of shared memory (64 KB at m = 8, k = 4096), so the ring shrinks with the
// batch.
#include "kernels/02_gemm/gemv_tma.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_tma::kThreads;

// PRECOND: blockDim.x == kThreads, gridDim.x == the SM count, dynamic smem plan.smem_bytes, k % 8 == 0,
// residual, norm_weight and w 16-byte aligned (supports()).
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kThreads, gemv_tma::kMinBlocksPerSm)
    gemv_norm_tma_kernel(NormGemvArgs a, gemv_tma::Plan plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  pdl_launch_dependents();
  const gemv_tma::CtaRange range = gemv_tma::cta_range(a.n);
  if (range.count == 0) {
    pdl_wait();
    return;
  }
  gemv_tma::Pipeline<kTokens, kRows, 1> pipe(plan, smem, a.w, a.k, range.begin, range.count, 0);
  pipe.start();
  gemv_fused::norm_prologue<kTokens>(a.residual, a.norm_partials, a.partial_count, a.norm_weight, a.eps, a.k,
                                     pipe.x());  // waits for the previous kernel; ends with __syncthreads
  bf16* y = a.y + range.begin;
  pipe.run([&](int item0, int items, const auto& sum) {
    for (int o = threadIdx.x; o < items * kTokens; o += kThreads) {
      const int t = o / items, r = o - t * items;
      y[t * a.n + item0 + r] = __float2bfloat16_rn(sum(r, t));
    }
  });
#endif
}

gemv_tma::Plan plan_for(const NormGemvArgs& a, int tokens, int rows) {
  const int64_t grid = gemv_tma::grid_size();
  if (grid <= 0) return {};
  return gemv_tma::make_plan(tokens, rows, a.k, (a.n + grid - 1) / grid, 1, size_t(a.m * a.k) * 2, 0);
}

template <int kTokens>
void launch_tokens(const NormGemvArgs& a, cudaStream_t stream) {
  constexpr int kRows = gemv_rows_for(kTokens);
  static const bool configured =
      (gemv_tma::configure_kernel((const void*)gemv_norm_tma_kernel<kTokens, kRows>), true);
  (void)configured;
  const gemv_tma::Plan plan = plan_for(a, kTokens, kRows);
  if (plan.stages == 0) throw std::invalid_argument("gemv_norm v9: shape does not fit (see supports)");
  launch(gemv_norm_tma_kernel<kTokens, kRows>, dim3(unsigned(gemv_tma::grid_size())), dim3(kThreads),
         plan.smem_bytes, stream, a, plan);
}

}  // namespace

// sm_90 only; m in [1, 8]; k % 8 == 0; residual, norm_weight, w 16-byte aligned; the normed x (m * k * 2
// bytes) plus one ring slot fit the opt-in shared memory.
bool gemv_norm_v9_supports(const NormGemvArgs& a) {
  if (!gemv_tma::device_supported() || a.m < 1 || a.m > kMaxBatchTokens || a.n < 1 || a.k < 8 || a.k % 8 != 0)
    return false;
  if (a.residual_delta != nullptr) return false;  // the delta form of the norm is in norm_prologue (v8, v10, v11)
  if (reinterpret_cast<uintptr_t>(a.residual) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.norm_weight) % 16 != 0 || reinterpret_cast<uintptr_t>(a.w) % 16 != 0)
    return false;
  if (a.n >= (int64_t(1) << 31) || a.k >= (int64_t(1) << 20)) return false;
  return plan_for(a, int(a.m), gemv_rows_for(int(a.m))).stages > 0;
}

void launch_gemv_norm_v9(const NormGemvArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv_norm v9",
                        [&](auto tokens) { launch_tokens<decltype(tokens)::value>(a, stream); });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
