// v3_gemm_mma: the prefill GEMM on tensor cores with instructions both targets have (sm_89 and sm_90a):
// mma.sync m16n8k16 bf16 -> fp32, ldmatrix fragment loads, and a 4-stage cp.async pipeline so the next tiles
// stream into shared memory while the current one is multiplied.
//  * Block tile 128 x 128 x 32, 8 warps as 2 (m) x 4 (n), each warp 64 x 32 (4 x 4 mma tiles, 64 fp32 accumulators).
//  * Shared rows padded from 64 to 80 bytes: the 8 rows an ldmatrix reads land in 8 disjoint bank groups.
//  * Grid x runs over m tiles, so consecutive blocks reuse one weight tile from L2: the weight matrix (the large
//    operand) is read from HBM about once, the activations (T x k) stay in L2.
// Rejected for now: wgmma/TMA (Hopper only; the next version), split-K (prefill shapes already fill 132 SMs).
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 32;
constexpr int kStages = 4;
constexpr int kThreads = 256;
constexpr int kRowStride = kBlockK + 8;  // bf16 elements per padded shared-memory row
constexpr int kTileElems = kBlockM * kRowStride;
constexpr size_t kSmemBytes = size_t(kStages) * 2 * kTileElems * sizeof(bf16);

// Copies one 128 x 32 tile of a row-major (rows, k) matrix into shared memory; rows >= rows and columns >= k
// are zero-filled. PRECOND: k % 8 == 0.
__device__ __forceinline__ void load_tile(bf16* smem, const bf16* __restrict__ g, int64_t row0, int64_t rows,
                                          int64_t k0, int64_t k) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int chunk = threadIdx.x + j * kThreads;  // 512 chunks of 16 bytes
    const int r = chunk / 4, c = (chunk % 4) * 8;
    const int64_t gr = row0 + r, gc = k0 + c;
    const bool inside = gr < rows && gc < k;
    const bf16* src = inside ? g + gr * k + gc : g;
    cp_async_16B_zfill(smem + r * kRowStride + c, src, inside ? 16 : 0);
  }
}

// PRECOND: blockDim.x == kThreads, k % 8 == 0, x and w 16-byte aligned, dynamic shared memory kSmemBytes.
__global__ void __launch_bounds__(kThreads) gemm_mma_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                             bf16* __restrict__ y, int64_t m, int64_t n, int64_t k,
                                                             int64_t ldy) {
  pdl_launch_dependents();
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* smem = reinterpret_cast<bf16*>(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / 4, warp_n = warp % 4;
  const int64_t block_m = int64_t(blockIdx.x) * kBlockM, block_n = int64_t(blockIdx.y) * kBlockN;
  const int k_tiles = int((k + kBlockK - 1) / kBlockK);

  auto a_tile = [&](int stage) { return smem + stage * 2 * kTileElems; };
  auto b_tile = [&](int stage) { return smem + stage * 2 * kTileElems + kTileElems; };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) {
      load_tile(a_tile(s), x, block_m, m, int64_t(s) * kBlockK, k);
      load_tile(b_tile(s), w, block_n, n, int64_t(s) * kBlockK, k);
    }
    cp_async_commit();
  }

  float acc[4][4][4] = {};
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt visible to all warps; every warp is done with tile kt - 1
    const int next = kt + kStages - 1;
    if (next < k_tiles) {
      load_tile(a_tile(next % kStages), x, block_m, m, int64_t(next) * kBlockK, k);
      load_tile(b_tile(next % kStages), w, block_n, n, int64_t(next) * kBlockK, k);
    }
    cp_async_commit();

    const bf16* a = a_tile(kt % kStages);
    const bf16* b = b_tile(kt % kStages);
#pragma unroll
    for (int kk = 0; kk < kBlockK; kk += 16) {
      uint32_t a_frag[4][4], b_frag[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const int row = warp_m * 64 + mi * 16 + (lane % 16);
        ldmatrix_x4(a_frag[mi], a + row * kRowStride + kk + (lane / 16) * 8);
      }
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        const int row = warp_n * 32 + nj * 16 + (lane % 8) + (lane / 16) * 8;
        uint32_t r[4];
        ldmatrix_x4(r, b + row * kRowStride + kk + ((lane / 8) % 2) * 8);
        b_frag[2 * nj][0] = r[0];
        b_frag[2 * nj][1] = r[1];
        b_frag[2 * nj + 1][0] = r[2];
        b_frag[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_bf16_16816(acc[mi][ni], a_frag[mi], b_frag[ni]);
    }
  }
  cp_async_wait<0>();

  // Accumulator layout: c0, c1 at (row lane/4, cols 2*(lane%4) + {0, 1}); c2, c3 eight rows below.
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t row = block_m + warp_m * 64 + mi * 16 + lane / 4 + half * 8;
        const int64_t col = block_n + warp_n * 32 + ni * 8 + 2 * (lane % 4);
        if (row >= m) continue;
        const float v0 = acc[mi][ni][2 * half], v1 = acc[mi][ni][2 * half + 1];
        bf16* out = y + row * ldy + col;
        if (col + 1 < n && ldy % 2 == 0) {
          *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
        } else {
          if (col < n) out[0] = __float2bfloat16_rn(v0);
          if (col + 1 < n) out[1] = __float2bfloat16_rn(v1);
        }
      }
}

}  // namespace

bool gemm_v3_supports(const GemmArgs& a) { return a.k % 8 == 0; }

void launch_gemm_v3(const GemmArgs& a, cudaStream_t stream) {
  static bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
    return true;
  }();
  (void)configured;
  const dim3 grid(unsigned((a.m + kBlockM - 1) / kBlockM), unsigned((a.n + kBlockN - 1) / kBlockN));
  launch(gemm_mma_kernel, dim3(grid), dim3(kThreads), kSmemBytes, stream, a.x, a.w, a.y, a.m, a.n, a.k, a.y_stride());
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
