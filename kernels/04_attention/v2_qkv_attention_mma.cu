// v2_qkv_attention_mma: v1_qkv_attention_cluster with the two products on tensor cores. Nsight Compute on v1 at
// context 8192 (64 CTAs, one per SM) showed a warp issuing every 5 cycles and DRAM at 15%: the kernel was bound by
// instructions, ~4,000 warp-instructions per 64-key tile (16 lanes per key, a 4-level shuffle tree per q head for
// every score, 8 FMAs per V element per head), not by memory. Here a 64-key tile costs each warp one n-tile of
// q·Kᵀ (8 mma.sync m16n8k16 over head_dim 128) and one 16-dim slice of P·V (8 more): ~10x fewer instructions.
//
// Layout of the products (rows = the GQA group's q heads, at most 8 of the 16 rows of an m16n8k16 tile):
//  * S = Q Kᵀ: A = Q (bf16, built in registers once: rows >= group are zero), B = a K tile read with ldmatrix
//    (key rows are the "col" operand as stored). Scores go to shared memory in fp32, scaled.
//  * After the last K tile: an exact softmax per q head over the CTA's keys; P = bf16(exp(s - max)) (the bf16
//    rounding of P the attention bound allows), and the sum is taken over the rounded values it is used with.
//  * O = P V: A = P from shared memory (rows padded by 8 bf16 so the 8 rows hit disjoint banks), B = a V tile read
//    with ldmatrix.trans. Each warp owns head_dim / 8 output columns: no cross-warp reduction.
//  * K/V tiles are stored with 16-byte chunk c of key k at chunk c ^ (k % 8), so the 8 rows of every ldmatrix
//    land in 8 different bank groups.
// The pipeline, the QK-norm/RoPE prologue, the new key's handling and the cluster merge are v1's; the new key's
// row is written into its tile in shared memory (it is never loaded from the cache).
// PRECOND (decode): one token per cache slot; positions[t] < max_ctx; q_heads / kv_heads <= 8.

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <stdexcept>

#include "kernels/03_rope/qk_norm_rope.cuh"
#include "kernels/04_attention/attention_mma.cuh"
#include "kernels/04_attention/flash_decode.cuh"
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
constexpr int kMaxCluster = 8;
constexpr int kKeysPerCtaTarget = 128;
constexpr int kMaxKeysPerCta = 2048;
constexpr size_t kMaxSmem = 227 * 1024;

// Dynamic shared memory, byte offsets. keys_cap and group are per launch.
template <int kHeadDim, int kStages>
struct Layout {
  static constexpr int kTileElems = kTileKeys * kHeadDim;
  static constexpr size_t kRingBytes = size_t(kStages) * kTileElems * 2;
  static constexpr size_t kQ = kRingBytes;                               // bf16 (kMaxGroup, kHeadDim)
  static constexpr size_t kNew = kQ + size_t(kMaxGroup) * kHeadDim * 2;  // bf16 (2, kHeadDim): new k, new v
  static constexpr size_t kPartial = kNew + 2 * kHeadDim * 2;            // float (kMaxGroup, kHeadDim), max, sum
  static constexpr size_t kScores = kPartial + (size_t(kMaxGroup) * kHeadDim + 2 * kMaxGroup) * 4;
  static constexpr size_t p_offset(int keys_cap, int group) { return kScores + size_t(group) * keys_cap * 4; }
  static constexpr size_t bytes(int keys_cap, int group) {
    return p_offset(keys_cap, group) + size_t(group) * attention_mma::p_stride(keys_cap) * 2;
  }
};

template <int kHeadDim, int kStages, int kMerge, int kChains, bool kLean>
// kLean (v10): the K/V tile loads with each thread's offsets computed once (a thread always moves the same 16-byte
// chunk of every kThreads / kChunks-th key of a tile, and that stride keeps the swizzle), instead of a generic loop
// that recomputes key, chunk and swizzle per load: the loads and the result are the same bits. In SASS the generic
// issue was ~240 instructions of the ~850 of the tile loop, and ncu on v6 at 8192 counted ~5,350 instructions per
// warp at 6.9 cycles each: the kernel is bound by its own instruction latency, not by HBM (27% busy).
// kChains (2: v8 at long contexts): independent accumulator chains per product, so a warp's mma.sync do not all
// wait on the one before (ncu on v6 at 8192: 8 warps per SM, a warp issues every 6.9 cycles, 71% of the cycles with
// no eligible warp, "wait" the first stall reason). Sums the chains at the end: a different fp32 order.
// kMerge: 0 the cluster merge through distributed shared memory; 1 (v6-v11 at long contexts) no cluster, gridDim.x
// CTAs split the keys and the last one to finish merges through the workspace (qkv_attention::write_output_global);
// 2 (v12) that merge a warp per head (write_output_global's kWarpMerge), with the scores buffer as its scratch.
// keys_per_split: 0 (v2) splits every token's keys over all gridDim.x CTAs of its cluster; > 0 (v3) uses only
// as many as give each at most that many keys, so a short context in a long bucket runs on one CTA without the
// cluster barrier (the grid is sized on the host for the bucket, the position is only known on the device).
// a.l2_prefetch_bytes > 0 (v4, v5; the v2/v3 launchers clear it): pull a.l2_prefetch into L2, see below.
__global__ void __launch_bounds__(kThreads)
    qkv_attention_mma_kernel(QkvAttentionArgs a, int keys_cap, int keys_per_split, bool prefetch_before_wait) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using L = Layout<kHeadDim, kStages>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* ring = reinterpret_cast<bf16*>(smem);
  bf16* q_s = reinterpret_cast<bf16*>(smem + L::kQ);
  bf16* new_kv = reinterpret_cast<bf16*>(smem + L::kNew);
  float* partial = reinterpret_cast<float*>(smem + L::kPartial);
  float* stat_max = partial + kMaxGroup * kHeadDim;
  float* stat_sum = stat_max + kMaxGroup;
  float* scores = reinterpret_cast<float*>(smem + L::kScores);  // (group, keys_cap)

  if (a.pdl_trigger <= 0.0f) pdl_launch_dependents();  // else after a.pdl_trigger of the K/V tiles, below
  // v4/v5: the last warp asks L2 for this CTA's share of the next GEMV's weights (never written: safe before the
  // wait), after the wait (v4: HBM is then idle but for this kernel's K/V) or before it (v5: overlaps the QKV
  // GEMV's draining tail, when its last CTAs leave HBM partly idle).
  const bool prefetch = a.l2_prefetch_bytes > 0 && threadIdx.x / kWarpSize == kWarps - 1;
  if (prefetch && prefetch_before_wait)
    prefetch_share_l2(a.l2_prefetch, a.l2_prefetch_bytes, threadIdx.x % kWarpSize);
  pdl_wait();  // qkv comes from the previous kernel, the cached rows from earlier steps
  if (prefetch && !prefetch_before_wait)
    prefetch_share_l2(a.l2_prefetch, a.l2_prefetch_bytes, threadIdx.x % kWarpSize);

  const QkNormRopeCacheArgs& p = a.prep;
  const int group = int(p.q_heads / p.kv_heads);
  bf16* p_s = reinterpret_cast<bf16*>(smem + L::p_offset(keys_cap, group));  // (group, keys_cap + 8)
  const int split = blockIdx.x, launched = gridDim.x, kv_head = blockIdx.y, token = blockIdx.z;
  const int32_t position = p.positions[token];
  const int splits =  // CTAs that get keys; the rest of the cluster is empty (or, with one, leaves at once)
      keys_per_split > 0 ? min(launched, (position + keys_per_split) / keys_per_split) : launched;
  if (splits == 1 && split > 0) return;  // CTA 0 does it all, with no cluster barrier
  const qkv_attention::KeyRange range = qkv_attention::key_range(position, split, splits);
  const int key0 = range.key0, n_keys = range.n_keys, new_key = range.new_key;
  const int64_t slot = p.slots ? p.slots[token] : 0;
  const int64_t row_stride = p.kv_heads * kHeadDim;
  const int64_t first_row =
      qkv_attention::split_first_row<kHeadDim>(slot, p.max_ctx, key0, position, row_stride, kv_head);
  const bf16* k_rows = p.k_cache + first_row;
  const bf16* v_rows = p.v_cache + first_row;

  const attention_mma::Smem sm{ring, q_s, new_kv, partial, stat_max, stat_sum, scores, p_s};
  attention_mma::attend_keys<kHeadDim, kThreads, kStages, kChains, kLean>(
      sm, k_rows, v_rows, row_stride, n_keys, new_key, group, keys_cap, a.scale, a.pdl_trigger, [&] {
        qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, token, kv_head, group, position, slot,
                                                              new_key >= 0, q_s, new_kv);
      });
  bf16* out = a.out + (int64_t(token) * p.q_heads + int64_t(kv_head) * group) * kHeadDim;  // (group, kHeadDim)
  if constexpr (kMerge > 0) {
    int* counter = reinterpret_cast<int*>(a.workspace) + int64_t(token) * p.kv_heads + kv_head;
    float* partials = a.workspace + flash_decode::kMaxTokens * p.q_heads +
                      (int64_t(token) * p.q_heads + int64_t(kv_head) * group) * launched * (kHeadDim + 2);
    qkv_attention::write_output_global<kHeadDim, kThreads, kMaxGroup, kMerge == 2>(
        partial, stat_max, stat_sum, group, split, launched, partials, counter, out, scores);
  } else {
    qkv_attention::write_output<kHeadDim, kThreads>(partial, stat_max, stat_sum, group * kHeadDim, split, splits,
                                                    launched, out);
  }
#endif
}

// The most CTAs per (token, kv head): 8, and at batch > 1 at most half the SMs for the whole grid. Each CTA has
// its SM to itself (~140 KB of shared memory): at batch 8 and a 512-key bucket, 4 per (token, kv head) made 256
// CTAs, two waves, and a 5.88 ms step where 2 made 5.24 ms (H200).
int cluster_limit(const QkvAttentionArgs& a) {
  const int sms = device_sm_count();
  int limit = kMaxCluster;
  while (limit > 1 && limit * a.prep.kv_heads * a.prep.tokens * 2 > sms) limit /= 2;
  return a.prep.tokens == 1 ? kMaxCluster : limit;
}

template <int kHeadDim, int kStages, int kMerge, int kChains, bool kLean>
void launch_stages(const QkvAttentionArgs& a, const qkv_attention::ClusterPlan& plan, int group,
                   int keys_per_split, bool prefetch_before_wait, cudaStream_t stream) {
  using L = Layout<kHeadDim, kStages>;
  constexpr auto kernel = qkv_attention_mma_kernel<kHeadDim, kStages, kMerge, kChains, kLean>;
  // The opt-in limit is raised only as far as a launch needs: set to the 227 KB maximum, the short-context launches
  // (74 KB) ran 0.25 ms per decode step slower in the engine than v1 did, though faster in isolation.
  static std::atomic<size_t> configured{0};
  const size_t bytes = L::bytes(plan.keys_cap, group);
  if (bytes > configured.load()) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    configured.store(bytes);
  }
  const dim3 grid(unsigned(plan.cluster), unsigned(a.prep.kv_heads), unsigned(a.prep.tokens));
  if constexpr (kMerge > 0) {
    launch(kernel, grid, dim3(kThreads), bytes, stream, a, plan.keys_cap, keys_per_split, prefetch_before_wait);
  } else {
    launch_clustered(kernel, grid, dim3(kThreads), bytes, stream, unsigned(plan.cluster), a, plan.keys_cap,
                     keys_per_split, prefetch_before_wait);
  }
}

// An 8-deep ring (7 tiles in flight) wherever it fits in shared memory, also for short contexts that never fill
// it: at ~140 KB a CTA has its SM to itself. In the decode graph the CTAs launch (PDL) while the QKV GEMV still
// holds most SMs, and the 4-deep ring's 74 KB let two or three of a cluster's CTAs pack onto one SM: 0.25-0.3 ms
// per decode step slower at contexts 128-600 on the H200 (4.472 vs 4.149 ms at 128), though faster in isolation.
// ring4 (v7, v9, v10 past 2048-key buckets, two CTAs per SM by design) takes the 4-deep ring always.
template <int kHeadDim, int kMerge, int kChains = 1, bool kLean = false>
void launch_plan(const QkvAttentionArgs& a, const qkv_attention::ClusterPlan& plan, int keys_per_split,
                 bool prefetch_before_wait, cudaStream_t stream, bool ring4 = false) {
  const int group = int(a.prep.q_heads / a.prep.kv_heads);
  if (!ring4 && Layout<kHeadDim, 8>::bytes(plan.keys_cap, group) <= kMaxSmem) {
    launch_stages<kHeadDim, 8, kMerge, kChains, kLean>(a, plan, group, keys_per_split, prefetch_before_wait,
                                                             stream);
  } else {
    launch_stages<kHeadDim, 4, kMerge, kChains, kLean>(a, plan, group, keys_per_split, prefetch_before_wait,
                                                             stream);
  }
}

template <int kHeadDim, bool kLean>
void launch_head_dim(const QkvAttentionArgs& a, int keys_per_split, bool prefetch_before_wait,
                     cudaStream_t stream) {
  const auto plan = qkv_attention::plan_clusters(a.max_position, kKeysPerCtaTarget, cluster_limit(a), kTileKeys);
  launch_plan<kHeadDim, 0, 1, kLean>(a, plan, keys_per_split, prefetch_before_wait, stream);
}

// The long-context plan of v6-v11: as many CTAs per (token, kv head) as fill the SMs once at ctas_per_sm CTAs each
// (a power of two), at least kKeysPerCtaTarget keys each. Its cluster field is the split count.
qkv_attention::ClusterPlan global_plan(const QkvAttentionArgs& a, int ctas_per_sm) {
  const int64_t fit = int64_t(ctas_per_sm) * device_sm_count() / (a.prep.kv_heads * a.prep.tokens);
  int max_splits = 1;  // a power of two: plan_clusters doubles up to it (33 would have become 64, two waves)
  while (max_splits * 2 <= std::min<int64_t>(fit, 1 << 12)) max_splits *= 2;
  return qkv_attention::plan_clusters(a.max_position, kKeysPerCtaTarget, max_splits, kTileKeys);
}

// What every path of this kernel needs: head_dim 64 or 128, whole GQA groups of at most kMaxGroup q heads, a grid
// the launch can address, positions inside the cache, and sm_90 (the kernel's body is built for it alone).
bool shape_supported(const QkvAttentionArgs& a) {
  const QkNormRopeCacheArgs& p = a.prep;
  if (p.head_dim != 64 && p.head_dim != 128) return false;
  if (p.kv_heads < 1 || p.q_heads % p.kv_heads != 0 || p.q_heads / p.kv_heads > kMaxGroup) return false;
  if (p.tokens < 1 || p.kv_heads > 65535) return false;
  if (a.max_position < 0 || a.max_position >= p.max_ctx) return false;
  return qkv_attention::device_has_clusters();
}

// Every launcher of this file: head_dim dispatch; prefetch_hint false clears the L2 prefetch hint (v2, v3).
template <bool kLean = false>
void launch_version(const QkvAttentionArgs& args, int keys_per_split, bool prefetch_hint, bool prefetch_before_wait,
                    cudaStream_t stream) {
  QkvAttentionArgs a = args;
  if (!prefetch_hint || a.l2_prefetch == nullptr) a.l2_prefetch_bytes = 0;
  if (a.prep.head_dim == 128) {
    launch_head_dim<128, kLean>(a, keys_per_split, prefetch_before_wait, stream);
  } else {
    launch_head_dim<64, kLean>(a, keys_per_split, prefetch_before_wait, stream);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool qkv_attention_v2_supports(const QkvAttentionArgs& a) {
  if (!shape_supported(a) || a.prep.tokens > 65535) return false;
  const int limit = cluster_limit(a);
  return (a.max_position + limit) / limit <= kMaxKeysPerCta;
}

void launch_qkv_attention_v2(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_version(a, 0, false, false, stream);
}

// v3_qkv_attention_adaptive: v2's kernel splitting each token's keys over only as many CTAs of the cluster as
// give each <= kKeysPerCtaTarget keys (the cluster is sized for the graph's context bucket, e.g. 4 CTAs for a
// 512-key bucket while the sequence has 130 keys); with one, no cluster barrier and no merge.
bool qkv_attention_v3_supports(const QkvAttentionArgs& a) { return qkv_attention_v2_supports(a); }

void launch_qkv_attention_v3(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_version(a, kKeysPerCtaTarget, false, false, stream);
}

// v4_qkv_attention_l2: v2 that also pulls the hinted bytes (the o projection's weights) into L2 right after its
// PDL wait. At context 128 the fused attention is ~7 us of latency per layer while HBM idles; 7 us at 4.5 TB/s is
// ~31 MB, about the o projection of Qwen3-8B (32 MB), which the o GEMV then reads from L2.
bool qkv_attention_v4_supports(const QkvAttentionArgs& a) { return qkv_attention_v2_supports(a); }

void launch_qkv_attention_v4(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_version(a, 0, true, false, stream);
}

// v5_qkv_attention_l2_early: v4 with the prefetch asked for before the PDL wait, while the QKV GEMV drains.
bool qkv_attention_v5_supports(const QkvAttentionArgs& a) { return qkv_attention_v2_supports(a); }

void launch_qkv_attention_v5(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_version(a, 0, true, true, stream);
}

namespace {

// v6_qkv_attention_split: v2 where the cluster leaves CTAs more than 2 * kKeysPerCtaTarget keys (past 2048 keys at
// batch 1): then no cluster, as many CTAs per (token, kv head) as fill the SMs once (16 per kv head at batch 1 on
// 132 SMs, against v2's 8), merged by the last one through the workspace. At context 8192 v2 streams the K/V at
// ~1 TB/s on 64 SMs, each ~18 GB/s.
// v7_qkv_attention_split2: v6 with two CTAs per SM on the global path (a 4-deep ring, ~80 KB): twice the splits.
// Whether the global-merge path can run this launch (its scores buffer, the workspace's partials and counters).
bool global_feasible(const QkvAttentionArgs& a, int ctas_per_sm) {
  if (!shape_supported(a) || a.prep.tokens > flash_decode::kMaxTokens || a.workspace == nullptr) return false;
  const auto plan = global_plan(a, ctas_per_sm);
  return plan.keys_cap <= kMaxKeysPerCta &&
         plan.cluster <= (a.prep.max_ctx + flash_decode::kMinChunk - 1) / flash_decode::kMinChunk;
}

bool split_supports(const QkvAttentionArgs& a, int ctas_per_sm) {
  return qkv_attention_v2_supports(a) || global_feasible(a, ctas_per_sm);
}

template <int kChains, bool kLeanCluster = false, bool kLeanGlobal = kLeanCluster, bool kWarpMerge = false>
void launch_split(const QkvAttentionArgs& args, int ctas_per_sm, cudaStream_t stream) {
  QkvAttentionArgs a = args;
  a.l2_prefetch_bytes = 0;
  // The global path where the cluster would give a CTA more than 2 * kKeysPerCtaTarget keys (past 2048-key buckets
  // at batch 1) and it gives more CTAs. Per decode step against v2 on the H200 (v6): the 4096-key bucket (prompt
  // 2048) 0.9% slower, the 8192 bucket (prompt 4096) 1% faster, the 16K bucket (prompt 8192) 4.5% faster.
  const auto cluster = qkv_attention::plan_clusters(a.max_position, kKeysPerCtaTarget, cluster_limit(a), kTileKeys);
  const auto plan = global_plan(a, ctas_per_sm);
  const bool global = global_feasible(a, ctas_per_sm) && cluster.keys_cap > 2 * kKeysPerCtaTarget &&
                      plan.cluster > cluster.cluster;
  if (!global && qkv_attention_v2_supports(a)) {
    launch_version<kLeanCluster>(a, 0, false, false, stream);
    return;
  }
  // The warp merge keeps group * splits weights in the scores buffer (group * keys_cap floats).
  const bool warp_merge = kWarpMerge && plan.cluster <= plan.keys_cap;
  if (a.prep.head_dim == 128) {
    if (warp_merge)
      launch_plan<128, 2, kChains, kLeanGlobal>(a, plan, 0, false, stream, ctas_per_sm > 1);
    else
      launch_plan<128, 1, kChains, kLeanGlobal>(a, plan, 0, false, stream, ctas_per_sm > 1);
  } else {
    if (warp_merge)
      launch_plan<64, 2, kChains, kLeanGlobal>(a, plan, 0, false, stream, ctas_per_sm > 1);
    else
      launch_plan<64, 1, kChains, kLeanGlobal>(a, plan, 0, false, stream, ctas_per_sm > 1);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool qkv_attention_v6_supports(const QkvAttentionArgs& a) { return split_supports(a, 1); }
void launch_qkv_attention_v6(const QkvAttentionArgs& a, cudaStream_t stream) { launch_split<1>(a, 1, stream); }
bool qkv_attention_v7_supports(const QkvAttentionArgs& a) { return split_supports(a, 2); }
void launch_qkv_attention_v7(const QkvAttentionArgs& a, cudaStream_t stream) { launch_split<1>(a, 2, stream); }
// v8_qkv_attention_chains: v6 whose long-context path runs two accumulator chains per product (kChains above).
bool qkv_attention_v8_supports(const QkvAttentionArgs& a) { return split_supports(a, 1); }
void launch_qkv_attention_v8(const QkvAttentionArgs& a, cudaStream_t stream) { launch_split<2>(a, 1, stream); }
// v9_qkv_attention_split2_chains: v7 (two CTAs per SM) with v8's two accumulator chains.
bool qkv_attention_v9_supports(const QkvAttentionArgs& a) { return split_supports(a, 2); }
void launch_qkv_attention_v9(const QkvAttentionArgs& a, cudaStream_t stream) { launch_split<2>(a, 2, stream); }
// v10_qkv_attention_lean: v9 with the lean tile loads (kLean above) on both paths.
bool qkv_attention_v10_supports(const QkvAttentionArgs& a) { return split_supports(a, 2); }
void launch_qkv_attention_v10(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_split<2, true>(a, 2, stream);
}
// v11_qkv_attention_lean_short: the lean loads on the cluster path only (v10 at up to 2048-key buckets, v9 past
// them). On the H200 v10 was 0.7% faster per decode step than v9 at contexts 128 and 1024 (isolated at 128: 6.79 vs
// 7.58 us) but 0.6% slower at 8192 and, isolated, 16.1 vs 14.0 us at batch 4, context 1024.
bool qkv_attention_v11_supports(const QkvAttentionArgs& a) { return split_supports(a, 2); }
void launch_qkv_attention_v11(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_split<2, true, false>(a, 2, stream);
}
// v12_qkv_attention_warp_merge: v11 whose last CTA merges the splits a warp per head (write_output_global's
// kWarpMerge): v11's merge has every thread walk all 32 splits' maxima, then their sums and values, as chains of
// L2 reads, while the other CTAs have already left.
bool qkv_attention_v12_supports(const QkvAttentionArgs& a) { return split_supports(a, 2); }
void launch_qkv_attention_v12(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_split<2, true, false, true>(a, 2, stream);
}

}  // namespace qwen3::kernels
