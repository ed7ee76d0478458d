// v1_qkv_attention_o and v2_qkv_attention_o_head_merge: the decode attention and the o projection (with its
// residual add) in one launch, batch 1.
//
// Why: in the chain, the fused attention (v12) is a ~8 us dependent chain per layer while HBM idles (qkv read,
// QK-norm/RoPE, K/V tiles, merge), and the o GEMV behind it can only start its first loads under PDL; together
// they cost ~17 us a layer for 7.4 us of o-projection bytes (H200 ablation: 0.616 ms of the step at context 128).
// The o weights do not depend on the attention, so here the CTAs that compute o stream their weights into shared
// memory from the moment they are resident, and the attention runs while those bytes arrive.
//
// One CTA per SM, ceil(hidden / SMs) rows of w_o each (32 for Qwen3-8B: 256 KB, contiguous); all CTAs must be
// resident at once (they wait on each other). CTA c:
//  1. At its start, before the PDL wait: TMA bulk copies of its first rows (8 KB each) into shared memory, as many
//     as the budget leaves room for (13 of 32 at the default 160 KB); the rest stream from HBM in step 3.
//  2. If c < kv_heads * splits (the key splits this position needs): the tensor-core attention
//     (attention_mma::attend_keys, v12's loop) over split c / kv_heads of kv head c % kv_heads, whose partial
//     output and softmax statistics go to the workspace; the split that owns the new key stores it in the cache.
//  3. The bf16 attention output, exactly the values qkv_attention writes to out (a warp per q head takes the merge
//     weights, then every output element is one pass over the splits). v1: every CTA waits for all splits (one
//     counter) and merges every head itself. v2: the last split of each kv head merges that head into out once,
//     and every CTA waits for the heads (one counter) and reads out: v1's 128 CTAs reading the same partials at
//     once made an L2 hot spot (5.1 us against 0.8 at context 128, ITERATIONS.md session 5).
//  4. Every CTA multiplies its rows by it and updates them in the residual, bf16(residual + bf16(o)), leaving
//     Σ residual² over its rows for the next norm GEMV.
// The counters are zero between launches: the last CTA to use them resets them.
// A first design gave CTA (row block, kv head) the w_o columns of one kv head (1 KB per row: 176 bulk copies a
// CTA) and added the heads' partial sums in a last pass: 29 us isolated, 4.79 vs 4.29 ms per step (ITERATIONS.md).
// PRECOND: tokens == 1; head_dim 64 or 128; q_heads / kv_heads <= 8; positions[0] < max_ctx; sm_90.

#include <algorithm>
#include <atomic>
#include <cfloat>

#include "kernels/04_attention/attention_mma.cuh"
#include "kernels/04_attention/qkv_attention.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kThreads = 256;
[[maybe_unused]] constexpr int kWarps = kThreads / kWarpSize;  // unused in the sm_89 build (empty body)
using attention_mma::kMaxGroup;
using attention_mma::kTileKeys;
constexpr int kMaxSplits = kWarpSize;     // splits per kv head are weighed one per lane
constexpr int kDefaultKeysPerSplit = 64;  // one K tile and one V tile per split before more CTAs share the keys
constexpr int kMaxKeysPerSplit = 2048;
constexpr size_t kMaxSmem = 227 * 1024;
constexpr size_t kStaticSmemSlack = 1024;  // the __shared__ variables of the kernel and its helpers
// What a CTA takes by default, measured (H200, Qwen3-8B, context 128, ms per decode step): 64 KB 4.58, 96 KB 4.55,
// 128 KB 4.38, 160 KB 4.36, 200 KB 4.60, 226 KB 4.81 (the chain: 4.31). Past ~160 KB the gate|up GEMV launched
// early behind it (PDL) no longer finds room for a CTA beside it, and the staged rows cannot make that up.
constexpr size_t kDefaultSmem = 160 * 1024;
// Rows a warp multiplies together (independent FMA chains and shuffle trees); unused in the sm_89 build.
[[maybe_unused]] constexpr int kRowsAtOnce = 4;

// The grid: one CTA per SM, ceil(hidden / SMs) rows each (at least kv_heads CTAs, one per kv head's first split).
struct Grid {
  int ctas, rows_per_cta;
};

Grid grid_for(int64_t hidden, int64_t kv_heads) {
  const int64_t sms = device_sm_count();
  const int64_t rows = (hidden + sms - 1) / sms;
  return {int(std::max<int64_t>(kv_heads, (hidden + rows - 1) / rows)), int(rows)};
}

// Workspace, in 4-byte words: counters (v1: splits done; v2: heads merged; both: CTAs done reading, then v2's
// splits done per kv head) padded to 16 bytes; the split statistics, (q_heads, max_splits) pairs (max, sum),
// padded to 16 bytes; the split outputs, (q_heads, max_splits, head_dim) floats, unnormalized.
__host__ __device__ inline int64_t counter_words(int64_t kv_heads) { return (2 + kv_heads + 3) / 4 * 4; }
__host__ __device__ inline int64_t stats_words(int64_t q_heads, int64_t max_splits) {
  return (q_heads * max_splits * 2 + 3) / 4 * 4;
}

int max_splits_for(const Grid& g, int64_t kv_heads) {
  return int(std::min<int64_t>(kMaxSplits, g.ctas / kv_heads));
}

// Shared memory, byte offsets from the dynamic base.
struct Layout {
  size_t ring, q, new_kv, partial, x, weights, residual, scores, p, w, bytes;
  int staged_rows;
};

Layout layout_for(int head_dim, int stages, int q_heads, int group, int keys_cap, int rows_per_cta, size_t budget) {
  Layout l{};
  size_t at = 16;  // the mbarrier
  const auto take = [&](size_t bytes) {
    const size_t offset = at;
    at = (at + bytes + 15) / 16 * 16;
    return offset;
  };
  l.ring = take(size_t(stages) * kTileKeys * head_dim * 2);
  l.q = take(size_t(kMaxGroup) * head_dim * 2);
  l.new_kv = take(size_t(2) * head_dim * 2);
  l.partial = take((size_t(kMaxGroup) * head_dim + 2 * kMaxGroup) * 4);
  l.x = take(size_t(q_heads) * head_dim * 2);
  l.weights = take(size_t(q_heads) * (kMaxSplits + 1) * 4);
  l.residual = take(size_t(rows_per_cta) * 2);
  l.scores = take(size_t(group) * keys_cap * 4);
  l.p = take(size_t(group) * attention_mma::p_stride(keys_cap) * 2);
  const size_t row_bytes = size_t(q_heads) * head_dim * 2;
  const size_t room = budget > at ? budget - at : 0;
  l.staged_rows = int(std::min<size_t>(size_t(rows_per_cta), room / row_bytes));
  l.w = take(size_t(l.staged_rows) * row_bytes);
  l.bytes = at;
  return l;
}

// Points of a CTA's work stamped into QkvAttentionOArgs::trace (profiling).
enum QkvAttentionOTraceEvent {
  kTraceStart,        // the CTA began (resident)
  kTraceIssued,       // its w_o copies are issued (thread 0)
  kTraceWaited,       // past the PDL wait
  kTraceAttended,     // its split is written and counted (0: the CTA had no split)
  kTraceAllSplits,    // every split is in
  kTraceMerged,       // the attention output is in shared memory
  kTraceWeightsIn,    // the staged w_o rows have landed
  kTraceEnd,          // its rows and norm partial are written
};

[[maybe_unused]] __device__ __forceinline__ void stamp(uint64_t* trace, int event) {
  if (trace != nullptr && threadIdx.x == 0) trace[blockIdx.x * kQkvAttentionOTraceEvents + event] = global_timer_ns();
}

// Thread 0 waits until *counter >= target (traps if it never gets there), then the block goes on.
[[maybe_unused]] __device__ __forceinline__ void wait_for(const uint32_t* counter, uint32_t target) {
  if (threadIdx.x == 0) spin_until_at_least(counter, target);
  __syncthreads();
}

// kHeadMerge (v2): the last split of each kv head merges that head's splits and writes its bf16 output to
// attention.out; every CTA then reads those 8 KB (Qwen3-8B) instead of every split's fp32 partials (v1: 48 KB at
// 3 splits a head, 256 KB at 16), one more counter round trip for far fewer bytes read by all CTAs at once.
template <int kHeadDim, int kStages, bool kHeadMerge>
__global__ void __launch_bounds__(kThreads, 1)
    qkv_attention_o_kernel(QkvAttentionOArgs a, Layout l, int keys_cap, int keys_per_split, int rows_per_cta,
                           int max_splits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  const QkNormRopeCacheArgs& p = a.attention.prep;
  const int cta = blockIdx.x;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int group = int(p.q_heads / p.kv_heads);
  const int64_t q_dim = p.q_heads * kHeadDim;
  const int64_t row0 = int64_t(cta) * rows_per_cta;
  const int64_t rows_left = a.hidden - row0;
  const int rows = rows_left <= 0 ? 0 : int(rows_left < rows_per_cta ? rows_left : rows_per_cta);
  const int staged = min(rows, l.staged_rows);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem);
  bf16* x_s = reinterpret_cast<bf16*>(smem + l.x);              // (q_dim): the merged attention output, bf16
  float* weights = reinterpret_cast<float*>(smem + l.weights);  // (q_heads, kMaxSplits + 1): merge weights, total
  const bf16* w_s = reinterpret_cast<const bf16*>(smem + l.w);  // (staged, q_dim)
  const bf16* w_rows = a.w_o + row0 * q_dim;                    // (rows, q_dim)

  // 1. This CTA's o weights, before anything else: nothing writes them.
  stamp(a.trace, kTraceStart);
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  // Every CTA of the grid is resident once all have passed this point, so the next kernel can only take SM room
  // none of them needs: the waits below on other CTAs of this grid cannot starve.
  pdl_launch_dependents();
  if (warp == 0) {
    const uint64_t policy = make_evict_first_policy();
    if (lane == 0 && staged > 0) mbarrier_arrive_expect_tx(bar, uint32_t(staged * q_dim * 2));
    __syncwarp();
    for (int i = lane; i < staged; i += kWarpSize)
      bulk_copy_g2s(const_cast<bf16*>(w_s) + i * q_dim, w_rows + i * q_dim, uint32_t(q_dim * 2), bar, policy);
    // Default none: prefetching the rest into L2 at the start measured slower (4.42 vs 4.36 ms per step), its
    // traffic meets the attention's latency-bound reads.
    const int prefetched = a.l2_prefetch_rows < 0 ? staged : min(rows, staged + a.l2_prefetch_rows);
    for (int i = staged + lane; i < prefetched; i += kWarpSize)
      prefetch_l2_bulk(w_rows + i * q_dim, uint32_t(q_dim * 2));
  }
  stamp(a.trace, kTraceIssued);
  pdl_wait();  // qkv comes from the previous kernel, the residual and the cached rows from earlier ones
  stamp(a.trace, kTraceWaited);
  if (a.trace != nullptr && threadIdx.x == 0) a.trace[blockIdx.x * kQkvAttentionOTraceEvents + kTraceAttended] = 0;

  // 2. One split of one kv head's keys, if the position needs this CTA.
  const int32_t position = p.positions[0];
  const int splits = min(max_splits, (position + keys_per_split) / keys_per_split);
  uint32_t* arrivals = reinterpret_cast<uint32_t*>(a.workspace);  // v1: splits done; v2: kv heads merged
  uint32_t* departures = arrivals + 1;
  uint32_t* head_arrivals = arrivals + 2;                               // v2: (kv_heads) splits done
  float* split_stats = a.workspace + counter_words(p.kv_heads);                      // (q_heads, max_splits, 2)
  float* split_values = split_stats + stats_words(p.q_heads, max_splits);             // (q_heads, max_splits, D)
  // This CTA's residual rows, read once the previous kernel is done, long before they are needed.
  bf16* residual_s = reinterpret_cast<bf16*>(smem + l.residual);  // (rows)
  // With a delta (the previous layer's MLP, v1_mlp_split_down), it is added first, rounded as the chain's down
  // GEMV adds its output, and zeroed for the next MLP launch: the QKV GEMV, its other reader, is done.
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    bf16 h = a.residual[row0 + i];
    if (a.residual_delta != nullptr) {
      float delta = 0.0f;  // the sum of the copies, in order
      for (int j = 0; j < a.delta_copies; ++j) delta += a.residual_delta[j * a.hidden + row0 + i];
      h = __float2bfloat16_rn(__bfloat162float(h) + bf16_round(delta));
      for (int j = 0; j < a.delta_copies; ++j) a.residual_delta[j * a.hidden + row0 + i] = 0.0f;
    }
    residual_s[i] = h;
  }
  // The attention output of q heads [h_begin, h_end) from the splits, each group of 4 outputs handed to
  // sink(quad, lo, hi). Each pass has all its L2 reads in flight at once: first a warp per q head (one split per
  // lane) turns the statistics into merge weights, then each thread merges 4 consecutive outputs of a head at a
  // time, kSplitsAtOnce splits per round of loads. PRECOND: every thread calls it; h_end - h_begin <= kWarps * 8.
  const auto merge_heads = [&](int h_begin, int h_end, auto&& sink) {
    constexpr int kHeadsPerWarp = 8;
    float2 stat[kHeadsPerWarp];
#pragma unroll
    for (int k = 0; k < kHeadsPerWarp; ++k) {
      const int h = h_begin + warp + k * kWarps;
      stat[k] = h < h_end && lane < splits
                    ? __ldcg(reinterpret_cast<const float2*>(split_stats) + int64_t(h) * max_splits + lane)
                    : make_float2(-FLT_MAX, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < kHeadsPerWarp; ++k) {
      const int h = h_begin + warp + k * kWarps;
      if (h >= h_end) break;
      const float m = warp_max(stat[k].x);
      const float w = lane < splits ? expf(stat[k].x - m) : 0.0f;
      const float total = warp_sum(stat[k].y * w);
      weights[h * (kMaxSplits + 1) + lane] = w;
      if (lane == 0) weights[h * (kMaxSplits + 1) + kMaxSplits] = total;
    }
    __syncthreads();
    constexpr int kSplitsAtOnce = 4;
    for (int quad = h_begin * kHeadDim / 4 + int(threadIdx.x); quad < h_end * kHeadDim / 4; quad += kThreads) {
      const int h = quad * 4 / kHeadDim, d = quad * 4 % kHeadDim;
      const float4* base = reinterpret_cast<const float4*>(split_values + int64_t(h) * max_splits * kHeadDim + d);
      const float* w = weights + h * (kMaxSplits + 1);
      float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int s0 = 0; s0 < splits; s0 += kSplitsAtOnce) {
        float4 v[kSplitsAtOnce];
#pragma unroll
        for (int j = 0; j < kSplitsAtOnce; ++j)
          v[j] = s0 + j < splits ? __ldcg(base + (s0 + j) * (kHeadDim / 4)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int j = 0; j < kSplitsAtOnce; ++j) {
          const float wj = s0 + j < splits ? w[s0 + j] : 0.0f;
          value.x += v[j].x * wj;
          value.y += v[j].y * wj;
          value.z += v[j].z * wj;
          value.w += v[j].w * wj;
        }
      }
      const float total = w[kMaxSplits];
      sink(quad, __floats2bfloat162_rn(value.x / total, value.y / total),
           __floats2bfloat162_rn(value.z / total, value.w / total));
    }
  };
  const auto store_quad = [](bf16* dst, int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) {
    reinterpret_cast<__nv_bfloat162*>(dst + quad * 4)[0] = lo;
    reinterpret_cast<__nv_bfloat162*>(dst + quad * 4)[1] = hi;
  };

  if (cta < splits * p.kv_heads) {
    const int kv_head = cta % int(p.kv_heads), split = cta / int(p.kv_heads);
    bf16* q_s = reinterpret_cast<bf16*>(smem + l.q);
    bf16* new_kv = reinterpret_cast<bf16*>(smem + l.new_kv);
    float* partial = reinterpret_cast<float*>(smem + l.partial);
    float* stat_max = partial + kMaxGroup * kHeadDim;
    float* stat_sum = stat_max + kMaxGroup;
    const attention_mma::Smem sm{reinterpret_cast<bf16*>(smem + l.ring), q_s, new_kv, partial, stat_max, stat_sum,
                                 reinterpret_cast<float*>(smem + l.scores), reinterpret_cast<bf16*>(smem + l.p)};
    const qkv_attention::KeyRange range = qkv_attention::key_range(position, split, splits);
    const int64_t slot = p.slots ? p.slots[0] : 0;
    const int64_t row_stride = p.kv_heads * kHeadDim;
    const int64_t first_row =
        (slot * p.max_ctx + min(range.key0, position)) * row_stride + int64_t(kv_head) * kHeadDim;
    attention_mma::attend_keys<kHeadDim, kThreads, kStages, 2, true>(
        sm, p.k_cache + first_row, p.v_cache + first_row, row_stride, range.n_keys, range.new_key, group, keys_cap,
        a.attention.scale, 0.0f, [&] {
          qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, 0, kv_head, group, position, slot,
                                                                range.new_key >= 0, q_s, new_kv);
        });
    __syncthreads();  // partial and statistics complete
    for (int o = threadIdx.x; o < group * kHeadDim; o += kThreads) {
      const int64_t head_split = (int64_t(kv_head) * group + o / kHeadDim) * max_splits + split;
      split_values[head_split * kHeadDim + o % kHeadDim] = partial[o];
      if (o % kHeadDim == 0)
        reinterpret_cast<float2*>(split_stats)[head_split] = make_float2(stat_max[o / kHeadDim], stat_sum[o / kHeadDim]);
    }
    __threadfence();  // visible device-wide before the split counts itself in
    __syncthreads();
    if constexpr (kHeadMerge) {
      __shared__ int last_split;
      if (threadIdx.x == 0) {
        last_split = atomicAdd(head_arrivals + kv_head, 1u) + 1 == uint32_t(splits);
        if (last_split) head_arrivals[kv_head] = 0;  // every split of the head is in: ready for the next launch
      }
      __syncthreads();
      if (last_split) {
        __threadfence();
        merge_heads(kv_head * group, (kv_head + 1) * group,
                    [&](int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) { store_quad(a.attention.out, quad, lo, hi); });
        __threadfence();  // the head's output is visible device-wide before it counts as merged
        __syncthreads();
        if (threadIdx.x == 0) atomicAdd(arrivals, 1u);
      }
    } else {
      if (threadIdx.x == 0) atomicAdd(arrivals, 1u);
    }
    stamp(a.trace, kTraceAttended);
  }

  // 3. The attention output: v1 merges every head's splits here, in every CTA; v2 reads the heads' outputs the
  // last split of each kv head merged.
  if constexpr (kHeadMerge) {
    wait_for(arrivals, uint32_t(p.kv_heads));
    stamp(a.trace, kTraceAllSplits);
    __threadfence();
    const uint4* merged = reinterpret_cast<const uint4*>(a.attention.out);
    for (int i = threadIdx.x; i < q_dim / 8; i += kThreads) reinterpret_cast<uint4*>(x_s)[i] = __ldcg(merged + i);
  } else {
    wait_for(arrivals, uint32_t(splits * p.kv_heads));
    stamp(a.trace, kTraceAllSplits);
    __threadfence();
    merge_heads(0, int(p.q_heads), [&](int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) {
      store_quad(x_s, quad, lo, hi);
      if (cta == 0) store_quad(a.attention.out, quad, lo, hi);
    });
  }
  __syncthreads();  // x_s complete; every thread of this CTA is past its reads of the partials
  stamp(a.trace, kTraceMerged);
  if (threadIdx.x == 0 && atomicAdd(departures, 1u) + 1 == gridDim.x) {
    *arrivals = 0;  // every CTA has seen the count: ready for the next launch
    *departures = 0;
  }

  // 4. o for this CTA's rows: a warp takes kRowsAtOnce rows at a time, a lane every 32nd 16-byte chunk of each
  // (staged rows from shared memory, the rest from global memory).
  const int chunks = int(q_dim / 8);
  const uint4* x_vec = reinterpret_cast<const uint4*>(x_s);
  if (staged > 0) mbarrier_wait_parity(bar, 0);
  stamp(a.trace, kTraceWeightsIn);
  float sq = 0.0f;
  for (int first = warp * kRowsAtOnce; first < rows; first += kWarps * kRowsAtOnce) {
    const uint4* src[kRowsAtOnce];
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r) {
      const int row = min(first + r, rows - 1);
      src[r] = reinterpret_cast<const uint4*>(row < staged ? w_s + int64_t(row) * q_dim : w_rows + row * q_dim);
    }
    float acc[kRowsAtOnce] = {};
#pragma unroll 4
    for (int c = lane; c < chunks; c += kWarpSize) {
      float x[8];
      bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x_vec[c]), x);
      uint4 w[kRowsAtOnce];
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) w[r] = src[r][c];
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) {
        float wf[8];
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[r]), wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] += wf[e] * x[e];
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r) acc[r] = warp_sum(acc[r]);
    if (lane < kRowsAtOnce && first + lane < rows) {
      float mine = acc[0];
#pragma unroll
      for (int r = 1; r < kRowsAtOnce; ++r) mine = lane == r ? acc[r] : mine;
      const int row = first + lane;
      const float updated = bf16_round(__bfloat162float(residual_s[row]) + bf16_round(mine));
      a.residual[row0 + row] = __float2bfloat16_rn(updated);
      sq += updated * updated;
    }
  }
  // Σ residual² over this CTA's rows, summed over warps in a fixed order.
  __shared__ float warp_sq[kWarps];
  sq = warp_sum(sq);
  if (lane == 0) warp_sq[warp] = sq;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += warp_sq[w];
    a.norm_partials[cta] = total;
  }
  stamp(a.trace, kTraceEnd);
#endif
}

struct Plan {
  Grid grid;
  int max_splits, keys_per_split, keys_cap, stages;
  size_t smem_budget;
};

Plan plan_for(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  Plan plan{};
  plan.grid = grid_for(a.hidden, p.kv_heads);
  plan.max_splits = max_splits_for(plan.grid, p.kv_heads);
  plan.keys_per_split = a.keys_per_split > 0 ? a.keys_per_split : kDefaultKeysPerSplit;
  // A split gets at most keys_per_split keys until there are max_splits of them, then ceil(keys / max_splits).
  const int64_t keys = a.attention.max_position + 1;
  const int64_t per_split = std::max<int64_t>(std::min<int64_t>(plan.keys_per_split, keys),
                                              (keys + plan.max_splits - 1) / plan.max_splits);
  plan.keys_cap = int((per_split + kTileKeys - 1) / kTileKeys * kTileKeys);
  plan.smem_budget = a.smem_bytes > 0 ? std::min(size_t(a.smem_bytes), kMaxSmem - kStaticSmemSlack) : kDefaultSmem;
  // K/V ring depth: 2 tiles where a split has at most two, else 4, or the tuning field's 2 / 4 / 8.
  plan.stages = a.ring_stages > 0 ? a.ring_stages : plan.keys_cap <= 2 * kTileKeys ? 2 : 4;
  return plan;
}

Layout layout_of(const QkvAttentionOArgs& a, const Plan& plan) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  return layout_for(int(p.head_dim), plan.stages, int(p.q_heads), int(p.q_heads / p.kv_heads),
                    plan.keys_cap, plan.grid.rows_per_cta, plan.smem_budget);
}

template <int kHeadDim, int kStages, bool kHeadMerge>
void launch_stages(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  constexpr auto kernel = qkv_attention_o_kernel<kHeadDim, kStages, kHeadMerge>;
  // Set once to the most this kernel ever asks for: the staged rows take what the rest leaves of the budget.
  static std::atomic<bool> configured{false};
  if (!configured.load()) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kMaxSmem - kStaticSmemSlack)));
    configured.store(true);
  }
  const Layout l = layout_of(a, plan);
  launch(kernel, dim3(unsigned(plan.grid.ctas)), dim3(kThreads), l.bytes, stream, a, l, plan.keys_cap,
         plan.keys_per_split, plan.grid.rows_per_cta, plan.max_splits);
}

template <int kHeadDim, bool kHeadMerge>
void launch_head_dim(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  if (plan.stages == 2) {
    launch_stages<kHeadDim, 2, kHeadMerge>(a, plan, stream);
  } else if (plan.stages == 4) {
    launch_stages<kHeadDim, 4, kHeadMerge>(a, plan, stream);
  } else {
    launch_stages<kHeadDim, 8, kHeadMerge>(a, plan, stream);
  }
}

template <bool kHeadMerge>
void launch_version(const QkvAttentionOArgs& a, cudaStream_t stream) {
  const Plan plan = plan_for(a);
  if (a.attention.prep.head_dim == 128) {
    launch_head_dim<128, kHeadMerge>(a, plan, stream);
  } else {
    launch_head_dim<64, kHeadMerge>(a, plan, stream);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t qkv_attention_o_partials(int64_t hidden, int64_t kv_heads) { return grid_for(hidden, kv_heads).ctas; }

int64_t qkv_attention_o_counter_bytes(int64_t, int64_t kv_heads) { return counter_words(kv_heads) * 4; }

int64_t qkv_attention_o_workspace_floats(int64_t hidden, int64_t q_heads, int64_t kv_heads, int64_t head_dim) {
  const int64_t splits = max_splits_for(grid_for(hidden, kv_heads), kv_heads);
  return counter_words(kv_heads) + stats_words(q_heads, splits) + q_heads * splits * head_dim;
}

bool qkv_attention_o_v1_supports(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  if (p.tokens != 1 || (p.head_dim != 64 && p.head_dim != 128)) return false;
  if (p.kv_heads < 1 || p.q_heads % p.kv_heads != 0 || p.q_heads / p.kv_heads > kMaxGroup) return false;
  if (p.q_heads > kWarps * 8) return false;  // the merge's heads per warp
  if (a.hidden < 1 || a.workspace == nullptr || a.w_o == nullptr || a.residual == nullptr) return false;
  if (a.delta_copies < 1) return false;
  if (a.attention.max_position < 0 || a.attention.max_position >= p.max_ctx) return false;
  if (a.keys_per_split < 0 || a.keys_per_split > kMaxKeysPerSplit || a.smem_bytes < 0) return false;
  if (a.ring_stages != 0 && a.ring_stages != 2 && a.ring_stages != 4 && a.ring_stages != 8) return false;
  if (device_compute_major() < 9) return false;
  const Plan plan = plan_for(a);
  // Every CTA resident at once (one per SM), at least one split per kv head, a split within the scores buffer,
  // partials per token within what the norm GEMVs read.
  if (plan.grid.ctas > device_sm_count() || plan.max_splits < 1 || plan.keys_cap > kMaxKeysPerSplit ||
      plan.grid.ctas > kMaxNormPartials)
    return false;
  // Room for the attention within the budget (the staged rows may be none).
  return layout_of(a, plan).bytes <= plan.smem_budget;
}

void launch_qkv_attention_o_v1(const QkvAttentionOArgs& a, cudaStream_t stream) { launch_version<false>(a, stream); }

// v2_qkv_attention_o_head_merge: v1 where the last split of each kv head merges the head (kHeadMerge above).
bool qkv_attention_o_v2_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v1_supports(a) && a.attention.out != nullptr;
}

void launch_qkv_attention_o_v2(const QkvAttentionOArgs& a, cudaStream_t stream) { launch_version<true>(a, stream); }

}  // namespace qwen3::kernels
