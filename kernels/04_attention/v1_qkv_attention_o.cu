// v1_qkv_attention_o: the decode attention and the o projection (with its residual add) in one launch, batch 1.
//
// Why: in the chain, the fused attention (v12) is a ~8 us dependent chain per layer while HBM idles (qkv read,
// QK-norm/RoPE, K/V tiles, merge), and the o GEMV behind it can only start its first loads under PDL; together
// they cost ~18 us a layer for 7.4 us of o-projection bytes (profiles/decode-step-qwen3-8b.md, session 2 ablation).
// The o weights do not depend on the attention, so here the CTAs that compute o stream their weights into shared
// memory from the moment they are resident, and the attention runs while those bytes arrive.
//
// Grid (row_blocks, kv_heads), one CTA per SM (all must be resident at once: CTAs wait on each other). CTA (b, g):
//  1. At its start, before the PDL wait: TMA bulk copies of w_o[rows of block b, the columns of kv head g's q heads]
//     (1 KB a row for Qwen3-8B) into shared memory, as many rows as fit; an L2 prefetch of the rest.
//  2. If b < splits (the key splits this position needs, at most row_blocks): the tensor-core attention
//     (attention_mma::attend_keys, v12's loop) over split b of head g's keys, whose partial output and softmax
//     statistics go to the workspace; the split that owns the new key stores it in the cache.
//  3. Every CTA of head g waits for the head's splits (a counter), merges them a warp per head into the bf16
//     attention output of its q heads (exactly the bf16 values qkv_attention writes to out), and multiplies its
//     staged rows (and the L2-prefetched rest) by it: partial o sums over head g's columns.
//  4. The last of row block b's kv_heads CTAs (a counter) adds the heads' partials in head order (deterministic),
//     updates the residual, bf16(residual + bf16(o)), and leaves the block's Σ residual² for the next norm GEMV.
// The counters are zero between launches: the last CTA to use one resets it.
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
constexpr int kWarps = kThreads / kWarpSize;
using attention_mma::kMaxGroup;
using attention_mma::kTileKeys;
constexpr int kMaxRowBlocks = kWarpSize;  // splits per head are merged one per lane
constexpr int kDefaultKeysPerSplit = 64;  // one K tile and one V tile per split CTA before more CTAs share the keys
constexpr int kMaxKeysPerSplit = 2048;
constexpr size_t kMaxSmem = 227 * 1024;
constexpr size_t kStaticSmemSlack = 1024;  // the __shared__ variables of the kernel and its helpers
// What a CTA takes by default: all but room for one CTA of the gate|up GEMV launched early behind it (PDL: 8 KB of
// shared memory for Qwen3-8B's normed input), so its first weight loads overlap this kernel's tail.
constexpr size_t kDefaultSmem = kMaxSmem - 24 * 1024;
constexpr int kRowsAtOnce = 4;             // rows a warp multiplies together (independent shuffle trees)
constexpr uint64_t kMaxPolls = uint64_t(1) << 24;

// The row blocks of a launch: the largest power of two whose grid fits on the SMs at one CTA each, at most one per
// row and kMaxRowBlocks.
int row_blocks_for(int64_t hidden, int64_t kv_heads) {
  const int64_t fit = std::max<int64_t>(1, device_sm_count() / std::max<int64_t>(1, kv_heads));
  int blocks = 1;
  while (blocks * 2 <= std::min<int64_t>({fit, hidden, kMaxRowBlocks})) blocks *= 2;
  return blocks;
}

// Workspace, in 4-byte words: counters (arrivals per head, departures per head, finished heads per row block),
// padded to 16 bytes; split partials ((kv_heads * group) heads, row_blocks splits, head_dim + 2: the flash_decode
// layout); o partials (kv_heads, hidden).
__host__ __device__ inline int64_t counter_words(int64_t kv_heads, int64_t row_blocks) { return (2 * kv_heads + row_blocks + 3) / 4 * 4; }

// Shared memory, byte offsets from the dynamic base.
struct Layout {
  size_t ring, q, new_kv, partial, x, weights, scores, p, w, bytes;
  int staged_rows;
};

Layout layout_for(int head_dim, int stages, int group, int keys_cap, int rows_per_block, size_t budget) {
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
  l.x = take(size_t(kMaxGroup) * head_dim * 2);
  l.weights = take(size_t(kMaxGroup) * (kMaxRowBlocks + 1) * 4);
  l.scores = take(size_t(group) * keys_cap * 4);
  l.p = take(size_t(group) * attention_mma::p_stride(keys_cap) * 2);
  const size_t row_bytes = size_t(group) * head_dim * 2;
  const size_t room = budget > at ? budget - at : 0;
  l.staged_rows = int(std::min<size_t>(size_t(rows_per_block), room / row_bytes));
  l.w = take(size_t(l.staged_rows) * row_bytes);
  l.bytes = at;
  return l;
}

[[maybe_unused]] __device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Thread 0 spins until *counter >= target, then the block goes on. A counter that never gets there is a bug (or a
// grid that is not all resident): trap instead of hanging.
[[maybe_unused]] __device__ __forceinline__ void wait_for(const uint32_t* counter, uint32_t target) {
  if (threadIdx.x == 0) {
    uint64_t polls = 0;
    while (load_acquire(counter) < target)
      if (++polls > kMaxPolls) __trap();
  }
  __syncthreads();
}

// sum + Σ w[e] * x[e] over 8 bf16 weights and 8 fp32 inputs.
[[maybe_unused]] __device__ __forceinline__ float dot8(const uint4& w, const float (&x)[8], float sum) {
  float wf[8];
  bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w), wf);
#pragma unroll
  for (int e = 0; e < 8; ++e) sum += wf[e] * x[e];
  return sum;
}

template <int kHeadDim, int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    qkv_attention_o_kernel(QkvAttentionOArgs a, Layout l, int keys_cap, int keys_per_split, int rows_per_block,
                           int row_blocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  const QkNormRopeCacheArgs& p = a.attention.prep;
  const int block = blockIdx.x, kv_head = blockIdx.y;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int group = int(p.q_heads / p.kv_heads);
  const int slice = group * kHeadDim;  // w_o columns of this kv head's q heads; the attention outputs they take
  const int64_t q_dim = p.q_heads * kHeadDim;
  const int64_t row0 = int64_t(block) * rows_per_block;
  const int64_t rows_left = a.hidden - row0;
  const int rows = rows_left <= 0 ? 0 : int(rows_left < rows_per_block ? rows_left : rows_per_block);
  const int staged = min(rows, l.staged_rows);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem);
  bf16* x_s = reinterpret_cast<bf16*>(smem + l.x);           // (slice): the merged attention output, bf16
  float* weights = reinterpret_cast<float*>(smem + l.weights);  // (kMaxGroup, kMaxRowBlocks + 1): merge weights
  const bf16* w_s = reinterpret_cast<const bf16*>(smem + l.w);  // (staged, slice)
  const bf16* w_rows = a.w_o + row0 * q_dim + int64_t(kv_head) * slice;  // row i at w_rows + i * q_dim

  // 1. This CTA's o weights, before anything else: nothing writes them.
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
    if (lane == 0 && staged > 0) mbarrier_arrive_expect_tx(bar, uint32_t(staged) * uint32_t(slice) * 2u);
    __syncwarp();
    for (int i = lane; i < staged; i += kWarpSize)
      bulk_copy_g2s(const_cast<bf16*>(w_s) + int64_t(i) * slice, w_rows + int64_t(i) * q_dim, uint32_t(slice) * 2u,
                    bar, policy);
    for (int i = staged + lane; i < rows; i += kWarpSize)
      prefetch_l2_bulk(w_rows + int64_t(i) * q_dim, uint32_t(slice) * 2u);
  }
  pdl_wait();  // qkv comes from the previous kernel, the residual and the cached rows from earlier ones

  // 2. Split `block` of head kv_head's keys, if the position needs that many splits.
  const int32_t position = p.positions[0];
  const int splits = min(row_blocks, (position + keys_per_split) / keys_per_split);
  uint32_t* counters = reinterpret_cast<uint32_t*>(a.workspace);
  uint32_t* arrivals = counters + kv_head;
  uint32_t* departures = counters + p.kv_heads + kv_head;
  uint32_t* heads_done = counters + 2 * p.kv_heads + block;
  float* split_partials = a.workspace + counter_words(p.kv_heads, row_blocks) +
                          int64_t(kv_head) * group * row_blocks * (kHeadDim + 2);  // (group, row_blocks, D + 2)
  float* o_partials = a.workspace + counter_words(p.kv_heads, row_blocks) +
                      p.q_heads * row_blocks * (kHeadDim + 2);  // (kv_heads, hidden)
  if (block < splits) {
    bf16* q_s = reinterpret_cast<bf16*>(smem + l.q);
    bf16* new_kv = reinterpret_cast<bf16*>(smem + l.new_kv);
    float* partial = reinterpret_cast<float*>(smem + l.partial);
    float* stat_max = partial + kMaxGroup * kHeadDim;
    float* stat_sum = stat_max + kMaxGroup;
    const attention_mma::Smem sm{reinterpret_cast<bf16*>(smem + l.ring), q_s, new_kv, partial, stat_max, stat_sum,
                                 reinterpret_cast<float*>(smem + l.scores), reinterpret_cast<bf16*>(smem + l.p)};
    const qkv_attention::KeyRange range = qkv_attention::key_range(position, block, splits);
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
    for (int o = threadIdx.x; o < slice; o += kThreads) {
      const int g = o / kHeadDim, d = o % kHeadDim;
      float* dst = split_partials + (int64_t(g) * row_blocks + block) * (kHeadDim + 2);
      dst[d] = partial[o];
      if (d == 0) {
        dst[kHeadDim] = stat_max[g];
        dst[kHeadDim + 1] = stat_sum[g];
      }
    }
    __threadfence();  // visible device-wide before the split counts itself in
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(arrivals, 1u);
  }

  // 3. The head's attention output from its splits: a warp per q head takes the weights (one split per lane),
  // then every output element is one pass over the splits, all reads in flight.
  wait_for(arrivals, uint32_t(splits));
  __threadfence();
  for (int g = warp; g < group; g += kWarps) {
    const float* base = split_partials + int64_t(g) * row_blocks * (kHeadDim + 2);
    const float m_s = lane < splits ? __ldcg(base + lane * (kHeadDim + 2) + kHeadDim) : -FLT_MAX;
    const float sum_s = lane < splits ? __ldcg(base + lane * (kHeadDim + 2) + kHeadDim + 1) : 0.0f;
    const float m = warp_max(m_s);
    const float w = lane < splits ? expf(m_s - m) : 0.0f;
    const float total = warp_sum(sum_s * w);
    weights[g * (kMaxRowBlocks + 1) + lane] = w;
    if (lane == 0) weights[g * (kMaxRowBlocks + 1) + kMaxRowBlocks] = total;
  }
  __syncthreads();
  bf16* out = a.attention.out + int64_t(kv_head) * slice;  // (group, kHeadDim)
  for (int o = threadIdx.x; o < slice; o += kThreads) {
    const int g = o / kHeadDim, d = o % kHeadDim;
    const float* base = split_partials + int64_t(g) * row_blocks * (kHeadDim + 2) + d;
    const float* w = weights + g * (kMaxRowBlocks + 1);
    float value = 0.0f;
#pragma unroll 8
    for (int s = 0; s < splits; ++s) value += __ldcg(base + s * (kHeadDim + 2)) * w[s];
    const bf16 result = __float2bfloat16_rn(value / w[kMaxRowBlocks]);
    x_s[o] = result;
    if (block == 0) out[o] = result;
  }
  __syncthreads();  // x_s complete; every thread of this CTA is past its reads of the head's partials
  if (threadIdx.x == 0 && atomicAdd(departures, 1u) + 1 == uint32_t(row_blocks)) {
    *arrivals = 0;  // every CTA of the head has seen the count: ready for the next launch
    *departures = 0;
  }

  // 4. Partial o over this head's columns: a warp takes kRowsAtOnce rows at a time, a lane 16-byte chunks of each.
  constexpr int kChunksPerLane = kMaxGroup * kHeadDim / 8 / kWarpSize;
  const int chunks = slice / 8;
  float x[kChunksPerLane][8];
#pragma unroll
  for (int j = 0; j < kChunksPerLane; ++j) {
    const int c = lane + j * kWarpSize;
    if (c < chunks) {
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(x_s)[c], x[j]);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) x[j][e] = 0.0f;
    }
  }
  if (staged > 0) mbarrier_wait_parity(bar, 0);
  for (int first = warp * kRowsAtOnce; first < rows; first += kWarps * kRowsAtOnce) {
    float acc[kRowsAtOnce];
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r) {
      acc[r] = 0.0f;
      const int row = min(first + r, rows - 1);
      const uint4* src = reinterpret_cast<const uint4*>(row < staged ? w_s + int64_t(row) * slice
                                                                      : w_rows + int64_t(row) * q_dim);
#pragma unroll
      for (int j = 0; j < kChunksPerLane; ++j) {
        const int c = lane + j * kWarpSize;
        if (c < chunks) acc[r] = dot8(src[c], x[j], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r) acc[r] = warp_sum(acc[r]);
    if (lane < kRowsAtOnce && first + lane < rows) {
      float mine = acc[0];
#pragma unroll
      for (int r = 1; r < kRowsAtOnce; ++r) mine = lane == r ? acc[r] : mine;
      o_partials[int64_t(kv_head) * a.hidden + row0 + first + lane] = mine;
    }
  }
  __threadfence();
  __syncthreads();

  // 5. The last head of this row block adds the heads' partials in head order and updates the residual.
  __shared__ int is_last;
  if (threadIdx.x == 0) {
    is_last = atomicAdd(heads_done, 1u) + 1 == uint32_t(p.kv_heads);
    if (is_last) *heads_done = 0;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  float sq = 0.0f;
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    float o = 0.0f;
    for (int64_t h = 0; h < p.kv_heads; ++h) o += __ldcg(o_partials + h * a.hidden + row0 + i);
    bf16* r = a.residual + row0 + i;
    const float updated = bf16_round(__bfloat162float(*r) + bf16_round(o));
    *r = __float2bfloat16_rn(updated);
    sq += updated * updated;
  }
  __shared__ float warp_sq[kWarps];
  sq = warp_sum(sq);
  if (lane == 0) warp_sq[warp] = sq;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += warp_sq[w];
    a.norm_partials[block] = total;
  }
#endif
}

struct Plan {
  int row_blocks, rows_per_block, keys_per_split, keys_cap;
  size_t smem_budget;
};

Plan plan_for(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  Plan plan{};
  plan.row_blocks = row_blocks_for(a.hidden, p.kv_heads);
  plan.rows_per_block = int((a.hidden + plan.row_blocks - 1) / plan.row_blocks);
  plan.keys_per_split = a.keys_per_split > 0 ? a.keys_per_split : kDefaultKeysPerSplit;
  // A split gets at most keys_per_split keys until every row block has one, then ceil(keys / row_blocks).
  const int64_t keys = a.attention.max_position + 1;
  const int64_t per_split = std::max<int64_t>(std::min<int64_t>(plan.keys_per_split, keys),
                                              (keys + plan.row_blocks - 1) / plan.row_blocks);
  plan.keys_cap = int((per_split + kTileKeys - 1) / kTileKeys * kTileKeys);
  plan.smem_budget = a.smem_bytes > 0 ? std::min(size_t(a.smem_bytes), kMaxSmem - kStaticSmemSlack) : kDefaultSmem;
  return plan;
}

int stages_for(int keys_cap) { return keys_cap <= 2 * kTileKeys ? 2 : 4; }

template <int kHeadDim, int kStages>
void launch_stages(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  const Layout l = layout_for(kHeadDim, kStages, int(p.q_heads / p.kv_heads), plan.keys_cap, plan.rows_per_block,
                              plan.smem_budget);
  constexpr auto kernel = qkv_attention_o_kernel<kHeadDim, kStages>;
  // Set once to the most this kernel ever asks for: the staged rows fill what the rest leaves of it.
  static std::atomic<bool> configured{false};
  if (!configured.load()) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kMaxSmem - kStaticSmemSlack)));
    configured.store(true);
  }
  launch(kernel, dim3(unsigned(plan.row_blocks), unsigned(p.kv_heads)), dim3(kThreads), l.bytes, stream, a, l,
         plan.keys_cap, plan.keys_per_split, plan.rows_per_block, plan.row_blocks);
}

template <int kHeadDim>
void launch_head_dim(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  if (stages_for(plan.keys_cap) == 2) {
    launch_stages<kHeadDim, 2>(a, plan, stream);
  } else {
    launch_stages<kHeadDim, 4>(a, plan, stream);
  }
}

}  // namespace

int64_t qkv_attention_o_partials(int64_t hidden, int64_t kv_heads) { return row_blocks_for(hidden, kv_heads); }

int64_t qkv_attention_o_counter_bytes(int64_t hidden, int64_t kv_heads) {
  return counter_words(kv_heads, row_blocks_for(hidden, kv_heads)) * 4;
}

int64_t qkv_attention_o_workspace_floats(int64_t hidden, int64_t q_heads, int64_t kv_heads, int64_t head_dim) {
  const int64_t blocks = row_blocks_for(hidden, kv_heads);
  return counter_words(kv_heads, blocks) + q_heads * blocks * (head_dim + 2) + kv_heads * hidden;
}

bool qkv_attention_o_v1_supports(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  if (p.tokens != 1 || (p.head_dim != 64 && p.head_dim != 128)) return false;
  if (p.kv_heads < 1 || p.q_heads % p.kv_heads != 0 || p.q_heads / p.kv_heads > kMaxGroup) return false;
  if (a.hidden < 1 || a.workspace == nullptr || a.w_o == nullptr) return false;
  if (a.attention.max_position < 0 || a.attention.max_position >= p.max_ctx) return false;
  if (a.keys_per_split < 0 || a.keys_per_split > kMaxKeysPerSplit || a.smem_bytes < 0) return false;
  if (device_compute_major() < 9) return false;
  const Plan plan = plan_for(a);
  if (plan.row_blocks * p.kv_heads > device_sm_count() || plan.keys_cap > kMaxKeysPerSplit) return false;
  const Layout l = layout_for(int(p.head_dim), stages_for(plan.keys_cap), int(p.q_heads / p.kv_heads),
                              plan.keys_cap, plan.rows_per_block, plan.smem_budget);
  // Room for the attention within the budget: the staged rows may be none, never negative room.
  return l.bytes <= plan.smem_budget;
}

void launch_qkv_attention_o_v1(const QkvAttentionOArgs& a, cudaStream_t stream) {
  const Plan plan = plan_for(a);
  if (a.attention.prep.head_dim == 128) {
    launch_head_dim<128>(a, plan, stream);
  } else {
    launch_head_dim<64>(a, plan, stream);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
