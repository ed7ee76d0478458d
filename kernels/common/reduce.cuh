// Warp and block reductions (shuffles, then one shared-memory hop across warps).
#pragma once

#include <cfloat>

namespace qwen3::kernels {

constexpr int kWarpSize = 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// kN warp sums at once, returned transposed: lane l gets the full sum of value warp_sum_transposed_index<kN>(l),
// so lanes 4i..4i+3 (kN = 8) share one value. Each step halves the values a lane holds (it keeps one half and
// sends the other to its partner), so the kN sums take kN - 1 + log2(32 / kN) shuffles instead of 5 kN, and the
// kN dependent chains of separate warp_sum calls become one. PRECOND: kN a power of two, 2 <= kN <= 32.
template <int kN>
__device__ __forceinline__ float warp_sum_transposed(float (&v)[kN]) {
  static_assert(kN >= 2 && kN <= 32 && (kN & (kN - 1)) == 0, "a power of two up to 32");
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int half = kN / 2, mask = 16; half >= 1; half /= 2, mask /= 2) {
    const bool upper = (lane & mask) != 0;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float keep = upper ? v[i + half] : v[i];
      const float send = upper ? v[i] : v[i + half];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
    }
  }
  float s = v[0];
#pragma unroll
  for (int mask = 16 / kN; mask >= 1; mask /= 2) s += __shfl_xor_sync(0xffffffffu, s, mask);
  return s;
}

// Which of the kN values warp_sum_transposed<kN> leaves on `lane`.
template <int kN>
__device__ __forceinline__ int warp_sum_transposed_index(int lane) {
  int index = 0;
#pragma unroll
  for (int half = kN / 2, mask = 16; half >= 1; half /= 2, mask /= 2)
    if (lane & mask) index += half;
  return index;
}

// PRECOND: blockDim.x is a multiple of 32 and <= 1024; every thread of the block calls it.
// `scratch` holds 32 floats. Returns the total to every thread.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -FLT_MAX;
  return warp_max(v);
}

}  // namespace qwen3::kernels
