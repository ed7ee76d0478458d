// v2_gemv_stream: v1 made to stream at the memory limit.
//  * Several 16-byte weight loads in flight per lane (kUnroll chunks x kRows rows issued before any math), so each
//    SM keeps enough bytes in flight to cover HBM latency (Little's law: ~4.5 TB/s x ~1 us / 132 SMs).
//  * Weights read with an L2 evict-first policy and no L1 allocation: each weight byte is used once per step.
//  * With several tokens (batch > 1) a warp computes kRows rows, so every activation load from L1 feeds kRows
//    rows instead of one (at m = 8, one row per warp would need 8 bytes of L1 traffic per weight byte).
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;

__device__ __forceinline__ void fma8(float& acc, const uint4& w, const uint4& x) {
  float wf[8], xf[8];
  bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w), wf);
  bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x), xf);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc += wf[e] * xf[e];
}

// PRECOND: k % 8 == 0, 16-byte aligned x and w, 1 <= kTokens <= 8.
template <int kTokens, int kRows>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    gemv_stream_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y, int64_t n,
                       int64_t k, int64_t ldy) {
  pdl_launch_dependents();
  pdl_wait();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kRows;
  if (row0 >= n) return;
  const uint64_t policy = make_evict_first_policy();
  const int64_t vecs = k / 8;  // 16-byte chunks per row
  const uint4* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = reinterpret_cast<const uint4*>(w + min(row0 + r, n - 1) * k);
  const uint4* xrow = reinterpret_cast<const uint4*>(x);

  float acc[kTokens][kRows] = {};
  int64_t v = lane;
  for (; v + (kUnroll - 1) * kWarpSize < vecs; v += kUnroll * kWarpSize) {
    uint4 wv[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) wv[u][r] = load_stream_16B(wrow[r] + v + u * kWarpSize, policy);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const uint4 xv = __ldg(xrow + t * vecs + v + u * kWarpSize);
#pragma unroll
        for (int r = 0; r < kRows; ++r) fma8(acc[t][r], wv[u][r], xv);
      }
  }
  for (; v < vecs; v += kWarpSize) {  // tail: fewer than kUnroll chunks left for this lane
    uint4 wv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) wv[r] = load_stream_16B(wrow[r] + v, policy);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const uint4 xv = __ldg(xrow + t * vecs + v);
#pragma unroll
      for (int r = 0; r < kRows; ++r) fma8(acc[t][r], wv[r], xv);
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float sum = warp_sum(acc[t][r]);
      if (lane == r && row0 + r < n) y[t * ldy + row0 + r] = __float2bfloat16_rn(sum);
    }
}

template <int kTokens, int kRows>
void launch_shape(const GemmArgs& a, cudaStream_t stream) {
  const int64_t rows_per_block = int64_t(kWarpsPerBlock) * kRows;
  const unsigned blocks = unsigned((a.n + rows_per_block - 1) / rows_per_block);
  launch(gemv_stream_kernel<kTokens, kRows>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream, a.x, a.w, a.y, a.n, a.k, a.y_stride());
}

}  // namespace

bool gemm_v2_supports(const GemmArgs& a) { return a.m >= 1 && a.m <= 8 && a.k % 8 == 0; }

void launch_gemm_v2(const GemmArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gemv v2", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_rows_for(kTokens)>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
