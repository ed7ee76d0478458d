// v0_embedding: one block per token copies its table row with 16-byte vectors. Already at the copy limit: the op
// moves tokens * hidden * 2 bytes, a few KB per decode step.
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

// PRECOND: hidden % 8 == 0, table and out 16-byte aligned.
__global__ void embedding_kernel(const int32_t* __restrict__ ids, const bf16* __restrict__ table,
                                 bf16* __restrict__ out, int64_t hidden) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t token = blockIdx.x;
  const int64_t id = ids[token];
  const uint4* src = reinterpret_cast<const uint4*>(table + id * hidden);
  uint4* dst = reinterpret_cast<uint4*>(out + token * hidden);
  for (int64_t i = threadIdx.x; i < hidden / 8; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

void launch_embedding_v0(const EmbeddingArgs& a, cudaStream_t stream) {
  launch(embedding_kernel, dim3(unsigned(a.tokens)), dim3(128), 0, stream, a.ids, a.table, a.out, a.hidden);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
