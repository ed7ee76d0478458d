// Split-KV decode attention shared by v1_flash_decode (separate merge kernel) and v2_flash_decode_1k (the last
// CTA of each (token, kv head) merges): see v1_flash_decode.cu for the design.
#pragma once

#include <algorithm>
#include <cfloat>
#include <stdexcept>

#include "kernels/common/check.h"

#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::flash_decode {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kMinChunk = 64;
constexpr int kMaxChunk = 512;
constexpr int kTargetCtas = 264;      // v1/v2: ~2 CTAs per SM on a 132-SM H200
constexpr int kTargetCtasWide = 1056;  // v3: ~8 CTAs per SM, so long contexts keep 4x more K/V loads in flight

// Workspace layout, the same for every batch size so graphs of different batch sizes can share it: first the
// fused merge's counters (kMaxTokens * q_heads ints, enough for tokens * kv_heads), then the split-KV partials.
constexpr int64_t kMaxTokens = 64;
inline int* counters_base(const AttentionArgs& a) { return reinterpret_cast<int*>(a.workspace); }
inline float* partials_base(const AttentionArgs& a) { return a.workspace + kMaxTokens * a.q_heads; }
inline int64_t workspace_floats(int64_t tokens, int64_t q_heads, int64_t head_dim, int64_t max_ctx) {
  return kMaxTokens * q_heads + tokens * q_heads * ((max_ctx + kMinChunk - 1) / kMinChunk) * (head_dim + 2);
}


struct SplitPlan {
  int chunk;   // keys per CTA, a multiple of kMinChunk
  int splits;  // chunks covering max_position + 1 keys
};

inline SplitPlan plan_splits(int64_t max_position, int64_t tokens, int64_t kv_heads, int64_t target_ctas = kTargetCtas) {
  const int64_t keys = max_position + 1;
  const int64_t want_splits = std::max<int64_t>(1, target_ctas / std::max<int64_t>(1, tokens * kv_heads));
  int64_t chunk = (keys + want_splits - 1) / want_splits;
  chunk = std::clamp<int64_t>((chunk + kMinChunk - 1) / kMinChunk * kMinChunk, kMinChunk, kMaxChunk);
  return {int(chunk), int((keys + chunk - 1) / chunk)};
}

template <int kHeadDim, int kGroup>
constexpr int smem_floats(int chunk) {
  constexpr int kKeyGroups = kThreads / (kHeadDim / 8);
  return kGroup * kHeadDim + std::max(kGroup * chunk, kKeyGroups * kGroup * kHeadDim) + 2 * kGroup;
}

// One CTA: keys [split * chunk, min(split * chunk + chunk, position + 1)) of one kv head for one token, all kGroup
// q heads. partials: (tokens, q_heads, splits, head_dim + 2) floats: unnormalized output, chunk max, chunk sum.
// PRECOND: blockDim.x == kThreads, head_dim == kHeadDim, q_heads == kGroup * kv_heads, chunk <= kMaxChunk.
// Output element d of one head merged from the first `count` split partials at `base`, each kHeadDim + 2 floats
// (unnormalized output, max, sum), read past L1: other CTAs wrote them (the fused merges here and in
// qkv_attention.cuh).
template <int kHeadDim>
__device__ __forceinline__ float merge_split_partials(const float* base, int count, int d) {
  float m = -FLT_MAX;
  for (int s = 0; s < count; ++s) m = fmaxf(m, __ldcg(base + s * (kHeadDim + 2) + kHeadDim));
  float total = 0.0f, value = 0.0f;
  for (int s = 0; s < count; ++s) {
    const float* p = base + s * (kHeadDim + 2);
    const float w = expf(__ldcg(p + kHeadDim) - m);
    total += __ldcg(p + kHeadDim + 1) * w;
    value += __ldcg(p + d) * w;
  }
  return value / total;
}

// kFusedMerge: after writing its partials, the CTA counts itself done in counters[token * kv_heads + kv_head];
// the last one merges every chunk of its kGroup heads and resets the counter for the next launch.
template <int kHeadDim, int kGroup, bool kFusedMerge>
__global__ void __launch_bounds__(kThreads) split_kv_kernel(AttentionArgs a, int chunk, float* partials,
                                                            int* counters) {
  pdl_launch_dependents();
  pdl_wait();
  constexpr int kLanesPerKey = kHeadDim / 8;           // one 16-byte chunk of a row per lane
  constexpr int kKeysPerWarp = kWarpSize / kLanesPerKey;
  constexpr int kKeyGroups = kThreads / kLanesPerKey;  // keys handled at once in the P·V phase
  extern __shared__ float smem[];
  float* q_s = smem;                                   // (kGroup, kHeadDim)
  float* scores = q_s + kGroup * kHeadDim;             // (kGroup, chunk); reused for the final reduction
  float* stats = scores + std::max(kGroup * chunk, kKeyGroups * kGroup * kHeadDim);  // max[kGroup], sum[kGroup]

  const int split = blockIdx.x, kv_head = blockIdx.y, token = blockIdx.z;
  const int splits = gridDim.x;
  const int32_t last_key = a.positions[token];
  const int key0 = split * chunk;
  if (key0 > last_key) return;  // beyond this sequence: the merge kernel never reads this chunk
  const int n_keys = min(chunk, last_key + 1 - key0);
  const int64_t slot = a.slots ? a.slots[token] : 0;
  const int64_t row_stride = a.kv_heads * kHeadDim;
  const bf16* k_rows = a.k_cache + (slot * a.max_ctx + key0) * row_stride + kv_head * kHeadDim;
  const bf16* v_rows = a.v_cache + (slot * a.max_ctx + key0) * row_stride + kv_head * kHeadDim;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  const bf16* q_group = a.q + (int64_t(token) * a.q_heads + int64_t(kv_head) * kGroup) * kHeadDim;
  for (int i = threadIdx.x; i < kGroup * kHeadDim; i += kThreads) q_s[i] = __bfloat162float(q_group[i]);
  __syncthreads();

  // Phase 1: scores[g][key] = q_g · k_key * scale.
  {
    const int lane_in_key = lane % kLanesPerKey;
    float q_reg[kGroup][8];
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
#pragma unroll
      for (int e = 0; e < 8; ++e) q_reg[g][e] = q_s[g * kHeadDim + lane_in_key * 8 + e];
    // The loop bound is warp-uniform (all lanes take part in the shuffles); lanes past the end compute on zeros.
    // Unrolled so several K loads are in flight before the first shuffle waits on one.
#pragma unroll 4
    for (int base = warp * kKeysPerWarp; base < n_keys; base += kWarps * kKeysPerWarp) {
      const int key = base + lane / kLanesPerKey;
      const bool valid = key < n_keys;
      float k_f[8] = {};
      if (valid)
        bf16x8_to_float(*reinterpret_cast<const Bf16x8*>(k_rows + int64_t(key) * row_stride + lane_in_key * 8), k_f);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += q_reg[g][e] * k_f[e];
#pragma unroll
        for (int offset = kLanesPerKey / 2; offset > 0; offset >>= 1)
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        if (valid && lane_in_key == 0) scores[g * chunk + key] = dot * a.scale;
      }
    }
  }
  __syncthreads();

  // Phase 2: exact softmax numerators over the chunk, per q head.
  for (int g = warp; g < kGroup; g += kWarps) {
    float m = -FLT_MAX;
    for (int key = lane; key < n_keys; key += kWarpSize) m = fmaxf(m, scores[g * chunk + key]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int key = lane; key < n_keys; key += kWarpSize) {
      const float p = expf(scores[g * chunk + key] - m);
      scores[g * chunk + key] = p;
      sum += p;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      stats[g] = m;
      stats[kGroup + g] = sum;
    }
  }
  __syncthreads();

  // Phase 3: P·V. Thread = (key group, 8 dims); each V row is read once for all kGroup heads.
  const int key_group = threadIdx.x / kLanesPerKey, dim0 = (threadIdx.x % kLanesPerKey) * 8;
  float acc[kGroup][8] = {};
#pragma unroll 4
  for (int key = key_group; key < n_keys; key += kKeyGroups) {
    float v_f[8];
    bf16x8_to_float(*reinterpret_cast<const Bf16x8*>(v_rows + int64_t(key) * row_stride + dim0), v_f);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const float p = scores[g * chunk + key];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += p * v_f[e];
    }
  }
  __syncthreads();  // every thread is done with scores: reuse it for the cross-key-group sum
  float* reduce = scores;  // (kKeyGroups, kGroup, kHeadDim)
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) reduce[(key_group * kGroup + g) * kHeadDim + dim0 + e] = acc[g][e];
  __syncthreads();
  for (int o = threadIdx.x; o < kGroup * kHeadDim; o += kThreads) {
    float sum = 0.0f;
#pragma unroll 4
    for (int kg = 0; kg < kKeyGroups; ++kg) sum += reduce[kg * kGroup * kHeadDim + o];
    const int g = o / kHeadDim, d = o % kHeadDim;
    const int64_t head = int64_t(kv_head) * kGroup + g;
    float* out = partials + ((int64_t(token) * a.q_heads + head) * splits + split) * (kHeadDim + 2);
    out[d] = sum;
    if (d == 0) {
      out[kHeadDim] = stats[g];
      out[kHeadDim + 1] = stats[kGroup + g];
    }
  }
  if constexpr (kFusedMerge) {
    __shared__ int is_last;
    __threadfence();  // this CTA's partials are visible device-wide before it counts itself done
    __syncthreads();
    if (threadIdx.x == 0) {
      const int valid = (last_key + chunk) / chunk;
      int* counter = counters + int64_t(token) * a.kv_heads + kv_head;
      is_last = atomicAdd(counter, 1) + 1 == valid;
      if (is_last) *counter = 0;  // ready for the next launch (graph replays reuse the workspace)
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const int valid = (last_key + chunk) / chunk;
    for (int o = threadIdx.x; o < kGroup * kHeadDim; o += kThreads) {
      const int g = o / kHeadDim, d = o % kHeadDim;
      const int64_t head = int64_t(kv_head) * kGroup + g;
      const float* base = partials + (int64_t(token) * a.q_heads + head) * splits * (kHeadDim + 2);
      a.out[(int64_t(token) * a.q_heads + head) * kHeadDim + d] =
          __float2bfloat16_rn(merge_split_partials<kHeadDim>(base, valid, d));
    }
  }
}


template <int kHeadDim, int kGroup, bool kFusedMerge>
void launch_split(const AttentionArgs& a, const SplitPlan& plan, int* counters, cudaStream_t stream) {
  const size_t smem = size_t(smem_floats<kHeadDim, kGroup>(plan.chunk)) * sizeof(float);
  static bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(split_kv_kernel<kHeadDim, kGroup, kFusedMerge>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem_floats<kHeadDim, kGroup>(kMaxChunk) * sizeof(float))));
    return true;
  }();
  (void)configured;
  const dim3 grid(unsigned(plan.splits), unsigned(a.kv_heads), unsigned(a.tokens));
  launch(split_kv_kernel<kHeadDim, kGroup, kFusedMerge>, grid, dim3(kThreads), smem, stream, a, plan.chunk,
         partials_base(a), counters);
}

template <int kHeadDim, bool kFusedMerge>
void launch_group(const AttentionArgs& a, const SplitPlan& plan, int* counters, cudaStream_t stream) {
  switch (a.q_heads / a.kv_heads) {
    case 1: launch_split<kHeadDim, 1, kFusedMerge>(a, plan, counters, stream); break;
    case 2: launch_split<kHeadDim, 2, kFusedMerge>(a, plan, counters, stream); break;
    case 3: launch_split<kHeadDim, 3, kFusedMerge>(a, plan, counters, stream); break;
    case 4: launch_split<kHeadDim, 4, kFusedMerge>(a, plan, counters, stream); break;
    case 5: launch_split<kHeadDim, 5, kFusedMerge>(a, plan, counters, stream); break;
    case 6: launch_split<kHeadDim, 6, kFusedMerge>(a, plan, counters, stream); break;
    case 7: launch_split<kHeadDim, 7, kFusedMerge>(a, plan, counters, stream); break;
    case 8: launch_split<kHeadDim, 8, kFusedMerge>(a, plan, counters, stream); break;
    default: throw std::invalid_argument("flash_decode: GQA group must be 1..8");
  }
}

template <bool kFusedMerge>
void launch_splits(const AttentionArgs& a, const SplitPlan& plan, int* counters, cudaStream_t stream) {
  if (a.head_dim == 128) {
    launch_group<128, kFusedMerge>(a, plan, counters, stream);
  } else {
    launch_group<64, kFusedMerge>(a, plan, counters, stream);
  }
}

inline bool supports(const AttentionArgs& a) {
  const int64_t group = a.kv_heads > 0 ? a.q_heads / a.kv_heads : 0;
  return (a.head_dim == 64 || a.head_dim == 128) && group >= 1 && group <= 8 && a.q_heads % a.kv_heads == 0 &&
         a.tokens <= kMaxTokens && a.workspace != nullptr;
}

}  // namespace qwen3::kernels::flash_decode
