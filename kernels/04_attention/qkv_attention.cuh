// Pieces shared by the fused decode attention versions (v1_qkv_attention_cluster, v2_qkv_attention_mma). Host: how
// many CTAs (one thread-block cluster) split a token's keys for one kv head, and whether the device can launch
// clusters at all. Device: which keys a CTA takes, the QK-norm/RoPE prologue with the new row's cache store, and
// the output with the cluster merge.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "kernels/03_rope/qk_norm_rope.cuh"
#include "kernels/04_attention/flash_decode.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::qkv_attention {

struct ClusterPlan {
  int cluster;   // CTAs per (token, kv head): a power of two <= max_cluster
  int keys_cap;  // keys one CTA may get: >= ceil((max_position + 1) / cluster), a multiple of tile_keys
};

// The fewest CTAs (a power of two, at most max_cluster) that leave each at most keys_per_cta keys of a context of
// max_position + 1 keys; past max_cluster CTAs each takes more.
inline ClusterPlan plan_clusters(int64_t max_position, int keys_per_cta, int max_cluster, int tile_keys) {
  const int64_t keys = max_position + 1;
  int cluster = 1;
  while (cluster < max_cluster && (keys + cluster - 1) / cluster > keys_per_cta) cluster *= 2;
  const int64_t per_cta = (keys + cluster - 1) / cluster;
  return {cluster, int((per_cta + tile_keys - 1) / tile_keys * tile_keys)};
}

// Thread-block clusters need compute capability 9.0.
inline bool device_has_clusters() { return device_compute_major() >= 9; }

// ---- device -------------------------------------------------------------------------------------------------
// The keys of a token at `position` that CTA `split` of `splits` takes: [key0, key0 + n_keys), contiguous,
// ceil((position + 1) / splits) a CTA (trailing CTAs of a tiny context may get none). The CTA whose range ends at
// the new key (new_key >= 0, its local index) computes that key and stores it in the cache.
struct KeyRange {
  int key0, n_keys, new_key;
};

__device__ __forceinline__ KeyRange key_range(int32_t position, int split, int splits) {
  const int chunk = (position + splits) / splits;
  const int key0 = split * chunk;
  const int n_keys = max(0, min(chunk, position + 1 - key0));
  const bool owner = key0 <= position && position < key0 + chunk;
  return {key0, n_keys, owner ? n_keys - 1 : -1};
}

// The element offset in k_cache / v_cache (slots, max_ctx, kv_heads, kHeadDim) of the first K/V row a split starting
// at key0 reads: key min(key0, position) of kv head kv_head in slot `slot` (a split past the position, which has no
// keys, points at the position's row and reads none). row_stride: kv_heads * kHeadDim, elements between two keys.
template <int kHeadDim>
__device__ __forceinline__ int64_t split_first_row(int64_t slot, int64_t max_ctx, int key0, int32_t position,
                                                   int64_t row_stride, int kv_head) {
  return (slot * max_ctx + min(key0, position)) * row_stride + int64_t(kv_head) * kHeadDim;
}

// QK-norm + RoPE, a warp a head: warps [0, group) the group's q heads of kv_head into q_s (group, kHeadDim); with
// `owner`, one more the new key into new_kv[0, kHeadDim) and its cache row, one the new value (copied as is) into
// new_kv[kHeadDim, 2 kHeadDim) and its cache row. T: float or bf16, what the caller keeps in shared memory (the
// values are bf16 either way). store_in_cache false: the owner's new rows go to new_kv only (qkv_attention_o v41:
// every cluster computes the new key, one stores it). PRECOND: blockDim.x == kWarps * 32; head_dim == kHeadDim (64
// or 128).
template <int kHeadDim, int kWarps, class T>
__device__ __forceinline__ void prepare_q_and_new_kv(const QkNormRopeCacheArgs& p, int token, int kv_head,
                                                     int group, int32_t position, int64_t slot, bool owner, T* q_s,
                                                     T* new_kv, bool store_in_cache = true) {
  constexpr int kPerLane = kHeadDim / 64, kHalf = kHeadDim / 2;
  const auto held = [](bf16 v) {
    if constexpr (std::is_same_v<T, float>) {
      return __bfloat162float(v);
    } else {
      return v;
    }
  };
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t qkv_width = (p.q_heads + 2 * p.kv_heads) * kHeadDim;
  const bf16* qkv_row = p.qkv + int64_t(token) * qkv_width;
  const int64_t new_row = ((slot * p.max_ctx + position) * p.kv_heads + kv_head) * kHeadDim;
  for (int job = warp; job < group + (owner ? 2 : 0); job += kWarps) {
    if (job <= group) {
      const bool is_q = job < group;
      const int64_t head = is_q ? int64_t(kv_head) * group + job : p.q_heads + kv_head;
      float lo[kPerLane], hi[kPerLane];
      qk_norm_rope_warp<kPerLane>(qkv_row + head * kHeadDim, is_q ? p.q_norm : p.k_norm, p.eps, position,
                                  p.inv_freq, p.attention_factor, lo, hi);
      T* dst = is_q ? q_s + job * kHeadDim : new_kv;
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int i = lane * kPerLane + e;
        const bf16 lo_b = __float2bfloat16_rn(lo[e]), hi_b = __float2bfloat16_rn(hi[e]);
        dst[i] = held(lo_b);
        dst[i + kHalf] = held(hi_b);
        if (!is_q && store_in_cache) {
          p.k_cache[new_row + i] = lo_b;
          p.k_cache[new_row + i + kHalf] = hi_b;
        }
      }
    } else {
      const bf16* src = qkv_row + (p.q_heads + p.kv_heads + kv_head) * kHeadDim;
      for (int i = lane; i < kHeadDim; i += kWarpSize) {
        if (store_in_cache) p.v_cache[new_row + i] = src[i];
        new_kv[kHeadDim + i] = held(src[i]);
      }
    }
  }
}

// Writes the group's output, out[o] for o < outputs (= group * kHeadDim; q head o / kHeadDim), from the partial
// results of the CTAs: partial[o] (unnormalized), stat_max[g], stat_sum[g] in each CTA's shared memory. With
// `used` == 1 the calling CTA holds everything and writes it alone (no cluster barrier). Otherwise every one of
// the `launched` CTAs of the cluster calls this; each merges a 1/launched slice from the first `used` CTAs (the
// ones with keys), then waits again so its shared memory outlives the others' reads.
// PRECOND: this CTA's partial and statistics are written before the call (by any of its threads).
template <int kHeadDim, int kThreads>
__device__ __forceinline__ void write_output(const float* partial, const float* stat_max, const float* stat_sum,
                                             int outputs, int split, int used, int launched, bf16* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (used == 1) {
    __syncthreads();
    for (int o = threadIdx.x; o < outputs; o += kThreads)
      out[o] = __float2bfloat16_rn(partial[o] / stat_sum[o / kHeadDim]);
    return;
  }
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's partial output and statistics are complete and visible to the cluster
  const int share = (outputs + launched - 1) / launched;
  const int end = min(outputs, (split + 1) * share);
  for (int o = split * share + threadIdx.x; o < end; o += kThreads) {
    const int g = o / kHeadDim;
    float m = -FLT_MAX;
    for (int s = 0; s < used; ++s) m = fmaxf(m, cluster.map_shared_rank(stat_max, s)[g]);
    float total = 0.0f, value = 0.0f;
    for (int s = 0; s < used; ++s) {
      const float w = expf(cluster.map_shared_rank(stat_max, s)[g] - m);
      total += cluster.map_shared_rank(stat_sum, s)[g] * w;
      value += cluster.map_shared_rank(partial, s)[o] * w;
    }
    out[o] = __float2bfloat16_rn(value / total);
  }
  cluster.sync();  // this CTA's shared memory stays alive until every CTA of the cluster has read it
#endif
}

// write_output without a cluster (v6-v12's long contexts, where more CTAs split a token's keys than a portable
// cluster holds): every CTA writes its partial output and statistics to `partials` (the flash_decode.cuh workspace
// layout: ((token * q_heads + head) * splits + split) * (kHeadDim + 2) floats, the output then max and sum), counts
// itself done in `counter`, and the last of the `splits` CTAs merges them all and resets the counter for the next
// launch. kWarpMerge (v12): the last CTA first takes each head's split maxima and weighted sums a warp per head, one
// split per lane (all of a head's L2 reads in flight at once), keeps the weights in `scratch` (>= group * splits
// floats of shared memory), then every output element is one pass over the splits; else (v6-v11) each element
// reads every split's max in one pass and its sum and value in a second (two chains of L2 round trips per thread).
// PRECOND: as write_output; every CTA of the (token, kv head) calls it; the counter is 0 before the first launch;
// group <= kMaxGroup.
template <int kHeadDim, int kThreads, int kMaxGroup, bool kWarpMerge>
__device__ __forceinline__ void write_output_global(const float* partial, const float* stat_max,
                                                    const float* stat_sum, int group, int split, int splits,
                                                    float* partials, int* counter, bf16* out,
                                                    float* scratch = nullptr) {
  constexpr int kStride = kHeadDim + 2;
  const int outputs = group * kHeadDim;
  __shared__ int is_last;
  __syncthreads();  // partial and statistics complete
  for (int o = threadIdx.x; o < outputs; o += kThreads) {
    const int g = o / kHeadDim, d = o % kHeadDim;
    float* dst = partials + (int64_t(g) * splits + split) * kStride;
    dst[d] = partial[o];
    if (d == 0) {
      dst[kHeadDim] = stat_max[g];
      dst[kHeadDim + 1] = stat_sum[g];
    }
  }
  __threadfence();  // this CTA's partials are visible device-wide before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) {
    is_last = atomicAdd(counter, 1) + 1 == splits;
    if (is_last) *counter = 0;  // ready for the next launch (graph replays reuse the workspace)
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  if constexpr (kWarpMerge) {
    constexpr int kWarps = kThreads / kWarpSize;
    __shared__ float totals[kMaxGroup];  // per head
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    for (int g = warp; g < group; g += kWarps) {
      const float* base = partials + int64_t(g) * splits * kStride;
      float m = -FLT_MAX;
      for (int s = lane; s < splits; s += kWarpSize) m = fmaxf(m, __ldcg(base + s * kStride + kHeadDim));
      m = warp_max(m);
      float total = 0.0f;
      for (int s = lane; s < splits; s += kWarpSize) {
        const float w = expf(__ldcg(base + s * kStride + kHeadDim) - m);
        scratch[g * splits + s] = w;
        total += __ldcg(base + s * kStride + kHeadDim + 1) * w;
      }
      total = warp_sum(total);
      if (lane == 0) totals[g] = total;
    }
    __syncthreads();
    for (int o = threadIdx.x; o < outputs; o += kThreads) {
      const int g = o / kHeadDim, d = o % kHeadDim;
      const float* base = partials + int64_t(g) * splits * kStride + d;
      const float* w = scratch + g * splits;
      float value = 0.0f;
#pragma unroll 8
      for (int s = 0; s < splits; ++s) value += __ldcg(base + s * kStride) * w[s];
      out[o] = __float2bfloat16_rn(value / totals[g]);
    }
  } else {
    for (int o = threadIdx.x; o < outputs; o += kThreads) {
      const int g = o / kHeadDim, d = o % kHeadDim;
      out[o] = __float2bfloat16_rn(
          flash_decode::merge_split_partials<kHeadDim>(partials + int64_t(g) * splits * kStride, splits, d));
    }
  }
}

}  // namespace qwen3::kernels::qkv_attention
