// v41_qkv_attention_o_cluster_heads: the decode attention and the o projection with its residual add (batch 1, the
// op of v1_qkv_attention_o.cu) with no L2 round trip between CTAs: the grid is thread-block clusters of kv_heads (8
// in every Qwen3) CTAs, and every cluster computes every kv head's attention, CTA rank h of each cluster kv head h
// over all of the position's keys. A cluster owns a block of o rows; CTA h multiplies that block's rows by head h's
// columns of w_o (the columns its own attention output meets), and the cluster sums the heads' partial rows through
// distributed shared memory. Each CTA then updates its share of the block's residual rows.
//
// Why: traced on an H100 at prompt 128 (ITERATIONS.md sessions 34-36), v34's chain after the attention is L2 round
// trips one after another: a split writes its partial and counts it, the head's last split loads the statistics and
// the values, writes the merged head and counts it, and every CTA polls the heads' count and reads 8 KB, 3.4 us from
// the last split's end to the heads in every CTA's shared memory; then each CTA's o phase streams its unstaged rows
// from HBM at one SM's rate. That chain keeps HBM idle ~9.9 us a layer on both the H100 and the H200 (session 29),
// the whole of the H200's distance to 90% of its read bandwidth. Here a CTA's attention ends in its own shared
// memory, its o rows need only its own head, and the one exchange is within the GPC (session 35 measured a cluster
// merge at 0.2 us).
// What it costs: each of the ~15 clusters reads the whole KV cache of the layer (15x the K/V bytes, from L2 after the
// first cluster's misses), and one CTA attends all of a head's keys through its K/V ring, a tile's round trip after
// another: the longer the context, the longer the attention. So it takes launches up to max_keys keys (tuning,
// QkvAttentionOArgs::keys_per_split; default 1024) and hands longer ones to v40. And a cluster needs eight free SMs
// of one GPC at once, so the CTAs become resident later than v34's one by one (session 35: ~2.4 us).
//
// CTA (cluster c, rank h), block rows [c R, c R + R) (R = rows_per_cluster), seg = group * head_dim columns:
//  1. Before the PDL wait: the first `staged` rows of its w_o slice, (R, seg) at w_o + c R q_dim + h seg, into shared
//     memory (bulk copies of seg * 2 bytes a row); the rest into L2 (QkvAttentionOArgs::l2_prefetch_rows: -1 all,
//     n that many, 0 none); its 1/grid share of the slot's cached K and V rows [0, position) into L2 (chain_steps
//     bit 1; -1 every bit).
//  2. After it: attention_mma::attend_keys over keys [0, position] of kv head h, the new key prepared here (cluster
//     0 stores it in the cache; the others read it only from shared memory, so no cluster reads a row being written).
//     The attention output x = bf16(partial / sum), as qkv_attention writes it; cluster 0 writes it to out.
//  3. o_part[r] = Σ_j w_o[c R + r][h seg + j] x[j] (fp32) for its rows, in its shared memory.
//  4. Cluster barrier; CTA h sums rows [h P, h P + P) of the block (P = rows_per_cta) over the cluster's CTAs'
//     o_part in rank order, and updates residual = bf16(residual + bf16(sum)) (the residual first takes the MLP's
//     delta, as in v1), leaving Σ residual² over its rows as its norm partial. A second cluster barrier keeps o_part
//     alive until every CTA of the cluster has read it.
// The sums over a row's columns are grouped by head, so the residual is not v34's bit for bit (the attention output
// is, at a context that v34 gives one split; at more, v34's merge weighs the splits).
// Measured (ITERATIONS.md session 37, one H100): 0.954x of v40 at prompt 128 and 0.920x at 512 (0.967x / 0.930x
// without the L2 prefetch of the unstaged rows). Traced: a CTA's attention over a head's 129-384 keys takes 11-14 us
// from its wait (v40's splits of at most 64 keys 7.7 us), its tiles' loads queued behind its own w_o traffic, and its
// o phase 8-9.5 us (v40 2.9) for the unstaged rows it reads after the attention; the cluster sum itself is 0.1-0.2
// us. Not the default.
// PRECOND (supports): v40's. Where it does not take a launch (kv_heads > 8, fewer than kMinClusters clusters resident,
// a longer context than its bound), v40 does.

#include <algorithm>
#include <cfloat>

#include <cooperative_groups.h>

#include "kernels/04_attention/attention_mma.cuh"
#include "kernels/04_attention/qkv_attention.cuh"
#include "kernels/04_attention/qkv_attention_o_plan.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {

void launch_qkv_attention_o_v40(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v40_supports(const QkvAttentionOArgs&);

namespace {

constexpr int kThreads = 256;
[[maybe_unused]] constexpr int kWarps = kThreads / kWarpSize;  // unused in the sm_89 build (empty body)
constexpr int kMaxClusterCtas = 8;                              // one CTA a kv head: the portable cluster size
constexpr int kMinClusters = 8;                                 // fewer resident: v40 takes the launch
constexpr int kDefaultStages = 4;
constexpr int kDefaultMaxKeys = 1024;
constexpr int kMaxKeys = 2048;  // the scores buffer's most (keys_per_split's most)
constexpr size_t kMaxSmem = 227 * 1024;
constexpr size_t kStaticSmemSlack = 1024;
[[maybe_unused]] constexpr int kRowsAtOnce = 8;  // a warp's o rows in flight together (warp_sum_transposed<8>)
using attention_mma::kMaxGroup;
using attention_mma::kTileKeys;

// Shared memory, byte offsets from the dynamic base; w: the staged rows, seg * 2 bytes each, packed.
struct Layout {
  size_t ring, q, new_kv, partial, scores, p, x, o_part, w, bytes;
  int staged_rows;
};

Layout layout_for(int head_dim, int stages, int group, int keys_cap, int rows_per_cluster, size_t budget) {
  Layout l{};
  size_t at = 16;  // the staged rows' mbarrier
  const auto take = [&](size_t bytes) {
    const size_t offset = at;
    at = (at + bytes + 127) / 128 * 128;
    return offset;
  };
  const size_t seg_bytes = size_t(group) * head_dim * 2;
  l.ring = take(size_t(stages) * kTileKeys * head_dim * 2);
  l.q = take(size_t(kMaxGroup) * head_dim * 2);
  l.new_kv = take(size_t(2) * head_dim * 2);
  l.partial = take((size_t(kMaxGroup) * head_dim + 2 * kMaxGroup) * 4);
  l.scores = take(size_t(group) * keys_cap * 4);
  l.p = take(size_t(group) * attention_mma::p_stride(keys_cap) * 2);
  l.x = take(size_t(group) * head_dim * 4);
  l.o_part = take(size_t(rows_per_cluster) * 4);
  const size_t room = budget > at ? budget - at : 0;
  l.staged_rows = int(std::min<size_t>(size_t(rows_per_cluster), room / seg_bytes));
  l.w = take(size_t(l.staged_rows) * seg_bytes);
  l.bytes = at;
  return l;
}

// Points of a CTA's work stamped into QkvAttentionOArgs::trace, at v1's event indices (bench/attention_o_trace.py
// reads both): start, issued (its copies and prefetches), waited (PDL), attended (its attention output in shared
// memory), merged (the cluster's o partials in: after the first cluster barrier), weights_in (its staged rows
// landed), o_rows (its partial rows done), end.
enum TraceEvent { kStart = 0, kIssued = 1, kWaited = 2, kAttended = 3, kMerged = 5, kWeightsIn = 6, kORows = 8,
                  kEnd = 9 };

[[maybe_unused]] __device__ __forceinline__ void stamp(uint64_t* trace, int event) {
  if (trace != nullptr && threadIdx.x == 0) trace[blockIdx.x * kQkvAttentionOTraceEvents + event] = global_timer_ns();
}

template <int kHeadDim, int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    qkv_attention_o_cluster_heads_kernel(QkvAttentionOArgs a, Layout l, int keys_cap, int rows_per_cluster,
                                         int rows_per_cta, int partial_count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  extern __shared__ __align__(128) unsigned char smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const QkNormRopeCacheArgs& p = a.attention.prep;
  const int head = int(cluster.block_rank());                 // the kv head this CTA attends
  const int block = int(blockIdx.x) / int(p.kv_heads);        // the cluster's block of o rows
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int group = int(p.q_heads / p.kv_heads);
  const int seg = group * kHeadDim;                            // this head's columns of a w_o row
  const int64_t q_dim = p.q_heads * kHeadDim;
  const int64_t row0 = int64_t(block) * rows_per_cluster;
  const int64_t rows_left = a.hidden - row0;
  const int rows = rows_left <= 0 ? 0 : int(rows_left < rows_per_cluster ? rows_left : rows_per_cluster);
  const int staged = min(rows, l.staged_rows);
  const bf16* w_slice = a.w_o + row0 * q_dim + int64_t(head) * seg;  // (rows, seg), rows q_dim apart
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem);
  bf16* w_s = reinterpret_cast<bf16*>(smem + l.w);  // (staged, seg)
  float* x_s = reinterpret_cast<float*>(smem + l.x);  // (seg): this head's attention output, bf16 values
  float* o_part = reinterpret_cast<float*>(smem + l.o_part);  // (rows): this head's share of each row's dot
  const int64_t kv_row_stride = p.kv_heads * kHeadDim;

  stamp(a.trace, kStart);
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  // Every CTA is resident once all have passed here; the clusters never wait on each other, so the next launch may
  // take any room that is left.
  pdl_launch_dependents();
  // 1. Nothing before the wait depends on the previous kernels but the hinted position (the engine's position
  // advanced a launch ago; the chain reads it again after the wait).
  if (warp == 0) {
    const uint64_t policy = make_evict_first_policy();
    if (lane == 0 && staged > 0) mbarrier_arrive_expect_tx(bar, uint32_t(staged * seg * 2));
    __syncwarp();
    for (int i = lane; i < staged; i += kWarpSize)
      bulk_copy_g2s(w_s + int64_t(i) * seg, w_slice + int64_t(i) * q_dim, uint32_t(seg * 2), bar, policy);
  } else if (warp == 1) {
    const int prefetched = a.l2_prefetch_rows < 0 ? rows : min(rows, staged + a.l2_prefetch_rows);
    for (int i = staged + lane; i < prefetched; i += kWarpSize)
      prefetch_l2_bulk(w_slice + int64_t(i) * q_dim, uint32_t(seg * 2));
  } else if (warp == 2 && (a.chain_steps & 1)) {
    const int32_t hint = p.positions[0];
    const int64_t slot = p.slots ? p.slots[0] : 0;
    if (hint > 0 && hint < p.max_ctx && slot >= 0) {
      // The old keys' rows of every kv head are contiguous: [slot, 0, 0, 0] to [slot, hint, 0, 0].
      const int64_t bytes = int64_t(hint) * kv_row_stride * 2;
      const int64_t share = (bytes / 16 + gridDim.x - 1) / gridDim.x * 16;
      const int64_t begin = int64_t(blockIdx.x) * share, end = min(bytes, begin + share);
      const int64_t base = slot * p.max_ctx * kv_row_stride;
      for (int64_t at = begin + int64_t(lane) * 4096; at < end; at += 32 * 4096) {
        const uint32_t n = uint32_t(end - at < 4096 ? end - at : 4096);
        prefetch_l2_bulk(reinterpret_cast<const char*>(p.k_cache + base) + at, n);
        prefetch_l2_bulk(reinterpret_cast<const char*>(p.v_cache + base) + at, n);
      }
    }
  }
  stamp(a.trace, kIssued);
  pdl_wait();  // qkv comes from the previous kernel, the residual and the cached rows from earlier ones
  stamp(a.trace, kWaited);

  // 2. Kv head `head` over every key of the position.
  const int32_t position = p.positions[0];
  const int64_t slot = p.slots ? p.slots[0] : 0;
  float* partial = reinterpret_cast<float*>(smem + l.partial);  // (group, kHeadDim), then the maxima and sums
  const attention_mma::Smem sm{reinterpret_cast<bf16*>(smem + l.ring),   reinterpret_cast<bf16*>(smem + l.q),
                               reinterpret_cast<bf16*>(smem + l.new_kv), partial,
                               partial + kMaxGroup * kHeadDim,           partial + kMaxGroup * kHeadDim + kMaxGroup,
                               reinterpret_cast<float*>(smem + l.scores), reinterpret_cast<bf16*>(smem + l.p)};
  const int64_t first_row = slot * p.max_ctx * kv_row_stride + int64_t(head) * kHeadDim;
  attention_mma::attend_keys<kHeadDim, kThreads, kStages, 1, true>(
      sm, p.k_cache + first_row, p.v_cache + first_row, kv_row_stride, position + 1, position, group, keys_cap,
      a.attention.scale, 0.0f, [&] {
        qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, 0, head, group, position, slot, true, sm.q_s,
                                                              sm.new_kv, block == 0);
      });
  __syncthreads();  // (attend_keys leaves its partial and statistics without a barrier)
  // The attention output as merge_heads writes it for one split: 0 + value * 1, then / (sum * 1).
  for (int o = threadIdx.x; o < seg; o += kThreads) {
    const float value = 0.0f + partial[o];
    const bf16 out = __float2bfloat16_rn(value / sm.stat_sum[o / kHeadDim]);
    x_s[o] = __bfloat162float(out);
    if (block == 0) a.attention.out[int64_t(head) * seg + o] = out;
  }
  // This CTA's residual rows with the MLP's delta folded in, loaded now so that they land during the o loop.
  const int own_first = head * rows_per_cta;
  const int owned = max(0, min(rows_per_cta, rows - own_first));
  const bf16 residual_h =
      threadIdx.x < owned ? qkv_attention_o_plan::residual_with_delta(a.residual, a.residual_delta, a.delta_copies,
                                                                      a.hidden, row0 + own_first + threadIdx.x)
                          : __float2bfloat16_rn(0.0f);
  __syncthreads();
  stamp(a.trace, kAttended);

  // 3. This head's share of each row of the block: rows dealt round-robin over the warps, kRowsAtOnce at once, a
  // lane taking 16-byte chunks lane, lane + 32, ... of a row's seg * 2 bytes.
  if (staged > 0) mbarrier_wait_parity(bar, 0);
  stamp(a.trace, kWeightsIn);
  const int chunks = seg / 8;
  for (int r0 = warp * kRowsAtOnce; r0 < rows; r0 += kWarps * kRowsAtOnce) {
    float acc[kRowsAtOnce] = {};
    for (int c = lane; c < chunks; c += kWarpSize) {
      float x[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = x_s[c * 8 + e];
      uint4 w[kRowsAtOnce];
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) {
        const int row = min(r0 + r, rows - 1);
        w[r] = row < staged ? reinterpret_cast<const uint4*>(w_s + int64_t(row) * seg)[c]
                            : reinterpret_cast<const uint4*>(w_slice + int64_t(row) * q_dim)[c];
      }
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) {
        float wf[8];
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[r]), wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[e], x[e], acc[r]);
      }
    }
    const float sum = warp_sum_transposed<kRowsAtOnce>(acc);
    const int r = r0 + warp_sum_transposed_index<kRowsAtOnce>(lane);
    if (lane % (kWarpSize / kRowsAtOnce) == 0 && r < rows) o_part[r] = sum;
  }
  stamp(a.trace, kORows);

  // 4. The block's rows summed over the cluster's heads; this CTA updates rows [own_first, own_first + owned).
  cluster_arrive_release();
  cluster_wait_acquire();
  stamp(a.trace, kMerged);
  float sq = 0.0f;
  if (threadIdx.x < owned) {
    const int r = own_first + threadIdx.x;
    float y = 0.0f;
    for (int h = 0; h < int(p.kv_heads); ++h) y += *cluster.map_shared_rank(o_part + r, h);
    const float updated = bf16_round(__bfloat162float(residual_h) + bf16_round(y));
    a.residual[row0 + r] = __float2bfloat16_rn(updated);
    sq = updated * updated;
  }
  cluster_arrive_relaxed();  // this CTA is done reading the others' o_part
  __shared__ float sum_scratch[kWarpSize];
  const float total = block_sum(sq, sum_scratch);
  if (threadIdx.x == 0) {
    a.norm_partials[blockIdx.x] = total;
    // (the next norm reads partial_count partials; the grid may be smaller)
    for (int i = int(gridDim.x) + int(blockIdx.x); i < partial_count; i += int(gridDim.x)) a.norm_partials[i] = 0.0f;
  }
  stamp(a.trace, kEnd);
  cluster_wait_acquire();  // no CTA of the cluster still reads this one's o_part
#endif
}

// The launch's shape: keys_cap (the most keys a CTA attends, a whole number of tiles), stages, the grid, and the
// norm partials the next launch reads (qkv_attention_o_partials).
struct Plan {
  int keys_cap, stages, clusters, rows_per_cluster, rows_per_cta, partial_count;
  size_t budget;
};

int max_keys_of(const QkvAttentionOArgs& a) { return a.keys_per_split > 0 ? a.keys_per_split : kDefaultMaxKeys; }

Plan plan_for(const QkvAttentionOArgs& a) {
  Plan plan{};
  const int64_t keys = a.attention.max_position + 1;
  plan.keys_cap = int((keys + kTileKeys - 1) / kTileKeys * kTileKeys);
  plan.stages = a.ring_stages > 0 ? a.ring_stages : kDefaultStages;
  plan.budget = a.smem_bytes > 0 ? std::min(size_t(a.smem_bytes), kMaxSmem - kStaticSmemSlack)
                                  : kMaxSmem - kStaticSmemSlack;
  return plan;
}

// The kernel, its dynamic shared-memory limit raised once to the most any launch asks for.
template <int kHeadDim, int kStages>
auto configured_kernel() {
  constexpr auto kernel = qkv_attention_o_cluster_heads_kernel<kHeadDim, kStages>;
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kMaxSmem - kStaticSmemSlack)));
    return true;
  }();
  (void)configured;
  return kernel;
}

// The grid and layout where this version takes the launch; false where v40 does (a longer context than max_keys, more
// kv heads than a portable cluster, fewer than kMinClusters resident, or more CTAs than the next norm's partials).
template <int kHeadDim, int kStages>
bool plan_grid(const QkvAttentionOArgs& a, Plan& plan, Layout& l) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  if (p.kv_heads > kMaxClusterCtas || plan.keys_cap > max_keys_of(a)) return false;
  const int heads = int(p.kv_heads), group = int(p.q_heads / p.kv_heads);
  const int resident =
      resident_clusters(configured_kernel<kHeadDim, kStages>(), dim3(kThreads), plan.budget, unsigned(heads));
  plan.partial_count = int(qkv_attention_o_partials(a.hidden, p.kv_heads));
  const int clusters = std::min(resident, plan.partial_count / heads);
  if (clusters < kMinClusters) return false;
  plan.clusters = clusters;
  plan.rows_per_cluster = int((a.hidden + clusters - 1) / clusters);
  plan.rows_per_cta = (plan.rows_per_cluster + heads - 1) / heads;
  if (plan.rows_per_cta > kThreads) return false;  // a thread a row in the cluster sum
  l = layout_for(kHeadDim, kStages, group, plan.keys_cap, plan.rows_per_cluster, plan.budget);
  return l.bytes <= plan.budget;
}

template <int kHeadDim, int kStages>
bool launch_stages(const QkvAttentionOArgs& a, Plan plan, cudaStream_t stream) {
  Layout l{};
  if (!plan_grid<kHeadDim, kStages>(a, plan, l)) return false;
  const int heads = int(a.attention.prep.kv_heads);
  launch_clustered(configured_kernel<kHeadDim, kStages>(), dim3(unsigned(plan.clusters * heads)), dim3(kThreads),
                   l.bytes, stream, unsigned(heads), a, l, plan.keys_cap, plan.rows_per_cluster, plan.rows_per_cta,
                   plan.partial_count);
  CUDA_CHECK_LAUNCH();
  return true;
}

template <int kHeadDim>
bool launch_head_dim(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  if (plan.stages == 2) return launch_stages<kHeadDim, 2>(a, plan, stream);
  if (plan.stages == 4) return launch_stages<kHeadDim, 4>(a, plan, stream);
  return launch_stages<kHeadDim, 8>(a, plan, stream);
}

// The args v40 gets where it takes the launch: v41's own readings of keys_per_split and l2_prefetch_rows undone.
QkvAttentionOArgs for_v40(const QkvAttentionOArgs& a) {
  QkvAttentionOArgs v40 = a;
  v40.keys_per_split = 0;
  v40.l2_prefetch_rows = -1;
  return v40;
}

}  // namespace

// Refuses what v40 refuses (its tuning fields aside) and more than kMaxKeys keys as its bound; takes the launches
// it can (plan_grid) and hands the others to v40.
bool qkv_attention_o_v41_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v40_supports(for_v40(a)) && a.keys_per_split <= kMaxKeys && a.l2_prefetch_rows >= -1;
}

void launch_qkv_attention_o_v41(const QkvAttentionOArgs& a, cudaStream_t stream) {
  const Plan plan = plan_for(a);
  const bool launched = a.attention.prep.head_dim == 128 ? launch_head_dim<128>(a, plan, stream)
                                                         : launch_head_dim<64>(a, plan, stream);
  if (!launched) launch_qkv_attention_o_v40(for_v40(a), stream);
}

}  // namespace qwen3::kernels
