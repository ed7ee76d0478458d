// v1_gate_up_swiglu: the decode MLP's first half in one kernel. v0 is the fused gate|up GEMV followed by
// v0_silu_mul, which writes (m, 2 * inter) activations and reads them back; here each warp streams gate row i and
// up row i together (gemv_core.cuh: evict-first 16-byte loads, double-buffered, PDL prefetch) and applies SwiGLU
// to the two sums in registers.
#include "kernels/02_gemm/gemv_core.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

// PRECOND: k % 8 == 0, 16-byte aligned x and w, blockDim.x == kWarpsPerBlock * 32.
template <int kTokens, int kPairs, int kUnroll>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    gate_up_swiglu_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ out,
                          int64_t inter, int64_t k) {
  pdl_launch_dependents();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t i0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kPairs;
  if (i0 >= inter) {
    pdl_wait();
    return;
  }
  const uint4* w_rows[2 * kPairs];
#pragma unroll
  for (int p = 0; p < kPairs; ++p) {
    const int64_t i = min(i0 + p, inter - 1);
    w_rows[2 * p] = reinterpret_cast<const uint4*>(w + i * k);              // gate_proj row i
    w_rows[2 * p + 1] = reinterpret_cast<const uint4*>(w + (inter + i) * k);  // up_proj row i
  }
  float acc[kTokens][2 * kPairs];
  gemv_warp_rows<kTokens, 2 * kPairs, kUnroll>(x, k, w_rows, acc);
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      if (lane != p || i0 + p >= inter) continue;
      const float g = bf16_round(acc[t][2 * p]), u = bf16_round(acc[t][2 * p + 1]);
      out[t * inter + i0 + p] = __float2bfloat16_rn(bf16_round(g / (1.0f + expf(-g))) * u);
    }
}

template <int kTokens, int kPairs, int kUnroll>
void launch_shape(const GateUpSwigluArgs& a, cudaStream_t stream) {
  const int64_t pairs_per_block = int64_t(kWarpsPerBlock) * kPairs;
  const unsigned blocks = unsigned((a.inter + pairs_per_block - 1) / pairs_per_block);
  launch(gate_up_swiglu_kernel<kTokens, kPairs, kUnroll>, dim3(blocks), dim3(kWarpsPerBlock * kWarpSize), 0, stream,
         a.x, a.w_gate_up, a.out, a.inter, a.k);
}

}  // namespace

bool gate_up_swiglu_v1_supports(const GateUpSwigluArgs& a) { return a.m >= 1 && a.m <= 8 && a.k % 8 == 0; }

void launch_gate_up_swiglu_v1(const GateUpSwigluArgs& a, cudaStream_t stream) {
  dispatch_batch_tokens(a.m, "gate_up_swiglu v1", [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    launch_shape<kTokens, gemv_pairs_for(kTokens), gemv_unroll_for(kTokens)>(a, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
