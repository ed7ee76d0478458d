// v1: the row stays in registers between the two passes and moves as 16-byte vectors, so the row is read from
// memory once (v0 reads it twice) with a quarter of the load instructions. Covers rmsnorm and add_rmsnorm, and is
// add_delta_rmsnorm's v0 (its delta fp32 copies, summed in the same pass).
#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxVecsPerThread = 4;  // rows up to 256 * 8 * 4 = 8192 (every Qwen3 hidden size)

__device__ __forceinline__ void normalize_store(const float (&v)[kMaxVecsPerThread][8], int vecs_per_row,
                                                const bf16* __restrict__ weight, bf16* out, float inv_rms) {
#pragma unroll
  for (int j = 0; j < kMaxVecsPerThread; ++j) {
    const int vec = threadIdx.x + j * kThreads;
    if (vec >= vecs_per_row) break;
    float w[8], o[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8*>(weight)[vec], w);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = w[e] * bf16_round(v[j][e] * inv_rms);
    reinterpret_cast<Bf16x8*>(out)[vec] = float_to_bf16x8(o);
  }
}

// PRECOND: blockDim.x == kThreads, n % 8 == 0, n <= kThreads * 8 * kMaxVecsPerThread, 16-byte aligned rows.
__global__ void rmsnorm_vec_kernel(const bf16* x, const bf16* __restrict__ weight, bf16* y, int64_t n, float eps) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float scratch[32];
  const int vecs_per_row = int(n / 8);
  const Bf16x8* row = reinterpret_cast<const Bf16x8*>(x + blockIdx.x * n);
  float v[kMaxVecsPerThread][8];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxVecsPerThread; ++j) {
    const int vec = threadIdx.x + j * kThreads;
    if (vec < vecs_per_row) {
      bf16x8_to_float(row[vec], v[j]);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum_sq += v[j][e] * v[j][e];
    }
  }
  sum_sq = block_sum(sum_sq, scratch);
  normalize_store(v, vecs_per_row, weight, y + blockIdx.x * n, 1.0f / sqrtf(sum_sq / float(n) + eps));
}

// residual row = fold(residual row), rounded as the bf16 residual stream is, then y = rmsnorm(residual row): a block
// per row. fold(vec, h) replaces the 8 values h at the row's 16-byte vector vec with the updated residual's.
template <class Fold>
__device__ __forceinline__ void fold_rmsnorm_row(bf16* residual, const bf16* __restrict__ weight, bf16* __restrict__ y,
                                                 int64_t n, float eps, Fold&& fold) {
  __shared__ float scratch[32];
  const int vecs_per_row = int(n / 8);
  Bf16x8* row = reinterpret_cast<Bf16x8*>(residual + blockIdx.x * n);
  float v[kMaxVecsPerThread][8];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxVecsPerThread; ++j) {
    const int vec = threadIdx.x + j * kThreads;
    if (vec < vecs_per_row) {
      bf16x8_to_float(row[vec], v[j]);
      fold(vec, v[j]);
      row[vec] = float_to_bf16x8(v[j]);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum_sq += v[j][e] * v[j][e];
    }
  }
  sum_sq = block_sum(sum_sq, scratch);
  normalize_store(v, vecs_per_row, weight, y + blockIdx.x * n, 1.0f / sqrtf(sum_sq / float(n) + eps));
}

// h = bf16(h + d) at 8 values: a residual add of the bf16 residual stream.
__device__ __forceinline__ void add_rounded(float (&h)[8], const float (&d)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) h[e] = bf16_round(h[e] + d[e]);
}

__global__ void add_rmsnorm_vec_kernel(bf16* residual, const bf16* __restrict__ delta,
                                       const bf16* __restrict__ weight, bf16* __restrict__ y, int64_t n,
                                       float eps) {
  pdl_launch_dependents();
  pdl_wait();
  const Bf16x8* d = reinterpret_cast<const Bf16x8*>(delta + blockIdx.x * n);
  fold_rmsnorm_row(residual, weight, y, n, eps, [&](int vec, float (&h)[8]) {
    float dd[8];
    bf16x8_to_float(d[vec], dd);
    add_rounded(h, dd);
  });
}

// AddDeltaRmsnormArgs: the fp32 delta copies (copies, rows, n), summed in order and rounded to bf16, added as
// add_rmsnorm_vec_kernel adds a bf16 delta, then the addend (if any) the same way; each copy zeroed once read (the
// next one-launch MLP adds into them). PRECOND: as add_rmsnorm_vec_kernel; delta 16-byte aligned.
__global__ void add_delta_rmsnorm_vec_kernel(bf16* residual, float* delta, int copies, int64_t rows,
                                             const bf16* __restrict__ addend, const bf16* __restrict__ weight,
                                             bf16* __restrict__ y, int64_t n, float eps) {
  pdl_launch_dependents();
  pdl_wait();
  fold_rmsnorm_row(residual, weight, y, n, eps, [&](int vec, float (&h)[8]) {
    float d[8] = {};
    for (int c = 0; c < copies; ++c) {
      float4* copy = reinterpret_cast<float4*>(delta + (c * rows + blockIdx.x) * n) + 2 * vec;
      gemv_ring::add_delta_copy(d, copy[0], copy[1]);
      copy[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      copy[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) d[e] = bf16_round(d[e]);
    add_rounded(h, d);
    if (addend != nullptr) {
      float a[8];
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(addend + blockIdx.x * n)[vec], a);
      add_rounded(h, a);
    }
  });
}

}  // namespace

bool add_delta_rmsnorm_v0_supports(const AddDeltaRmsnormArgs& a) {
  return a.n % 8 == 0 && a.n <= kThreads * 8 * kMaxVecsPerThread && a.copies >= 1 &&
         reinterpret_cast<uintptr_t>(a.delta) % 16 == 0 && reinterpret_cast<uintptr_t>(a.addend) % 16 == 0;
}

void launch_add_delta_rmsnorm_v0(const AddDeltaRmsnormArgs& a, cudaStream_t stream) {
  launch(add_delta_rmsnorm_vec_kernel, dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a.residual, a.delta,
         int(a.copies), a.rows, a.addend, a.weight, a.y, a.n, a.eps);
  CUDA_CHECK_LAUNCH();
}

bool rmsnorm_v1_supports(const RmsnormArgs& a) { return a.n % 8 == 0 && a.n <= kThreads * 8 * kMaxVecsPerThread; }
bool add_rmsnorm_v1_supports(const AddRmsnormArgs& a) {
  return a.n % 8 == 0 && a.n <= kThreads * 8 * kMaxVecsPerThread;
}

void launch_rmsnorm_v1(const RmsnormArgs& a, cudaStream_t stream) {
  launch(rmsnorm_vec_kernel, dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a.x, a.weight, a.y, a.n, a.eps);
  CUDA_CHECK_LAUNCH();
}

void launch_add_rmsnorm_v1(const AddRmsnormArgs& a, cudaStream_t stream) {
  launch(add_rmsnorm_vec_kernel, dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a.residual, a.delta, a.weight, a.y, a.n, a.eps);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
