// v9_gemv_tma: the decode GEMV as a persistent kernel fed by TMA bulk copies (gemv_tma.cuh, sm_90): one CTA
// per SM owns a contiguous span of rows and streams it through a shared-memory ring that is filled before the
// PDL wait, so the kernel is resident and ~12 MB of weights are in flight while its predecessor drains; the
// measured loss of v4..v8 was exactly that ramp-up and drain (qkv + o streamed at 71% of the read peak).
// x is copied into shared memory after the wait; y is written stage by stage.
#include "kernels/02_gemm/gemv_tma.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_tma::kThreads;

// PRECOND: blockDim.x == kThreads, gridDim.x == the SM count, dynamic smem plan.smem_bytes, k % 8 == 0,
// x and w 16-byte aligned (supports()).
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kThreads, gemv_tma::kMinBlocksPerSm)
    gemv_tma_kernel(GemmArgs a, gemv_tma::Plan plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  pdl_launch_dependents();
  const gemv_tma::CtaRange range = gemv_tma::cta_range(a.n);
  if (range.count ==
      0) {  // n < grid: nothing to compute, but the PDL chain must still wait for its predecessor
    pdl_wait();
    return;
  }
  gemv_tma::Pipeline<kTokens, kRows, 1> pipe(plan, smem, a.w, a.k, range.begin, range.count, 0);
  pipe.start();
  pdl_wait();  // x comes from the previous kernel
  const int vecs = kTokens * int(a.k / 8);
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  uint4* x_smem = reinterpret_cast<uint4*>(pipe.x());
  for (int i = threadIdx.x; i < vecs; i += kThreads) x_smem[i] = __ldg(x + i);
  __syncthreads();
  bf16* y = a.y + range.begin;
  const int64_t ldy = a.ldy > 0 ? a.ldy : a.n;  // GemmArgs::y_stride(), a host function
  pipe.run([&](int item0, int items, const auto& sum) {
    for (int o = threadIdx.x; o < items * kTokens; o += kThreads) {
      const int t = o / items, r = o - t * items;
      y[t * ldy + item0 + r] = __float2bfloat16_rn(sum(r, t));
    }
  });
#endif
}

gemv_tma::Plan plan_for(const GemmArgs& a, int tokens, int rows) {
  const int64_t grid = gemv_tma::grid_size();
  if (grid <= 0) return {};
  return gemv_tma::make_plan(tokens, rows, a.k, (a.n + grid - 1) / grid, 1, size_t(a.m * a.k) * 2, 0);
}

template <int kTokens>
void launch_tokens(const GemmArgs& a, cudaStream_t stream) {
  constexpr int kRows = gemv_rows_for(kTokens);
  static const bool configured =
      (gemv_tma::configure_kernel((const void*)gemv_tma_kernel<kTokens, kRows>), true);
  (void)configured;
  const gemv_tma::Plan plan = plan_for(a, kTokens, kRows);
  if (plan.stages == 0) throw std::invalid_argument("gemv v9: shape does not fit (see gemm_v9_supports)");
  launch(gemv_tma_kernel<kTokens, kRows>, dim3(unsigned(gemv_tma::grid_size())), dim3(kThreads),
         plan.smem_bytes, stream, a, plan);
}

}  // namespace

// sm_90 only; m in [1, 8]; k % 8 == 0 (16-byte vectors and bulk-copy sizes); x, w 16-byte aligned (bulk-copy
// sources); x (m * k * 2 bytes) plus one ring slot of rows fit the opt-in shared memory (e.g. m = 8, k =
// 12288 just fits: 192 KB + one 24 KB slot, unpipelined).
bool gemm_v9_supports(const GemmArgs& a) {
  if (!gemv_tma::device_supported() || a.m < 1 || a.m > kMaxBatchTokens || a.n < 1 || a.k < 8 || a.k % 8 != 0)
    return false;
  if (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return false;
  if (a.n >= (int64_t(1) << 31) || a.k >= (int64_t(1) << 20)) return false;
  return plan_for(a, int(a.m), gemv_rows_for(int(a.m))).stages > 0;
}

void launch_gemm_v9(const GemmArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv v9",
                        [&](auto tokens) { launch_tokens<decltype(tokens)::value>(a, stream); });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
