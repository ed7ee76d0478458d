// v9_gemv_residual_tma: v7_gemv_residual (O and down projections with the residual add in the epilogue) on
// the persistent TMA-fed core of v9_gemv_tma (gemv_tma.cuh, sm_90). The residual values of the CTA's rows are
// loaded right after the PDL wait and the dot products are kept in shared memory, so the residual update and
// the CTA's sum of squares happen once, at the end, without a global-load round trip per stage. One partial
// sum of squares per CTA (gemv_residual_tma_partials: the SM count), summed in a fixed order.
#include "kernels/02_gemm/gemv_tma.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_tma::kThreads;
using gemv_tma::kWarps;

// Residual values one thread holds from the PDL wait to the epilogue: a CTA updates at most
// kResidualPerThread * kThreads values (rows per CTA x tokens; 32 x 8 = 256 for Qwen3-8B on 132 SMs).
constexpr int kResidualPerThread = 4;

// PRECOND: blockDim.x == kThreads, gridDim.x == the SM count <= kMaxNormPartials, dynamic smem
// plan.smem_bytes (its extra area holds (kTokens, rows per CTA) floats), k % 8 == 0, x and w 16-byte aligned,
// rows per CTA x kTokens <= kResidualPerThread * kThreads (supports()).
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kThreads, gemv_tma::kMinBlocksPerSm)
    gemv_residual_tma_kernel(GemvResidualArgs a, gemv_tma::Plan plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float warp_sq[kWarps][kTokens];
  pdl_launch_dependents();
  const gemv_tma::CtaRange range = gemv_tma::cta_range(a.n);
  if (range.count == 0) {  // n < grid: no rows, but a partial (0) like every CTA
    pdl_wait();
    if (threadIdx.x < kTokens) a.norm_partials[threadIdx.x * kMaxNormPartials + blockIdx.x] = 0.0f;
    return;
  }
  gemv_tma::Pipeline<kTokens, kRows, 1> pipe(plan, smem, a.w, a.k, range.begin, range.count, 0);
  pipe.start();
  pdl_wait();  // x and the residual come from previous kernels
  const int vecs = kTokens * int(a.k / 8);
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  uint4* x_smem = reinterpret_cast<uint4*>(pipe.x());
  for (int i = threadIdx.x; i < vecs; i += kThreads) x_smem[i] = __ldg(x + i);
  // Output j = t * count + r (token t, row begin + r) belongs to thread j % kThreads; its residual value is
  // loaded now and used after the main loop, which hides the load's latency.
  const int count = range.count, outputs = kTokens * count;
  bf16* residual = a.residual + range.begin;
  bf16 held[kResidualPerThread];
#pragma unroll
  for (int i = 0; i < kResidualPerThread; ++i) {
    const int j = threadIdx.x + i * kThreads;
    if (j < outputs) {
      const int t = j / count;
      held[i] = residual[t * a.n + (j - t * count)];
    }
  }
  __syncthreads();
  float* dots = pipe.template extra<float>();  // (kTokens, count): bf16-rounded x · wᵀ
  pipe.run([&](int item0, int items, const auto& sum) {
    for (int o = threadIdx.x; o < items * kTokens; o += kThreads) {
      const int t = o / items, r = o - t * items;
      dots[t * count + item0 + r] = bf16_round(sum(r, t));
    }
  });
  __syncthreads();
  float sq[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) sq[t] = 0.0f;
#pragma unroll
  for (int i = 0; i < kResidualPerThread; ++i) {
    const int j = threadIdx.x + i * kThreads;
    if (j < outputs) {
      const int t = j / count;
      const float updated = bf16_round(__bfloat162float(held[i]) + dots[j]);
      residual[t * a.n + (j - t * count)] = __float2bfloat16_rn(updated);
#pragma unroll
      for (int u = 0; u < kTokens; ++u)
        if (u == t) sq[u] += updated * updated;
    }
  }
  // Σ residual² over the CTA's rows per token: warps, then the warps in order (fixed: reproducible bits).
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const float s = warp_sum(sq[t]);
    if (lane == 0) warp_sq[warp][t] = s;
  }
  __syncthreads();
  if (threadIdx.x < kTokens) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += warp_sq[w][threadIdx.x];
    a.norm_partials[threadIdx.x * kMaxNormPartials + blockIdx.x] = total;
  }
#endif
}

int64_t rows_per_cta(int64_t n) {
  const int64_t grid = gemv_tma::grid_size();
  return grid > 0 ? (n + grid - 1) / grid : 0;
}

gemv_tma::Plan plan_for(const GemvResidualArgs& a, int tokens, int rows) {
  const int64_t per_cta = rows_per_cta(a.n);
  if (per_cta <= 0) return {};
  return gemv_tma::make_plan(tokens, rows, a.k, per_cta, 1, size_t(a.m * a.k) * 2,
                             size_t(a.m * per_cta) * sizeof(float));
}

template <int kTokens>
void launch_tokens(const GemvResidualArgs& a, cudaStream_t stream) {
  constexpr int kRows = gemv_rows_for(kTokens);
  static const bool configured =
      (gemv_tma::configure_kernel((const void*)gemv_residual_tma_kernel<kTokens, kRows>), true);
  (void)configured;
  const gemv_tma::Plan plan = plan_for(a, kTokens, kRows);
  if (plan.stages == 0) throw std::invalid_argument("gemv_residual v9: shape does not fit (see supports)");
  launch(gemv_residual_tma_kernel<kTokens, kRows>, dim3(unsigned(gemv_tma::grid_size())), dim3(kThreads),
         plan.smem_bytes, stream, a, plan);
}

}  // namespace

// One CTA per SM whatever the shape: CTAs without rows leave 0.
int64_t gemv_residual_tma_partials(int64_t /*m*/, int64_t /*n*/) {
  return gemv_tma::grid_size();
}

// sm_90 only; m in [1, 8]; k % 8 == 0; x, w 16-byte aligned; the SM count <= kMaxNormPartials; rows per CTA x
// m
// <= 1024 (the residual values held in registers: n <= ~16900 at m = 8 on 132 SMs); x plus one ring slot fit.
bool gemv_residual_v9_supports(const GemvResidualArgs& a) {
  if (!gemv_tma::device_supported() || a.m < 1 || a.m > kMaxBatchTokens || a.n < 1 || a.k < 8 || a.k % 8 != 0)
    return false;
  if (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return false;
  if (gemv_tma::grid_size() > kMaxNormPartials || a.k >= (int64_t(1) << 20)) return false;
  if (rows_per_cta(a.n) * a.m > int64_t(kResidualPerThread) * kThreads) return false;
  return plan_for(a, int(a.m), gemv_rows_for(int(a.m))).stages > 0;
}

void launch_gemv_residual_v9(const GemvResidualArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv_residual v9",
                        [&](auto tokens) { launch_tokens<decltype(tokens)::value>(a, stream); });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
