// v0_add: the residual add h = bf16(h + delta), 8 elements per thread. The unfused path runs it before each
// rmsnorm; the fused path folds it into add_rmsnorm.
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

// PRECOND: n % 8 == 0, 16-byte aligned.
__global__ void add_kernel(bf16* h, const bf16* __restrict__ delta, int64_t vecs) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= vecs) return;
  float a[8], b[8];
  bf16x8_to_float(reinterpret_cast<const Bf16x8*>(h)[i], a);
  bf16x8_to_float(reinterpret_cast<const Bf16x8*>(delta)[i], b);
#pragma unroll
  for (int e = 0; e < 8; ++e) a[e] += b[e];
  reinterpret_cast<Bf16x8*>(h)[i] = float_to_bf16x8(a);
}

}  // namespace

bool add_v0_supports(const AddArgs& a) { return a.n % 8 == 0; }

void launch_add_v0(const AddArgs& a, cudaStream_t stream) {
  const int64_t vecs = a.n / 8;
  launch(add_kernel, dim3(unsigned((vecs + 255) / 256)), dim3(256), 0, stream, a.h, a.delta, vecs);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
