// Pieces of the decode GEMVs that fold the residual add and the RMSNorm in (kernels.h, "decode GEMVs with the
// residual add and the RMSNorm folded in"): the streaming core with a prologue hook and activations read through a
// generic pointer (shared memory for the normed input), the norm prologue, and the residual epilogue.
#pragma once

#include "kernels/02_gemm/gemv_core.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::gemv_fused {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

// gemv_warp_rows_convert_once with `prologue()` run where that one waits for the previous kernel: the first
// kEarlyGroups groups of weight loads (1: v7/v8/v10/v4_norm; 2: the *_early versions, both buffers of the double
// buffer) are already in flight when the prologue (PDL wait, building the normed input) runs. Two groups in
// flight in steady state either way; kEarlyGroups = 2 only moves the second one before the wait.
// x is read with plain loads (it may live in shared memory). The warp triggers the next kernel's launch (PDL) when
// it reaches 16-byte vector trigger_vec of its rows, or after its last full group; trigger_vec < 0: the caller
// triggered at its start. PRECOND: every warp of the block calls it (the prologue may synchronize the block);
// w_rows clamped to valid rows.
template <int kTokens, int kRows, int kUnroll, int kEarlyGroups = 1, class Prologue>
__device__ __forceinline__ void warp_rows(const bf16* x, int64_t k, const uint4* const (&w_rows)[kRows],
                                          float (&acc)[kTokens][kRows], int64_t trigger_vec, Prologue&& prologue) {
  const int lane = threadIdx.x % kWarpSize;
  const uint64_t policy = make_evict_first_policy();
  const int64_t vecs = k / 8;
  const uint4* x_vecs = reinterpret_cast<const uint4*>(x);
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;
  // The operand order of v4's core (gemv_fma8 per row x token): measured ~2% faster at batch 1 than widening
  // each vector once (v5), which pays off only from batch 4 on.
  auto fma_group = [&](const uint4(&w)[kRows], int64_t v) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const uint4 xv = x_vecs[t * vecs + v];
#pragma unroll
      for (int r = 0; r < kRows; ++r) gemv_fma8(acc[t][r], w[r], xv);
    }
  };

  static_assert(kEarlyGroups == 1 || kEarlyGroups == 2, "one or both buffers before the prologue");
  const auto complete = [&](int64_t at) { return at + (kUnroll - 1) * kWarpSize < vecs; };  // a full group at `at`
  const auto load_group = [&](uint4(&buffer)[kUnroll][kRows], int64_t at) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) buffer[u][r] = load_stream_16B(w_rows[r] + at + u * kWarpSize, policy);
  };
  int64_t v = lane;
  bool have = complete(v);
  uint4 cur[kUnroll][kRows], nxt[kUnroll][kRows];
  if (have) load_group(cur, v);
  if (kEarlyGroups == 2 && complete(v + kUnroll * kWarpSize)) load_group(nxt, v + kUnroll * kWarpSize);
  prologue();
  bool triggered = trigger_vec < 0;
  while (have) {
    if (!triggered && v >= trigger_vec) {
      pdl_launch_dependents();
      triggered = true;
    }
    const int64_t next = v + kUnroll * kWarpSize;
    const bool have_next = complete(next);
    if (kEarlyGroups == 1 && have_next) load_group(nxt, next);  // (kEarlyGroups == 2: loaded one group ago)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_group(cur[u], v + u * kWarpSize);
    if (have_next) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) cur[u][r] = nxt[u][r];
      if (kEarlyGroups == 2 && complete(next + kUnroll * kWarpSize)) load_group(nxt, next + kUnroll * kWarpSize);
    }
    v = next;
    have = have_next;
  }
  if (!triggered) pdl_launch_dependents();
  for (; v < vecs; v += kWarpSize) {
    uint4 w[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) w[r] = load_stream_16B(w_rows[r] + v, policy);
    fma_group(w, v);
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = warp_sum(acc[t][r]);
}

// The 16-byte vector of a row at which a warp of these kernels triggers the next kernel's launch: -1 (trigger at
// the kernel's start) for pdl_trigger <= 0, else that fraction of the row's k / 8 vectors.
__device__ __forceinline__ int64_t trigger_vec_for(float pdl_trigger, int64_t k) {
  return pdl_trigger <= 0.0f ? -1 : int64_t(double(pdl_trigger) * double(k / 8));
}

// Block-wide: waits for the previous kernel, then writes x = bf16(w * bf16(h * inv_rms)) for kTokens rows of the
// residual h into x_smem, inv_rms from the producer's partial sums of squares (summed in a fixed order by one warp
// per token, so every block gets the same bits).
// With residual_delta (NormGemvArgs): h = bf16(residual + bf16(delta)), delta the sum of delta_copies copies, and
// the block sums h² itself (a fixed
// order too), partials unused; h is staged in x_smem between the two passes (so `residual` is not __restrict__:
// the second pass reads it back from x_smem, each element by the thread that wrote it).
// PRECOND: blockDim.x == kThreads, kTokens <= kWarpsPerBlock, k % 8 == 0.
template <int kTokens>
__device__ __forceinline__ void norm_prologue(const bf16* residual, const float* __restrict__ partials,
                                              int64_t partial_count, const bf16* __restrict__ norm_weight, float eps,
                                              int64_t k, bf16* x_smem, const float* residual_delta = nullptr,
                                              int delta_copies = 1) {
  __shared__ float inv_rms[kTokens];
  __shared__ float warp_sq[kWarpsPerBlock][kTokens];
  pdl_wait();
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t vecs = k / 8;
  if (residual_delta != nullptr) {
    float sq[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) sq[t] = 0.0f;
    for (int64_t i = threadIdx.x; i < kTokens * vecs; i += kThreads) {
      const int t = int(i / vecs);
      const int64_t c = i % vecs;
      float h[8];
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(residual + t * k)[c], h);
      float d[8] = {};
      for (int j = 0; j < delta_copies; ++j) {  // the copies (kTokens, k) one after the other, summed in order
        const float4* copy = reinterpret_cast<const float4*>(residual_delta + (j * kTokens + t) * k);
        const float4 d0 = copy[2 * c], d1 = copy[2 * c + 1];
        d[0] += d0.x, d[1] += d0.y, d[2] += d0.z, d[3] += d0.w;
        d[4] += d1.x, d[5] += d1.y, d[6] += d1.z, d[7] += d1.w;
      }
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        h[e] = bf16_round(h[e] + bf16_round(d[e]));
        s += h[e] * h[e];
      }
#pragma unroll
      for (int u = 0; u < kTokens; ++u) sq[u] += u == t ? s : 0.0f;
      reinterpret_cast<Bf16x8*>(x_smem + t * k)[c] = float_to_bf16x8(h);
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float s = warp_sum(sq[t]);
      if (lane == 0) warp_sq[warp][t] = s;
    }
    __syncthreads();
    if (threadIdx.x < kTokens) {
      float total = 0.0f;
      for (int w = 0; w < kWarpsPerBlock; ++w) total += warp_sq[w][threadIdx.x];
      inv_rms[threadIdx.x] = 1.0f / sqrtf(total / float(k) + eps);
    }
    residual = x_smem;  // the second pass reads h back from where this thread left it
  } else if (warp < kTokens) {
    float sum_sq = 0.0f;
    for (int64_t i = lane; i < partial_count; i += kWarpSize) sum_sq += partials[warp * kMaxNormPartials + i];
    sum_sq = warp_sum(sum_sq);
    if (lane == 0) inv_rms[warp] = 1.0f / sqrtf(sum_sq / float(k) + eps);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < kTokens * vecs; i += kThreads) {
    const int t = int(i / vecs);
    const int64_t c = i % vecs;
    float h[8], w[8], o[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8*>(residual + t * k)[c], h);
    bf16x8_to_float(reinterpret_cast<const Bf16x8*>(norm_weight)[c], w);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = w[e] * bf16_round(h[e] * inv_rms[t]);
    reinterpret_cast<Bf16x8*>(x_smem + t * k)[c] = float_to_bf16x8(o);
  }
  __syncthreads();
}

// Block-wide epilogue of a residual GEMV: lane r of each warp owns row row0 + r; the residual gets
// bf16(residual + bf16(sum)) and the block leaves Σ residual² over its rows in partials[t][blockIdx.x], summed
// over warps in a fixed order. PRECOND: every warp of the block calls it.
template <int kTokens, int kRows>
__device__ __forceinline__ void residual_epilogue(const float (&acc)[kTokens][kRows], int64_t row0, int64_t n,
                                                  bf16* residual, float* partials) {
  __shared__ float block_sq[kWarpsPerBlock][kTokens];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  float sq[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    sq[t] = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (lane != r || row0 + r >= n) continue;
      bf16* h = residual + t * n + row0 + r;
      const float updated = bf16_round(__bfloat162float(*h) + bf16_round(acc[t][r]));
      *h = __float2bfloat16_rn(updated);
      sq[t] += updated * updated;
    }
    sq[t] = warp_sum(sq[t]);
  }
  if (lane == 0)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) block_sq[warp][t] = sq[t];
  __syncthreads();
  if (threadIdx.x < kTokens) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarpsPerBlock; ++w) total += block_sq[w][threadIdx.x];
    partials[threadIdx.x * kMaxNormPartials + blockIdx.x] = total;
  }
}

// The QKV GEMV with the RMSNorm prologue (v8_gemv_norm, v10_gemv_norm_wave): a warp streams kRows weight rows
// against the normed residual the block builds in shared memory.
// PRECOND: k % 8 == 0, 16-byte aligned, blockDim.x == kThreads, dynamic shared memory kTokens * k * 2 bytes.
template <int kTokens, int kRows, int kUnroll, int kEarlyGroups = 1>
__global__ void __launch_bounds__(kThreads) norm_gemv_kernel(NormGemvArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* x = reinterpret_cast<bf16*>(smem_raw);  // (kTokens, k): the normed residual
  const int64_t trigger_vec = trigger_vec_for(a.pdl_trigger, a.k);
  if (trigger_vec < 0) pdl_launch_dependents();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kRows;
  const uint4* w_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) w_rows[r] = reinterpret_cast<const uint4*>(a.w + min(row0 + r, a.n - 1) * a.k);
  float acc[kTokens][kRows];
  warp_rows<kTokens, kRows, kUnroll, kEarlyGroups>(x, a.k, w_rows, acc, trigger_vec, [&] {
    norm_prologue<kTokens>(a.residual, a.norm_partials, a.partial_count, a.norm_weight, a.eps, a.k, x,
                           a.residual_delta, a.delta_copies);
  });
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (lane == r && row0 + r < a.n) a.y[t * a.n + row0 + r] = __float2bfloat16_rn(acc[t][r]);
}

// The O / down GEMV with the residual add and the next norm's sums of squares in the epilogue (v7_gemv_residual,
// v10_gemv_residual_early). PRECOND: k % 8 == 0, 16-byte aligned x and w, blockDim.x == kThreads,
// gridDim.x <= kMaxNormPartials.
template <int kTokens, int kRows, int kUnroll, int kEarlyGroups = 1>
__global__ void __launch_bounds__(kThreads)
    residual_gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* residual, float* partials,
                         int64_t n, int64_t k, float pdl_trigger) {
  const int64_t trigger_vec = trigger_vec_for(pdl_trigger, k);
  if (trigger_vec < 0) pdl_launch_dependents();
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kRows;
  const uint4* w_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) w_rows[r] = reinterpret_cast<const uint4*>(w + min(row0 + r, n - 1) * k);
  float acc[kTokens][kRows];
  warp_rows<kTokens, kRows, kUnroll, kEarlyGroups>(x, k, w_rows, acc, trigger_vec, [] { pdl_wait(); });
  residual_epilogue<kTokens, kRows>(acc, row0, n, residual, partials);
}

// The gate|up GEMV with the RMSNorm prologue and SwiGLU epilogue (v4_gate_up_swiglu_norm,
// v6_gate_up_swiglu_norm_early): a warp computes kPairs (gate row i, up row i) pairs.
// PRECOND: k % 8 == 0, 16-byte aligned, blockDim.x == kThreads, dynamic shared memory kTokens * k * 2 bytes.
template <int kTokens, int kPairs, int kUnroll, int kEarlyGroups = 1>
__global__ void __launch_bounds__(kThreads) gate_up_swiglu_norm_kernel(NormGateUpSwigluArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* x = reinterpret_cast<bf16*>(smem_raw);  // (kTokens, k): the normed residual
  const int64_t trigger_vec = trigger_vec_for(a.pdl_trigger, a.k);
  if (trigger_vec < 0) pdl_launch_dependents();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t i0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kPairs;
  const uint4* w_rows[2 * kPairs];
#pragma unroll
  for (int p = 0; p < kPairs; ++p) {
    const int64_t i = min(i0 + p, a.inter - 1);
    w_rows[2 * p] = reinterpret_cast<const uint4*>(a.w_gate_up + i * a.k);
    w_rows[2 * p + 1] = reinterpret_cast<const uint4*>(a.w_gate_up + (a.inter + i) * a.k);
  }
  float acc[kTokens][2 * kPairs];
  warp_rows<kTokens, 2 * kPairs, kUnroll, kEarlyGroups>(x, a.k, w_rows, acc, trigger_vec, [&] {
    norm_prologue<kTokens>(a.residual, a.norm_partials, a.partial_count, a.norm_weight, a.eps, a.k, x);
  });
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      if (lane != p || i0 + p >= a.inter) continue;
      const float g = bf16_round(acc[t][2 * p]), u = bf16_round(acc[t][2 * p + 1]);
      a.out[t * a.inter + i0 + p] = __float2bfloat16_rn(bf16_round(g / (1.0f + expf(-g))) * u);
    }
}

}  // namespace qwen3::kernels::gemv_fused
