// Device pieces shared by the sampling kernels (v0_sample, v1_sample_topk): see v0_sample.cu for the method.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::sampling {

constexpr int kThreads = 1024;
constexpr int kBins = 256;

__device__ __forceinline__ uint32_t order_key(float z) {
  const uint32_t bits = __float_as_uint(z);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One uniform in [0, 1) from the slot's counter-based stream; advances the counter.
__device__ __forceinline__ float next_uniform(uint64_t seed, uint64_t* step) {
  const uint64_t n = *step;
  *step = n + 1;
  const uint64_t bits = splitmix64(seed ^ splitmix64(n));
  return float(double(bits >> 11) * 0x1.0p-53);
}

// Whether a row's sampling applies any penalty (repetition, presence, frequency) to the tokens it has seen.
__device__ __forceinline__ bool has_penalties(const DeviceSampling& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

struct RowView {
  const bf16* logits;
  const int32_t* counts;     // or nullptr
  const uint8_t* in_prompt;  // or nullptr
  DeviceSampling p;

  // Whether adjusted(i) is the logit itself: no counts, or penalties that leave every logit as it is.
  __device__ __forceinline__ bool neutral() const { return counts == nullptr || !has_penalties(p); }

  __device__ __forceinline__ float adjusted(int64_t i) const {
    float z = __bfloat162float(logits[i]);
    if (counts) {
      const int32_t c = counts[i];
      const bool seen = c > 0 || (in_prompt && in_prompt[i]);
      if (seen && p.repetition_penalty != 1.0f) z = z > 0 ? z / p.repetition_penalty : z * p.repetition_penalty;
      if (c > 0) z -= float(c) * p.frequency_penalty + p.presence_penalty;
    }
    return z;
  }
};

// Block-wide argmax with ties to the lowest index. Returns the index to every thread.
__device__ inline int64_t block_argmax(float value, int64_t index, float* s_val, int64_t* s_idx) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, value, offset);
    const int64_t i = __shfl_xor_sync(0xffffffffu, index, offset);
    if (v > value || (v == value && i < index)) value = v, index = i;
  }
  __syncthreads();
  if (lane == 0) s_val[warp] = value, s_idx[warp] = index;
  __syncthreads();
  if (warp == 0) {
    value = s_val[lane];
    index = s_idx[lane];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, value, offset);
      const int64_t i = __shfl_xor_sync(0xffffffffu, index, offset);
      if (v > value || (v == value && i < index)) value = v, index = i;
    }
    if (lane == 0) s_idx[0] = index;
  }
  __syncthreads();
  return s_idx[0];
}

// Radix select from the top: the order key t such that weight(key > t) < target <= weight(key >= t), over the
// elements with key >= floor_key. Weighted by 1 (count) or by exp(z - max) (mass).
template <bool kByMass>
__device__ uint32_t radix_select_top(const RowView& row, int64_t vocab, float inv_t, float z_max, uint32_t floor_key,
                                     float target, float* hist, uint32_t* s_prefix, float* s_target) {
  uint32_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) *s_target = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0.0f;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float z = row.adjusted(i) * inv_t;
      const uint32_t key = order_key(z);
      if (key < floor_key || (key & mask) != prefix) continue;
      atomicAdd(&hist[(key >> shift) & 0xff], kByMass ? expf(z - z_max) : 1.0f);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float remaining = *s_target, cumulative = 0.0f;
      int chosen = -1, last_nonempty = -1;
      for (int b = kBins - 1; b >= 0; --b) {
        if (hist[b] <= 0.0f) continue;
        last_nonempty = b;
        if (cumulative + hist[b] >= remaining) {
          chosen = b;
          break;
        }
        cumulative += hist[b];
      }
      if (chosen < 0) chosen = last_nonempty;  // rounding left the target just above the total: keep everything
      *s_target = remaining - cumulative;
      *s_prefix = prefix | (uint32_t(chosen < 0 ? 0 : chosen) << shift);
    }
    __syncthreads();
    prefix = *s_prefix;
    mask |= 0xffu << shift;
    __syncthreads();
  }
  return prefix;
}


// v0's kept set {key >= threshold}: top-k by a count-weighted radix select, top-p by a mass-weighted one within
// it, min-p as max + ln(min_p). PRECOND: blockDim.x == kThreads; every thread calls it.
__device__ __forceinline__ uint32_t threshold_by_radix(const RowView& row, int64_t vocab, float inv_t, float z_max,
                                                       float* hist, uint32_t* s_prefix, float* s_target,
                                                       float* scratch) {
  uint32_t threshold = 0;
  if (row.p.top_k > 0 && row.p.top_k < vocab)
    threshold = radix_select_top<false>(row, vocab, inv_t, z_max, 0u, float(row.p.top_k), hist, s_prefix, s_target);
  if (row.p.top_p < 1.0f) {
    float mass = 0.0f;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float z = row.adjusted(i) * inv_t;
      if (order_key(z) >= threshold) mass += expf(z - z_max);
    }
    mass = block_sum(mass, scratch);
    threshold = radix_select_top<true>(row, vocab, inv_t, z_max, threshold, row.p.top_p * mass, hist, s_prefix,
                                       s_target);
  }
  if (row.p.min_p > 0.0f) {
    const uint32_t min_p_key = order_key(z_max + logf(row.p.min_p));
    threshold = max(threshold, min(min_p_key, order_key(z_max)));  // the top token always survives
  }
  return threshold;
}

// The kept-set draw of v0 (every id, contiguous chunks, prefix sums): keys >= threshold are kept. Writes the token
// to *out and advances *step. PRECOND: blockDim.x == kThreads; every thread calls it.
__device__ __forceinline__ void draw_by_threshold(const RowView& row, int64_t vocab, float inv_t, float z_max,
                                                  uint32_t threshold, int64_t argmax, uint64_t* step, int32_t* out) {
  __shared__ float chunk_mass[kThreads];
  __shared__ float s_u;
  const int64_t chunk = (vocab + kThreads - 1) / kThreads;
  const int64_t begin = threadIdx.x * chunk, end = min(begin + chunk, vocab);
  float mine = 0.0f;
  for (int64_t i = begin; i < end; ++i) {
    const float z = row.adjusted(i) * inv_t;
    if (order_key(z) >= threshold) mine += expf(z - z_max);
  }
  chunk_mass[threadIdx.x] = mine;
  __syncthreads();
  for (int offset = 1; offset < kThreads; offset <<= 1) {  // inclusive Hillis-Steele scan
    const float add = threadIdx.x >= offset ? chunk_mass[threadIdx.x - offset] : 0.0f;
    __syncthreads();
    chunk_mass[threadIdx.x] += add;
    __syncthreads();
  }
  const float total = chunk_mass[kThreads - 1];
  if (threadIdx.x == 0) {
    s_u = next_uniform(row.p.seed, step);
    *out = int32_t(argmax);  // fallback if rounding leaves the target past every chunk
  }
  __syncthreads();
  const float target = s_u * total;
  const float before = threadIdx.x > 0 ? chunk_mass[threadIdx.x - 1] : 0.0f;
  if (mine > 0.0f && target >= before && (target < chunk_mass[threadIdx.x] || threadIdx.x == kThreads - 1 ||
                                           chunk_mass[threadIdx.x] >= total)) {
    float cumulative = before;
    int64_t chosen = -1;
    for (int64_t i = begin; i < end; ++i) {
      const float z = row.adjusted(i) * inv_t;
      if (order_key(z) < threshold) continue;
      chosen = i;
      cumulative += expf(z - z_max);
      if (target < cumulative) break;
    }
    if (chosen >= 0) *out = int32_t(chosen);
  }
}

}  // namespace qwen3::kernels::sampling
