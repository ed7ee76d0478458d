// v0_silu_mul: SwiGLU activation on the fused gate|up projection output, 8 elements per thread with 16-byte
// accesses. silu(gate) is computed in fp32 and rounded to bf16 (torch's bf16 silu), then multiplied by up and
// rounded again (the bf16 elementwise product).
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

// PRECOND: inter % 8 == 0, 16-byte aligned rows.
__global__ void silu_mul_kernel(const bf16* __restrict__ gate_up, bf16* __restrict__ out, int64_t tokens,
                                int64_t inter) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t vecs_per_token = inter / 8;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= tokens * vecs_per_token) return;
  const int64_t token = idx / vecs_per_token, vec = idx % vecs_per_token;
  const Bf16x8* row = reinterpret_cast<const Bf16x8*>(gate_up + token * 2 * inter);
  float g[8], u[8], o[8];
  bf16x8_to_float(row[vec], g);
  bf16x8_to_float(row[vecs_per_token + vec], u);
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = bf16_round(g[e] / (1.0f + expf(-g[e]))) * u[e];
  reinterpret_cast<Bf16x8*>(out + token * inter)[vec] = float_to_bf16x8(o);
}

}  // namespace

bool silu_mul_v0_supports(const SiluMulArgs& a) { return a.inter % 8 == 0; }

void launch_silu_mul_v0(const SiluMulArgs& a, cudaStream_t stream) {
  const int64_t threads = a.tokens * (a.inter / 8);
  launch(silu_mul_kernel, dim3(unsigned((threads + 255) / 256)), dim3(256), 0, stream, a.gate_up, a.out, a.tokens, a.inter);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
