// The streaming GEMV core shared by v4_gemv_pdl and the fused gate|up + SwiGLU GEMV (05_mlp): a warp computes
// kRows dot products of length k against kTokens activation rows.
//  * Weights: 16-byte loads with an L2 evict-first policy, kUnroll chunks per row in flight, double-buffered (the
//    next group is loaded before the current one is multiplied).
//  * PDL: the first group of weight loads is issued BEFORE pdl_wait(): weights never change, so a GEMV launched
//    early streams its first bytes while the previous kernel finishes. Activations are read only after the wait.
#pragma once

#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {

__device__ __forceinline__ void gemv_fma8(float& acc, const uint4& w, const uint4& x) {
  float wf[8], xf[8];
  bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w), wf);
  bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x), xf);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc += wf[e] * xf[e];
}

// Lane r < kRows of the warp asks L2 to prefetch its whole weight row r, if the row's index is below
// prefetch_rows (the host caps the bytes a kernel prefetches so they fit in L2 next to what else lives there).
template <int kRows>
__device__ __forceinline__ void prefetch_rows_l2(const uint4* const (&w_rows)[kRows], int64_t first_row, int64_t k,
                                                 int64_t prefetch_rows) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    if (lane == r && first_row + r < prefetch_rows) prefetch_l2_bulk(w_rows[r], uint32_t(k * 2));
}

// On return every lane holds the complete sums acc[t][r] = x[t] · w_rows[r].
// PRECOND: k % 8 == 0; x rows 16-byte aligned and k elements apart; every w_rows[r] a valid row (clamp for tails).
template <int kTokens, int kRows, int kUnroll>
__device__ __forceinline__ void gemv_warp_rows(const bf16* __restrict__ x, int64_t k,
                                               const uint4* const (&w_rows)[kRows], float (&acc)[kTokens][kRows]) {
  const int lane = threadIdx.x % kWarpSize;
  const uint64_t policy = make_evict_first_policy();
  const int64_t vecs = k / 8;
  const uint4* x_vecs = reinterpret_cast<const uint4*>(x);
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;

  int64_t v = lane;
  bool have = v + (kUnroll - 1) * kWarpSize < vecs;
  uint4 cur[kUnroll][kRows];
  if (have) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) cur[u][r] = load_stream_16B(w_rows[r] + v + u * kWarpSize, policy);
  }
  pdl_wait();  // the activations below come from the previous kernel
  while (have) {
    const int64_t next = v + kUnroll * kWarpSize;
    const bool have_next = next + (kUnroll - 1) * kWarpSize < vecs;
    uint4 nxt[kUnroll][kRows];
    if (have_next) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) nxt[u][r] = load_stream_16B(w_rows[r] + next + u * kWarpSize, policy);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const uint4 xv = __ldg(x_vecs + t * vecs + v + u * kWarpSize);
#pragma unroll
        for (int r = 0; r < kRows; ++r) gemv_fma8(acc[t][r], cur[u][r], xv);
      }
    if (have_next) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) cur[u][r] = nxt[u][r];
    }
    v = next;
    have = have_next;
  }
  for (; v < vecs; v += kWarpSize) {  // fewer than kUnroll chunks left for this lane
    uint4 w[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) w[r] = load_stream_16B(w_rows[r] + v, policy);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const uint4 xv = __ldg(x_vecs + t * vecs + v);
#pragma unroll
      for (int r = 0; r < kRows; ++r) gemv_fma8(acc[t][r], w[r], xv);
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = warp_sum(acc[t][r]);
}

// One 16-byte chunk position for every row and token, each bf16 vector widened once: kRows weight vectors and
// kTokens activation vectors are converted once each (gemv_fma8 converts both for every row x token pair, which at
// batch 4-8 costs more instructions than the FMAs and makes the kernel issue bound).
template <int kTokens, int kRows>
__device__ __forceinline__ void gemv_fma_group(float (&acc)[kTokens][kRows], const uint4 (&w)[kRows],
                                               const uint4* x_chunk, int64_t x_row_vecs) {
  float wf[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[r]), wf[r]);
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    float xf[8];
    const uint4 xv = __ldg(x_chunk + t * x_row_vecs);
    bf16x8_to_float(reinterpret_cast<const Bf16x8&>(xv), xf);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[t][r] += wf[r][e] * xf[e];
  }
}

// gemv_warp_rows with each loaded vector widened once (gemv_fma_group). Same contract.
// On return every lane holds the complete sums acc[t][r] = x[t] · w_rows[r].
// PRECOND: k % 8 == 0; x rows 16-byte aligned and k elements apart; every w_rows[r] a valid row (clamp for tails).
template <int kTokens, int kRows, int kUnroll>
__device__ __forceinline__ void gemv_warp_rows_convert_once(const bf16* __restrict__ x, int64_t k,
                                               const uint4* const (&w_rows)[kRows], float (&acc)[kTokens][kRows]) {
  const int lane = threadIdx.x % kWarpSize;
  const uint64_t policy = make_evict_first_policy();
  const int64_t vecs = k / 8;
  const uint4* x_vecs = reinterpret_cast<const uint4*>(x);
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;

  int64_t v = lane;
  bool have = v + (kUnroll - 1) * kWarpSize < vecs;
  uint4 cur[kUnroll][kRows];
  if (have) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) cur[u][r] = load_stream_16B(w_rows[r] + v + u * kWarpSize, policy);
  }
  pdl_wait();  // the activations below come from the previous kernel
  while (have) {
    const int64_t next = v + kUnroll * kWarpSize;
    const bool have_next = next + (kUnroll - 1) * kWarpSize < vecs;
    uint4 nxt[kUnroll][kRows];
    if (have_next) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) nxt[u][r] = load_stream_16B(w_rows[r] + next + u * kWarpSize, policy);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) gemv_fma_group<kTokens, kRows>(acc, cur[u], x_vecs + v + u * kWarpSize, vecs);
    if (have_next) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) cur[u][r] = nxt[u][r];
    }
    v = next;
    have = have_next;
  }
  for (; v < vecs; v += kWarpSize) {  // fewer than kUnroll chunks left for this lane
    uint4 w[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) w[r] = load_stream_16B(w_rows[r] + v, policy);
    gemv_fma_group<kTokens, kRows>(acc, w, x_vecs + v, vecs);
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = warp_sum(acc[t][r]);
}

}  // namespace qwen3::kernels
