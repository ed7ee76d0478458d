// v0_transpose: out = inᵀ for a bf16 matrix, through 32 x 32 shared-memory tiles so that both the reads of `in` and
// the writes of `out` are coalesced along rows. Runs once at load time (down_proj for v1_mlp_split_down), so it is
// the plain version only. PRECOND (supports()): ceil(rows / 32) <= 65535.
#include <cuda_runtime.h>

#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // blockDim (32, 8): each thread moves 4 elements of the tile

__global__ void __launch_bounds__(kTile * kRowsPerPass) transpose_kernel(TransposeArgs a) {
  __shared__ bf16 tile[kTile][kTile + 1];  // +1: the column reads below hit 32 different banks
  pdl_launch_dependents();
  pdl_wait();
  const int64_t c0 = int64_t(blockIdx.x) * kTile, r0 = int64_t(blockIdx.y) * kTile;
  for (int j = threadIdx.y; j < kTile; j += kRowsPerPass) {
    const int64_t r = r0 + j, c = c0 + threadIdx.x;
    if (r < a.rows && c < a.cols) tile[j][threadIdx.x] = a.in[r * a.cols + c];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kRowsPerPass) {
    const int64_t out_row = c0 + j, out_col = r0 + threadIdx.x;  // out is (cols, rows)
    if (out_row < a.cols && out_col < a.rows) a.out[out_row * a.rows + out_col] = tile[threadIdx.x][j];
  }
}

}  // namespace

bool transpose_v0_supports(const TransposeArgs& a) {
  return a.rows >= 1 && a.cols >= 1 && (a.rows + kTile - 1) / kTile <= 65535 && (a.cols + kTile - 1) / kTile <= (1ll << 31) - 1;
}

void launch_transpose_v0(const TransposeArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned((a.cols + kTile - 1) / kTile), unsigned((a.rows + kTile - 1) / kTile));
  launch(transpose_kernel, grid, dim3(kTile, kRowsPerPass), 0, stream, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
