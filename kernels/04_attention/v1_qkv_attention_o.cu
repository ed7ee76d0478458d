// v1_qkv_attention_o, v2_qkv_attention_o_head_merge, v3_qkv_attention_o_short_chain, v4_qkv_attention_o_grouped,
// v5_qkv_attention_o_mma, v6_qkv_attention_o_warp_keys, v7_qkv_attention_o_mlp_lead and v9-v32 (each described at its
// launcher below; the engine's default is v25_qkv_attention_o_scaled_early since session 18): the decode attention and
// the o projection (with its residual add) in one launch, batch 1.
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
// v3 (kShortChain): the same work with less on the path from the PDL wait to the attention output. Traced at
// context 128 (session 6), a split took ~7 us from the wait to its count and the head merge ~2 us more while HBM
// idled. So the split's first K/V tile is prefetched into L2 before the wait (the V tile of a 2-deep ring is
// otherwise fetched from HBM only after the K tile is consumed), the residual rows and the delta are read after
// the CTA's split (v2 read them first, an L2 round trip before the attention), the merge's first values are loaded
// together with its statistics, and a lone split (splits == 1) writes its head from shared memory. Each step can
// be turned off (QkvAttentionOArgs::chain_steps). Measured (H200, Qwen3-8B, ITERATIONS.md session 7): slower than
// v2 at every context (4.279 vs 4.241 ms a step at 128, 4.475 vs 4.349 at 1024, 4.851 vs 4.674 at 8192), and with
// every step off still 0.7% / 1.3% / 2.5% slower: the same memory work in different code. The first form also
// pulled all unstaged o rows into L2 after the wait: 4.344 ms, and the o phase was no faster with them there.
// v4 (kOVecs > 0): v3 with the o rows in groups of 8 read by the whole CTA (not 4 rows a warp) and the first 16
// unstaged rows loaded into registers during the attention: 4.314-4.328 vs 4.241-4.274 ms. v5 (kOVecs < 0): v3
// with the o rows on tensor cores: 4.302-4.312 vs 4.262-4.278 ms. In every form the o phase after the merge takes
// ~7 us (traces): not the bytes (rows from L2 or registers did not shorten it) and not the FMAs (mma did not).
// A first design gave CTA (row block, kv head) the w_o columns of one kv head (1 KB per row: 176 bulk copies a
// CTA) and added the heads' partial sums in a last pass: 29 us isolated, 4.79 vs 4.29 ms per step (ITERATIONS.md).
// v6 (kStages == 0): v2 with attention_warp::attend_keys in place of the K/V ring (every warp on its own 16-key
// chunks from global memory into mma fragments, an online softmax a warp); its smaller shared-memory layout stages
// 15 o rows instead of 7 at context 8192. Measured (ITERATIONS.md session 9): 0.996x / 0.999x / 0.991x of v2 at
// 8192 / 1024 / 128; with v2's 7 staged rows (--attention-o-smem-kb 96) 0.987x at 8192.
// v7 (kMlpLead): v2 whose CTAs without a split pull the next MLP launch's first rows into L2 during the chain, when
// HBM idles. Measured (session 9): 0.965x / 0.985x / 0.940x of v2 at context 128 with 192 / 96 / 384 KB of each
// MLP CTA's rows, 0.996x at 1024; the trace: the chain from the wait to the last split 11.6 us (v2 ~9) although
// the attending CTAs issue none, and the MLP's CTAs waited as long as without it (3.7 us after the release).
// PRECOND: tokens == 1; head_dim 64 or 128; q_heads / kv_heads <= 8; positions[0] < max_ctx; sm_90.

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/04_attention/attention_mma.cuh"
#include "kernels/04_attention/attention_warp.cuh"
#include "kernels/04_attention/qkv_attention.cuh"
#include "kernels/04_attention/qkv_attention_o_plan.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/handoff.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/common/tagged_words.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kThreads = 256;
[[maybe_unused]] constexpr int kWarps = kThreads / kWarpSize;  // unused in the sm_89 build (empty body)
using attention_mma::kMaxGroup;
using attention_mma::kTileKeys;
using namespace qkv_attention_o_plan;
constexpr size_t kMaxSmem = 227 * 1024;
constexpr size_t kStaticSmemSlack = 1024;  // the __shared__ variables of the kernel and its helpers
// What a CTA takes by default, measured (H200, Qwen3-8B, context 128, ms per decode step): 64 KB 4.58, 96 KB 4.55,
// 128 KB 4.38, 160 KB 4.36, 200 KB 4.60, 226 KB 4.81 (the chain: 4.31). Past ~160 KB the gate|up GEMV launched
// early behind it (PDL) no longer finds room for a CTA beside it, and the staged rows cannot make that up.
constexpr size_t kDefaultSmem = 160 * 1024;
// v22 (kScaledSplits): past kScaledSplitsTarget splits of keys_per_split keys, that many splits of up to
// kScaledSplitsMaxKeys keys each, then splits of that many keys (session 15: at positions 512-768 128 keys a split
// measured best, at 1024-1280 192, at 128-384 v17's 64).
constexpr int kScaledSplitsTarget = 6;
constexpr int kScaledSplitsMaxKeys = 192;
// kSplitPrep's bits: what a CTA with a split does around its attention's prepare step (the kernel's comment).
constexpr int kPrepResidual = 1;   // v43: its residual rows read by its last warp in the prepare step
constexpr int kPrepTilesAtOnce = 2;  // v45: every K/V tile of its split in flight before the prepare step, where
                                     // they fit the ring
constexpr int kPrepTilesEarly = 4;   // v46: those tiles issued before the PDL wait, for the position read then
// v26: staged o rows a CTA without a split keeps in flight (QkvAttentionOArgs::stage_window 0). bench/queue_latency
// (H200, 132 CTAs x 192 KB in 8 KB copies): 4 in flight land all rows as soon as issuing them at once does (7.9 us),
// with a dependent L2 hit at ~0.2 us instead of ~0.7 on average (4.3 in the first 2 us); 8 land them sooner (7.3 us)
// at ~0.44 us a hit.
// (unused in the sm_89 build: empty body)
[[maybe_unused]] constexpr int kDefaultStageWindow = 4;
// v27: MLP row copies a CTA without a split keeps in flight (QkvAttentionOArgs::mlp_lead_window 0), and the most
// (its barriers); fewer where the K/V ring, their landing place, holds fewer rows. 4 in flight a CTA is where
// bench/queue_latency's dependent loads on other SMs barely notice the copies. (unused in the sm_89 build)
[[maybe_unused]] constexpr int kDefaultMlpLeadWindow = 4;
[[maybe_unused]] constexpr int kMaxMlpLeadWindow = 8;
// v27: landed copies between reads of the heads' count (below). 4 pulled 9.7 MB a layer at prompt 128 against 5.9
// with 1, and the step was slower for it (0.993x against 0.999x of v27 with nothing to pull; ITERATIONS.md session 21).
[[maybe_unused]] constexpr int kLeadPollEvery = 1;
// Rows a warp multiplies together (independent FMA chains and shuffle trees); unused in the sm_89 build.
[[maybe_unused]] constexpr int kRowsAtOnce = 4;
// v29 (kHandOff): the most rows of the split CTAs a CTA without a split takes over (one more mma tile of 16 rows);
// where the launch's split CTAs leave more than that a free CTA, every CTA multiplies its own rows.
constexpr int kMaxForeignRows = 16;
// v30: the most rows a warp multiplies at once: (rows_per_cta + kMaxForeignRows) / kWarps at Qwen3-8B's 32 rows.
[[maybe_unused]] constexpr int kMaxRowsAWarp = 6;
// v37 (kChainSync 4): CTAs a cluster, the most splits a kv head takes (the portable cluster size).
constexpr int kClusterCtas = 8;

// v37's CTA index (the kernel's `cta`) from the CTA's cluster and rank: rank r of cluster c < kv_heads is r * kv_heads
// + c (split r of kv head c), a CTA of a later cluster keeps its block index. A bijection onto [0, gridDim.x).
// PRECOND: launched in clusters of kClusterCtas CTAs along x, at least kv_heads clusters.
[[maybe_unused]] __device__ __forceinline__ int cluster_cta_index(int kv_heads) {
  const int cluster = int(blockIdx.x) / kClusterCtas, rank = int(blockIdx.x) % kClusterCtas;
  return cluster < kv_heads ? rank * kv_heads + cluster : int(blockIdx.x);
}

// Shared memory, byte offsets from the dynamic base.
struct Layout {
  size_t ring, q, new_kv, partial, x, weights, residual, scores, p, dots, w, row_pitch, bytes;
  size_t row_bars;  // v26: (rows_per_cta) mbarriers, one a staged row (0 in the other versions)
  int staged_rows;
};

// o_vecs: the kernel's kOVecs. v4 and v5 (o_vecs != 0) need room for the o rows' warp sums, (kWarps,
// rows_per_cta) floats; v5 (o_vecs < 0) pads each staged row by 64 bytes, so that the 8 rows of an mma fragment
// (lanes 4 apart read the same columns of 8 rows) fall on different banks. row_barriers (v26): an mbarrier for each
// staged row after the launch's two. extra_dot_rows (v29): rows of o a CTA may multiply past its own (the split CTAs'
// rows it takes over), room for their warp sums too.
Layout layout_for(int head_dim, int stages, int q_heads, int group, int keys_cap, int rows_per_cta, size_t budget,
                  int o_vecs, bool row_barriers = false, int extra_dot_rows = 0) {
  Layout l{};
  size_t at = 16;  // the mbarriers (the staged rows', v11's late rows')
  if (row_barriers) {
    l.row_bars = at;
    at = (at + size_t(rows_per_cta) * 8 + 15) / 16 * 16;
  }
  const auto take = [&](size_t bytes) {
    const size_t offset = at;
    at = (at + bytes + 15) / 16 * 16;
    return offset;
  };
  // stages 0 (v6): no K/V ring; the warps' partial results (attention_warp::scratch_bytes) in its place.
  l.ring = take(stages > 0 ? size_t(stages) * kTileKeys * head_dim * 2
                           : attention_warp::scratch_bytes(kWarps, group, head_dim));
  l.q = take(size_t(kMaxGroup) * head_dim * 2);
  l.new_kv = take(size_t(2) * head_dim * 2);
  l.partial = take((size_t(kMaxGroup) * head_dim + 2 * kMaxGroup) * 4);
  l.x = take(size_t(q_heads) * head_dim * 2);
  l.weights = take(size_t(q_heads) * (kMaxSplits + 1) * 4);
  l.residual = take(size_t(rows_per_cta) * 2);
  l.scores = take(stages > 0 ? size_t(group) * keys_cap * 4 : 0);
  l.p = take(stages > 0 ? size_t(group) * attention_mma::p_stride(keys_cap) * 2 : 0);
  l.dots = o_vecs != 0 ? take(size_t(kWarps) * (rows_per_cta + extra_dot_rows) * 4) : at;
  l.row_pitch = size_t(q_heads) * head_dim * 2 + (o_vecs < 0 ? 64 : 0);
  const size_t room = budget > at ? budget - at : 0;
  l.staged_rows = int(std::min<size_t>(size_t(rows_per_cta), room / l.row_pitch));
  l.w = take(size_t(l.staged_rows) * l.row_pitch);
  l.bytes = at;
  return l;
}

// Points of a CTA's work stamped into QkvAttentionOArgs::trace (profiling).
enum QkvAttentionOTraceEvent {
  kTraceStart,        // the CTA began (resident)
  kTraceIssued,       // its w_o copies are issued (thread 0; v14, v15: and its attention's warm-up pass done;
                      // v27, a CTA without a split: overwritten by the count of MLP rows it pulled)
  kTraceWaited,       // past the PDL wait
  kTraceAttended,     // its split is written and counted (0: the CTA had no split)
  kTraceAllSplits,    // every split is in
  kTraceMerged,       // the attention output is in shared memory
  kTraceWeightsIn,    // the staged w_o rows have landed
  kTraceOStaged,      // v4: the staged rows multiplied; v14: the o loop's warm-up pass done (0 in v1-v3)
  kTraceORows,        // every row's dot product done (v1-v3: thread 0's warp, before the sum of squares)
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

// v14 (kWarmCode): a split's attention and a warp's o rows as functions of their own, not inlined, so that a
// warm-up call runs the very instructions of the real call. The warm-up fetches them into the SM's instruction
// caches while the CTA would wait anyway: the attention before the PDL wait (on one K/V tile, writing nothing
// global), the o loop before the wait for the merged heads (on one chunk group of the attention output's shared
// memory as its rows, writing nothing). Session 7 measured the first pass of code fetched cold against an
// identical second pass: ~1.1 us more for the o loop's 4 rows, ~3 us more for a split's attention at context 128
// (with its K/V tiles from HBM, not separable there). Arguments by value: a kernel parameter's address would
// move the struct to local memory. Measured (ITERATIONS.md session 14): the calls alone (no warm-up) cost the
// split ~1.5 us and the o phase ~4 us; a warm split runs ~2.6 us faster than a cold one, but its warm-up takes
// ~8 us before the wait, where a CTA has ~3; the o loop's warm-up gains ~0.2 us.

// One split: attention_mma::attend_keys over n_keys keys from k_rows / v_rows, its q (and, where owner, the new
// key's row, also written to the cache) prepared by qkv_attention::prepare_q_and_new_kv. PRECOND: attend_keys'.
template <int kHeadDim, int kStages>
__device__ __noinline__ void attend_split(const attention_mma::Smem sm, const QkNormRopeCacheArgs p,
                                          const bf16* k_rows, const bf16* v_rows, int64_t row_stride, int n_keys,
                                          int new_key, int group, int keys_cap, float scale, int kv_head,
                                          int32_t position, int64_t slot, bool owner) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  attention_mma::attend_keys<kHeadDim, kThreads, kStages, 2, true>(
      sm, k_rows, v_rows, row_stride, n_keys, new_key, group, keys_cap, scale, 0.0f, [&] {
        qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, 0, kv_head, group, position, slot, owner, sm.q_s,
                                                              sm.new_kv);
      });
#endif
}

// The o loop's steps, shared by the kernel's inline loop and v14's o_rows_pass. A warp takes kRowsAtOnce rows at a
// time, a lane every 32nd 16-byte chunk of each.

// Adds to acc[r] the dot product of row r with the attention output over this lane's chunks c = lane, lane + 32,
// ... below `chunks`: load_x(c, x) gives the output's chunk c as 8 floats, load_row(r, c) row r's (16 bytes).
// kChunksAtOnce 4 (v1-v18): the loop unrolled 4 times, which ptxas schedules as 16 loads a lane, then their FMAs.
// kChunksAtOnce 8 (v19, v20): all loads of 8 chunks of each row issued before any is used (32 loads a lane, 128
// registers): an unstaged row's 16 chunks a lane in 2 dependent round trips, not 4. (The same loop unrolled 8
// times was scheduled by ptxas as ~18 loads, then a load per FMA group as registers freed.) Same sums in the same
// order either way.
// kRows (v30): rows at once other than kRowsAtOnce, with kChunksAtOnce 4. (Its loads as an array of 4 chunks of
// every row issued before any is used, as kChunksAtOnce 8 does, measured slower in v30: 0.978x of v25 at prompt 128
// against 0.982x, 0.980x at 1024 against 0.992x; ITERATIONS.md session 23.)
template <int kChunksAtOnce = 4, int kRows = kRowsAtOnce, class LoadX, class LoadRow>
__device__ __forceinline__ void dot_rows(float (&acc)[kRows], int chunks, int lane, LoadX&& load_x,
                                         LoadRow&& load_row) {
  static_assert(kRows == kRowsAtOnce || kChunksAtOnce == 4, "other row counts with kChunksAtOnce 4 only");
  if constexpr (kChunksAtOnce == 4) {
#pragma unroll 4
    for (int c = lane; c < chunks; c += kWarpSize) {
      float x[8];
      load_x(c, x);
      uint4 w[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) w[r] = load_row(r, c);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float wf[8];
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[r]), wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] += wf[e] * x[e];
      }
    }
  } else {
    for (int c0 = lane; c0 < chunks; c0 += kWarpSize * kChunksAtOnce) {
      uint4 w[kChunksAtOnce][kRowsAtOnce];
#pragma unroll
      for (int u = 0; u < kChunksAtOnce; ++u) {
        const int c = c0 + u * kWarpSize;
#pragma unroll
        for (int r = 0; r < kRowsAtOnce; ++r) w[u][r] = c < chunks ? load_row(r, c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kChunksAtOnce; ++u) {
        const int c = c0 + u * kWarpSize;
        if (c >= chunks) break;
        float x[8];
        load_x(c, x);
#pragma unroll
        for (int r = 0; r < kRowsAtOnce; ++r) {
          float wf[8];
          bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[u][r]), wf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r] += wf[e] * x[e];
        }
      }
    }
  }
}

// v5's and v29's o loop for one warp: rows [0, rows) in tiles of 16 as mma.m16n8k16's A operand (lane (g, t) reads
// 16 bytes of rows g and g + 8 of the tile at piece piece0 + 4 s of each 32-column step s, used as the k slots 2t,
// 2t + 1, 2t + 8, 2t + 9 of two mma), the attention output x_vec as B's column 0 (the same pieces, lanes with g == 0;
// the other columns zero): any assignment of columns to k slots shared by A and B gives the dot product. row_src(r):
// row r's 16-byte pieces, nullptr for none. warp_dots[r]: this warp's share of row r's dot product. kUnroll: steps
// whose loads a lane issues before any mma.
template <int kUnroll, class RowSrc>
__device__ __forceinline__ void mma_o_tiles(int rows, RowSrc&& row_src, const uint4* x_vec, int64_t piece0,
                                            int col_steps, int lane, float* warp_dots) {
  const int gid = lane / 4, tig = lane % 4;
  for (int m0 = 0; m0 < rows; m0 += 16) {
    const uint4* src_lo = row_src(m0 + gid);
    const uint4* src_hi = row_src(m0 + gid + 8);
    float acc[2][4] = {};  // two accumulator chains
    for (int s0 = 0; s0 < col_steps; s0 += kUnroll) {
      uint4 lo[kUnroll], hi[kUnroll], xv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t piece = piece0 + int64_t(s0 + u) * 4;
        const bool in = s0 + u < col_steps;
        lo[u] = in && src_lo ? src_lo[piece] : make_uint4(0, 0, 0, 0);
        hi[u] = in && src_hi ? src_hi[piece] : make_uint4(0, 0, 0, 0);
        xv[u] = in && gid == 0 ? x_vec[piece] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint32_t a_even[4] = {lo[u].x, hi[u].x, lo[u].y, hi[u].y}, b_even[2] = {xv[u].x, xv[u].y};
        const uint32_t a_odd[4] = {lo[u].z, hi[u].z, lo[u].w, hi[u].w}, b_odd[2] = {xv[u].z, xv[u].w};
        mma_bf16_16816(acc[u % 2], a_even, b_even);
        mma_bf16_16816(acc[u % 2], a_odd, b_odd);
      }
    }
    // Column 0 of C: lanes with t == 0 hold rows g (c0) and g + 8 (c2).
    if (tig == 0 && m0 + gid < rows) warp_dots[m0 + gid] = acc[0][0] + acc[1][0];
    if (tig == 0 && m0 + gid + 8 < rows) warp_dots[m0 + gid + 8] = acc[0][2] + acc[1][2];
  }
}

// Sums each row's lane partials over the warp; where `write`, lane r < kRowsAtOnce (where row first + r exists)
// adds row first + r to its residual row, rounded as the chain's o GEMV and residual add round, writes it to
// residual_out and adds its square to sq. PRECOND: every lane of the warp calls it.
[[maybe_unused]] __device__ __forceinline__ void finish_rows(float (&acc)[kRowsAtOnce], int first, int rows, int lane,
                                                             bool write, const bf16* residual_s, bf16* residual_out,
                                                             float& sq) {
#pragma unroll
  for (int r = 0; r < kRowsAtOnce; ++r) acc[r] = warp_sum(acc[r]);
  if (write && lane < kRowsAtOnce && first + lane < rows) {
    float mine = acc[0];
#pragma unroll
    for (int r = 1; r < kRowsAtOnce; ++r) mine = lane == r ? acc[r] : mine;
    const int row = first + lane;
    const float updated = bf16_round(__bfloat162float(residual_s[row]) + bf16_round(mine));
    residual_out[row] = __float2bfloat16_rn(updated);
    sq += updated * updated;
  }
}

// Where a CTA's o rows are and where their results go (v14's o_rows_pass).
struct ORows {
  const uint4* x_vec;      // (q_dim / 8) the attention output, bf16, in shared memory
  const bf16* w_s;         // (staged, q_dim) the staged rows, in shared memory
  const bf16* w_rows;      // (rows, q_dim) all of the CTA's rows, in global memory
  const bf16* residual_s;  // (rows) the residual rows, in shared memory
  bf16* residual;          // (rows) the updated residual rows out
  int64_t q_dim;
  int rows, staged;
};

// v9's o loop for one warp (kTypedRows 0: every row through a generic pointer), returning the thread's share of
// Σ updated². dry: the warm-up pass: the warp's first kRowsAtOnce rows over the first 4 x 32 chunks, all read
// from the attention output's shared memory, nothing written, and its first dot product returned (for the caller
// to keep somewhere harmless, so that the pass is not optimized away). PRECOND: every lane of the warp calls it.
[[maybe_unused]] __device__ __noinline__ float o_rows_pass(const ORows o, int warp, int lane, bool dry) {
  float sq = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int chunks = dry ? 4 * kWarpSize : int(o.q_dim / 8);
  const int rows_end = dry ? min(o.rows, warp * kRowsAtOnce + 1) : o.rows;
  for (int first = warp * kRowsAtOnce; first < rows_end; first += kWarps * kRowsAtOnce) {
    float acc[kRowsAtOnce] = {};
    const uint4* src[kRowsAtOnce];
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r) {
      const int row = min(first + r, o.rows - 1);
      src[r] = dry ? o.x_vec
                   : reinterpret_cast<const uint4*>(row < o.staged ? o.w_s + int64_t(row) * o.q_dim
                                                                   : o.w_rows + row * o.q_dim);
    }
    dot_rows(
        acc, chunks, lane,
        [&](int c, float(&x)[8]) { bf16x8_to_float(reinterpret_cast<const Bf16x8&>(o.x_vec[c]), x); },
        [&](int r, int c) { return src[r][c]; });
    finish_rows(acc, first, o.rows, lane, !dry, o.residual_s, o.residual, sq);
    if (dry) sq = acc[0];
  }
#endif
  return sq;
}

// kHeadMerge (v2): the last split of each kv head merges that head's splits and writes its bf16 output to
// attention.out; every CTA then reads those 8 KB (Qwen3-8B) instead of every split's fp32 partials (v1: 48 KB at
// 3 splits a head, 256 KB at 16), one more counter round trip for far fewer bytes read by all CTAs at once.
// kLean (v9): v2 with the tuning and diagnostic paths compiled out (the L2 prefetch of unstaged o rows, the
// attention and o loops run twice): what is left is v2's default work.
// kClaimsAhead > 0 (v10, with kLean): the splits of a kv head share its keys out while they run
// (attention_mma::attend_claimed_keys): static tiles first, then tiles claimed from a per-head counter in the
// workspace (the words after the splits-done counters), kClaimsAhead claims in flight, the owner's last tile at its
// end.
// kTypedRows 2 (v13, with kLean): v12's shared-memory loads (staged rows, attention output), the unstaged rows
// through the generic loads of v9 (v12's LDG made those warps slower, ITERATIONS.md session 13).
// kTypedRows 1 (v12, with kLean): the o loop reads a group of rows that are all staged with shared-memory loads
// (LDS.128) and one that is all unstaged with global loads, and the attention output with LDS.128; v1-v11 read
// every row through one generic pointer (LD.E.128), whose loads the o loop waits on at their first use (Nsight
// Compute, ITERATIONS.md session 13), and the attention output as four 32-bit LDS a chunk (4-way bank conflicts).
// kWarmCode 1 (v14, with kLean): the split's attention and the o loop run as functions of their own (attend_split,
// o_rows_pass), each called once before the real call as a warm-up of its instructions (above), unless
// QkvAttentionOArgs::warm_code says otherwise. kWarmCode 2 (v15): the attention's warm-up only, run before the
// CTA issues its staged o rows (whose bytes v14's warm-up waited behind), and v9's inline o loop.
// kTouchPages (v16, with kLean): before the PDL wait, one line of each page the chain after it touches goes to L2,
// warming the address translations the chain would otherwise miss (above).
// kLateRows (v11, with kLean): the o rows past the staged ones that fit in the K/V ring are copied into it once the
// ring is free (after the CTA's split; after the PDL wait in a CTA without one), so their HBM round trip overlaps
// the wait for the other splits and the merge instead of coming after it.
// kWarmRows 2 (v18, with kLean): v9's o loop; a CTA without a split pulls its unstaged o rows into L2 after the
// PDL wait (bulk prefetches), so their HBM reads happen while the splits attend, as v17's first pass reads them.
// kWarmRows 1 (v17, with kLean): the o loop runs twice, the first pass before the heads are in (receive_heads in the
// last pass). Session 7's diagnostic ran the loop a second time after the first and found it ~2.3-2.8 us (staged
// rows; unstaged rows then in L1 or L2) against ~3.4 and ~7 for the first: both its instructions and its unstaged
// rows were cold. v14 warmed the instructions only, out of line (a call costing ~4 us); here the same inline loop is
// run on the real rows while the CTA would wait for the splits anyway (in a CTA without a split, from the PDL wait).
// Measured (ITERATIONS.md session 15): what pays is the rows' HBM reads moved off the launch's end (the o phase of
// such a CTA 3.7 us instead of 6.8, the split CTAs' 5.5 instead of 6.9); warm instructions alone take 0.4 us off.
// kReverseSplits (v24, with kLean): CTA c takes split splits - 1 - c / kv_heads, not c / kv_heads. The block
// scheduler makes CTAs resident in index order as the QKV GEMV's CTAs leave: at context 8192 (every CTA splits) CTAs
// 120-127 became resident 1.4 us after the mean and, holding the last split (the new key's owner: its K/V row and
// cache writes), wrote it 0.83 us after the others' mean and were a layer's slowest split in 86 of 280 top-8 places
// (attention-o-trace-20261201T0458Z-v17-p8192). The same splits and merge, so the same bits.
// kScaledSplits (v22, with kWarmRows 1): a position gets min(ceil(keys / keys_per_split), max(6, ceil(keys / 192)))
// splits, at most max_splits (keys = position + 1): v17's up to 6 splits, then 6 of up to 192 keys, then splits of
// 192 keys until every CTA has one. Fewer, longer splits past 384 keys leave more CTAs for the first o pass.
// kDeferStaging (v21, with kWarmRows 1): the CTAs that take a split issue their staged rows' copies after it
// (above), not before the PDL wait.
// kHandOff (v29 with kOVecs -1, v30 with kOVecs 0; kWarmRows 1): the split CTAs multiply only their staged rows,
// the others take over the rest (below, where `splits` is known), v29 on tensor cores, v30 with the rows dealt
// round-robin over the warps.
// kHandOff 2 (v31, kOVecs 0): v30's hand-off where the split CTAs give up their last handoff_rows unstaged rows (all
// of them by default) and the others read the rows they took over in their last pass only, after the merge.
// kHandOff 3 (v39, kOVecs 0): v30's o loop with no hand-off, every CTA on its own rows dealt round-robin over the
// warps in one batch of up to kMaxRowsAWarp (what warm_code bit 64 does to v30): v37's 35 rows a CTA in one round,
// where v17's loop of kRowsAtOnce rows a warp takes a second round for the last 3.
// kRowChunks (v19, v20): the chunks of each row a lane of the inline o loop has in flight (dot_rows' unroll), 4 in
// v1-v18 (16 loads a lane, an unstaged row's 16 chunks a lane in 4 dependent round trips), 8 in v19 and v20.
// kTriggerLate (v32): a CTA triggers the next launch (PDL) once every split is in, not at its start; diagnostic
// QkvAttentionOArgs::warm_code bits 1024 / 2048 move it later: 1 once the heads are merged into x_s, 2 once the
// CTA's o rows are written, 3 never (the launch's end triggers it).
// kChainSync: how the chain from the splits to the merged heads in every CTA synchronizes (kHeadMerge; 3, v36: as 1,
// with the merge's values loaded with its statistics, merge_heads below). 0 (v2-v33):
// every thread's __threadfence around counts added with relaxed atomics. 1 (v34): one thread's release / acquire on
// the counts. 2 (v35): tagged words (kernels/common/tagged_words.cuh) and no fence: the last split of each kv head
// (a fixed one, not the last to count in) polls the head's other splits' partials until they carry the launch's tag,
// merges them with its own from shared memory, and writes the merged head in tagged words too; the heads' count
// (relaxed) tells the waiting CTAs when to read them, and they poll any word that has not landed yet. 4 (v37): the
// grid in clusters of kClusterCtas CTAs, cluster c < kv_heads holding kv head c's splits (rank r split r): a split
// leaves its partial in its own shared memory and arrives on the cluster barrier (release); rank 0 waits on it
// (acquire), merges the head from its cluster's shared memory (merge_head_cluster below) and counts it with a release
// add, as v34. No workspace partials and no per-head count: no L2 round trip on the merge's path.
// kSplitPrep (bits kPrep* above; only on attend_keys' path: kLean, a ring, no claims, warm-ups or hand-offs): bit 1
// (v43): a CTA with a split reads its residual rows by its last warp in the attention's prepare step, not by warp 0
// before it. Bit 2 (v45): a split whose K and V tiles all fit the ring has them all in flight before the prepare step
// (attend_keys' kAtOnce). Bit 4 (v46): a CTA that the position as read at its start gives a split issues the tiles
// attend_keys would issue first before the PDL wait, ahead of its staged o rows' bulk copies; after the wait, if the
// position or slot has moved (an eager step: a graph's replay reads the final one), they land and are issued again.
// Every cached row a split reads lies before the position, written by an earlier step or the prefill, which are done
// (the replay before this one; eagerly, every launch's PDL trigger is after its wait, so the launches before the
// previous one are done); the position's own row, which this launch writes, is never read from the cache.
template <int kHeadDim, int kStages, bool kHeadMerge, bool kShortChain, int kOVecs, int kMlpLead = 0,
          bool kLean = false, int kClaimsAhead = 0, bool kLateRows = false, int kTypedRows = 0, int kWarmCode = 0,
          bool kTouchPages = false, int kWarmRows = 0, int kRowChunks = 4,
          bool kDeferStaging = false, bool kScaledSplits = false, bool kReverseSplits = false,
          bool kPacedStaging = false, int kHandOff = 0, bool kTriggerLate = false,
          bool kCounted = false, int kChainSync = 0, int kSplitPrep = 0>
__global__ void __launch_bounds__(kThreads, 1)
    qkv_attention_o_kernel(QkvAttentionOArgs a, Layout l, int keys_cap, int keys_per_split, int rows_per_cta,
                           int max_splits, int partial_count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr bool kReleaseCounts = kChainSync == 1 || kChainSync == 3 || kChainSync == 4;
  constexpr bool kTaggedMerge = kChainSync == 2;
  constexpr bool kMergeLoadsAtOnce = kChainSync == 3;  // (v36, merge_heads below)
  constexpr bool kClusterMerge = kChainSync == 4;      // (v37)
  // v43: only where a split CTA's attention is attend_keys' (below) with its prepare step run once, and no hand-off
  // changes which rows a CTA reads.
  static_assert(kSplitPrep == 0 || (kLean && kStages > 0 && kClaimsAhead == 0 && kWarmCode == 0 && kHandOff == 0 &&
                                        !kShortChain && kChainSync != 2 && kChainSync != 4),
                "kSplitPrep belongs to attend_keys' path");
  const QkNormRopeCacheArgs& p = a.attention.prep;
  // The CTA's index as the rest of the kernel sees it (its rows, its split: split cta / kv_heads of kv head
  // cta % kv_heads). v37: rank r of cluster c < kv_heads is split r of kv head c, the other clusters' CTAs follow.
  const int cta = kClusterMerge ? cluster_cta_index(int(p.kv_heads)) : int(blockIdx.x);
  const int steps = kShortChain ? a.chain_steps : 0;  // v3-v5: QkvAttentionOArgs::chain_steps (-1: every bit)
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
  const bf16* w_s = reinterpret_cast<const bf16*>(smem + l.w);  // (staged, q_dim), rows l.row_pitch bytes apart
  const bf16* w_rows = a.w_o + row0 * q_dim;                    // (rows, q_dim)

  // 1. This CTA's o weights, before anything else: nothing writes them.
  stamp(a.trace, kTraceStart);
  uint64_t* row_bar = reinterpret_cast<uint64_t*>(smem + l.row_bars);  // v26: (staged), one a staged row
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    if (kLateRows) mbarrier_init(bar + 1, 1);  // (the late rows; the layout keeps 16 bytes for the barriers)
    if constexpr (kPacedStaging)
      for (int i = 0; i < staged; ++i) mbarrier_init(row_bar + i, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  // Every CTA of the grid is resident once all have passed this point, so the next kernel can only take SM room
  // none of them needs: the waits below on other CTAs of this grid cannot starve. (kTriggerLate: once every split
  // is in, in receive_heads below.)
  if constexpr (!kTriggerLate) pdl_launch_dependents();
  // v32: where this CTA lets the next launch start, 0 once every split is in (the default), 1-3 later (above).
  [[maybe_unused]] const int trigger_point = kTriggerLate ? (a.warm_code >> 10) & 3 : 0;
  // The split's shared memory for attention_mma (the K/V ring, q, the new key's row, its outputs and scratch).
  const auto split_smem = [&] {
    float* partial = reinterpret_cast<float*>(smem + l.partial);  // (group, kHeadDim), then the max and sum
    return attention_mma::Smem{reinterpret_cast<bf16*>(smem + l.ring),   reinterpret_cast<bf16*>(smem + l.q),
                               reinterpret_cast<bf16*>(smem + l.new_kv), partial,
                               partial + kMaxGroup * kHeadDim,           partial + kMaxGroup * kHeadDim + kMaxGroup,
                               reinterpret_cast<float*>(smem + l.scores), reinterpret_cast<bf16*>(smem + l.p)};
  };
  // v14-v16: the split this CTA would take at the position read before the PDL wait, as a hint (as v3's prefetch
  // reads it): in an eager step the position may still be advancing, and the chain reads it again after the wait.
  // valid: the position and slot are in range and the position gives this CTA a split. head_shift: the kv head
  // that many past the CTA's (a diagnostic of v15).
  struct HintedSplit {
    bool valid;
    int kv_head;
    int32_t position;
    int64_t slot, first_row;  // first_row: the element offset of the split's first key's row in k_cache / v_cache
    qkv_attention::KeyRange range;
  };
  const int64_t kv_row_stride = p.kv_heads * kHeadDim;  // elements between consecutive keys' rows of the cache
  [[maybe_unused]] const auto hinted_split = [&](int head_shift) {
    HintedSplit h{};
    h.position = p.positions[0];
    h.slot = p.slots ? p.slots[0] : 0;
    const int hint_splits =
        h.position >= 0 ? min(max_splits, (h.position + keys_per_split) / keys_per_split) : 0;
    h.valid = h.position < p.max_ctx && h.slot >= 0 && cta < hint_splits * int(p.kv_heads);
    if (!h.valid) return h;
    h.kv_head = (cta + head_shift) % int(p.kv_heads);
    h.range = qkv_attention::key_range(h.position, cta / int(p.kv_heads), hint_splits);
    h.first_row = qkv_attention::split_first_row<kHeadDim>(h.slot, p.max_ctx, h.range.key0, h.position, kv_row_stride,
                                                           h.kv_head);
    return h;
  };
  // v14, v15: the split's attention once over one K/V tile of its hinted split, owning no new key so that nothing
  // global is written: its instructions are fetched before the wait. Its q comes from a qkv buffer the QKV GEMV
  // may be writing: values that are never used. v14 runs it after issuing the staged o rows, v15 before.
  [[maybe_unused]] const auto warm_attention = [&] {
    if constexpr (kWarmCode > 0 && kStages > 0) {
      // (diagnostics: warm_code bit 4 reads the next kv head's rows, so that the real pass finds its instructions
      // fetched but its own K/V rows not; bit 8 reads the first key's row as every key's, so that the warm-up's
      // K/V loads are one line each for HBM and the rest L2 hits)
      const HintedSplit h = hinted_split(a.warm_code & 4 ? 1 : 0);
      if (!(a.warm_code & 2) && h.valid) {
        attend_split<kHeadDim, kStages>(split_smem(), p, p.k_cache + h.first_row, p.v_cache + h.first_row,
                                        a.warm_code & 8 ? 0 : kv_row_stride, min(h.range.n_keys, kTileKeys), -1,
                                        group, keys_cap, a.attention.scale, h.kv_head, h.position, h.slot, false);
        __syncthreads();  // every thread is past the warm-up's shared memory before the real pass writes it
      }
    }
  };
  if constexpr (kWarmCode == 2) warm_attention();  // (v15: before this CTA queues any bytes of its own)
  // The staged rows' bulk copies, by warp 0. v21 (kDeferStaging): a CTA that the position as read now gives a split
  // issues them once its split is counted, not here, so that its chain's loads do not queue behind them; a CTA that
  // turns out after the wait to have no split issues them then (a stale hint only moves when they are issued).
  const auto stage_rows = [&] {
    const uint64_t policy = make_evict_first_policy();
    if (lane == 0 && staged > 0) mbarrier_arrive_expect_tx(bar, uint32_t(staged * q_dim * 2));
    __syncwarp();
    for (int i = lane; i < staged; i += kWarpSize)
      bulk_copy_g2s(smem + l.w + i * l.row_pitch, w_rows + i * q_dim, uint32_t(q_dim * 2), bar, policy);
  };
  // The splits a position gets (v17's rule; v22's fewer, longer ones with kScaledSplits).
  const auto splits_at = [&](int32_t at) {
    const int fine = min(max_splits, (at + keys_per_split) / keys_per_split);
    return kScaledSplits ? min(fine, max(kScaledSplitsTarget, (at + kScaledSplitsMaxKeys) / kScaledSplitsMaxKeys))
                         : fine;
  };
  // Which of `splits` this CTA takes (if cta < splits * kv_heads; its kv head is cta % kv_heads). v24 on
  // (kReverseSplits): split s on CTAs [(splits - 1 - s) kv_heads, ...), the last split, which owns the new key, on the
  // first CTAs to become resident.
  const auto split_index = [&](int splits) {
    return kReverseSplits ? splits - 1 - cta / int(p.kv_heads) : cta / int(p.kv_heads);
  };
  // v26 (kPacedStaging): each staged row completes on its own mbarrier. A CTA that the position read now gives no
  // split has its last warp keep stage_window rows in flight, issuing the next as the oldest lands, from its start
  // (its other warps go on to the PDL wait; stage_burst rows may go at once first); a CTA with a split issues its
  // rows at once, before the wait (split_staging 0, v17's way; split_prewait_rows of them, the rest once its split
  // is counted) or once its split is counted (1), or paces them from then (2). Why: a load
  // issued behind a burst of bulk copies waits for them (bench/queue_latency: L2 hits 0.7-4.3 us instead of
  // 0.14 behind 26 MB issued at once, ~0.2 with 32 KB in flight a CTA, and the copies land no later), and every
  // load of the attention's chain was issued behind the staging's 24.6 MB.
  [[maybe_unused]] const int stage_window = a.stage_window > 0 ? a.stage_window : kDefaultStageWindow;
  [[maybe_unused]] const auto issue_row = [&](int i, uint64_t policy) {
    mbarrier_arrive_expect_tx(row_bar + i, uint32_t(q_dim * 2));
    bulk_copy_g2s(smem + l.w + i * l.row_pitch, w_rows + i * q_dim, uint32_t(q_dim * 2), row_bar + i, policy);
  };
  // Staged rows [first, end) issued at once by warp 0's lanes.
  [[maybe_unused]] const auto stage_rows_at_once = [&](int first, int end) {
    const uint64_t policy = make_evict_first_policy();
    for (int i = first + lane; i < end; i += kWarpSize) issue_row(i, policy);
  };
  // Staged rows [first, staged): max(stage_burst, stage_window) issued at once, then the next as the oldest lands
  // while fewer than stage_window are in flight. Every lane of one warp: lane 0 issues, the warp waits together,
  // so that its lanes meet the CTA's barriers together after it (a lone lane looping while its warp reaches a
  // __syncthreads breaks the barrier's count: measured, the launch then ran 7 us longer).
  [[maybe_unused]] const int stage_burst = max(a.stage_burst, stage_window);
  [[maybe_unused]] const auto stage_rows_paced = [&](int first) {
    const uint64_t policy = make_evict_first_policy();
    int issued = min(first + stage_burst, staged);
    if (lane == 0)
      for (int i = first; i < issued; ++i) issue_row(i, policy);
    for (int i = first; issued < staged; ++i) {
      mbarrier_wait_parity(row_bar + i, 0);
      const int target = min(staged, i + 1 + stage_window);
      if (lane == 0)
        for (int r = issued; r < target; ++r) issue_row(r, policy);
      issued = max(issued, target);
      __syncwarp();
    }
  };
  // v26: the staged rows are in (every thread waits).
  [[maybe_unused]] const auto wait_staged = [&] {
    if constexpr (kPacedStaging) {
      for (int i = 0; i < staged; ++i) mbarrier_wait_parity(row_bar + i, 0);
    } else if (staged > 0) {
      mbarrier_wait_parity(bar, 0);
    }
  };
  [[maybe_unused]] const int32_t position_hint = p.positions[0];
  [[maybe_unused]] const bool attends_hint =
      position_hint >= 0 && position_hint < p.max_ctx && cta < splits_at(position_hint) * int(p.kv_heads);
  // v26: the rows a CTA with a split issues before the wait (the rest once its split is counted).
  [[maybe_unused]] const int split_prewait =
      a.split_staging != 0 ? 0 : a.split_prewait_rows < 0 ? staged : min(int(a.split_prewait_rows), staged);
  // v46 (kSplitPrep bit 4): the first K/V tiles of the split that the position and slot as read now give this CTA,
  // issued by every thread before its staged rows' bulk copies (a load issued behind those waits for them: v26's
  // note above) and long before the wait. early_at: the position they are for, -1 where none were issued.
  [[maybe_unused]] int32_t early_at = -1;
  [[maybe_unused]] int64_t early_slot = 0;
  if constexpr ((kSplitPrep & kPrepTilesEarly) != 0) {
    early_slot = p.slots ? p.slots[0] : 0;
    if (attends_hint && early_slot >= 0) {
      const int hint_splits = splits_at(position_hint);
      const qkv_attention::KeyRange range =
          qkv_attention::key_range(position_hint, split_index(hint_splits), hint_splits);
      const int64_t first_row = qkv_attention::split_first_row<kHeadDim>(
          early_slot, p.max_ctx, range.key0, position_hint, kv_row_stride, cta % int(p.kv_heads));
      const attention_mma::TileLoads<kHeadDim, kThreads, kStages, kLean> loads(
          reinterpret_cast<bf16*>(smem + l.ring), p.k_cache + first_row, p.v_cache + first_row, kv_row_stride,
          range.n_keys, range.new_key);
      loads.issue_ahead((kSplitPrep & kPrepTilesAtOnce) != 0);
      early_at = position_hint;
    }
  }
  bool staging_deferred = false;
  if constexpr (kPacedStaging) staging_deferred = attends_hint && split_prewait < staged;
  if constexpr (kDeferStaging) staging_deferred = attends_hint;
  if constexpr (kPacedStaging) {
    if (!attends_hint) {
      if (warp == kWarps - 1) stage_rows_paced(0);
    } else if (warp == 0) {
      stage_rows_at_once(0, split_prewait);
    }
  } else if (warp == 0) {
    if (!staging_deferred) stage_rows();
    // Default none: prefetching the rest into L2 at the start measured slower (4.42 vs 4.36 ms per step), its
    // traffic meets the attention's latency-bound reads (and, in session 6, the QKV GEMV's stream).
    const int prefetched = kShortChain || kLean ? 0
                           : a.l2_prefetch_rows < 0 ? staged
                                                    : min(rows, staged + a.l2_prefetch_rows);
    for (int i = staged + lane; i < prefetched; i += kWarpSize)
      prefetch_l2_bulk(w_rows + i * q_dim, uint32_t(q_dim * 2));
  }
  // v3: this CTA's first cached K/V tile into L2 while the QKV GEMV runs, for the position as read now. It is only a
  // hint (in an eager step the position may still be advancing; a graph's step reads the final one): the attention
  // below reads the position again after the wait, and a stale hint only costs wasted prefetches.
  if ((steps & 1) && warp == 1) {
    const int32_t hint = p.positions[0];
    const int hint_splits = min(max_splits, (hint + keys_per_split) / keys_per_split);
    if (hint >= 0 && hint < p.max_ctx && cta < hint_splits * p.kv_heads) {
      const qkv_attention::KeyRange range = qkv_attention::key_range(hint, cta / int(p.kv_heads), hint_splits);
      const int64_t row_stride = p.kv_heads * kHeadDim;
      const int64_t first_row = ((p.slots ? p.slots[0] : 0) * p.max_ctx + range.key0) * row_stride +
                                int64_t(cta % p.kv_heads) * kHeadDim;
      // The first tile only: later tiles stream behind it in the ring, and at long contexts all of a split's
      // rows (256 KB at 512 keys) would meet the QKV GEMV's stream (measured: 5.69 vs 4.67 ms at context 8192).
      for (int k = lane; k < min(range.n_keys, kTileKeys); k += kWarpSize) {
        if (k == range.new_key) continue;  // written by this launch, never read from the cache
        prefetch_l2_bulk(p.k_cache + first_row + k * row_stride, uint32_t(kHeadDim * 2));
        prefetch_l2_bulk(p.v_cache + first_row + k * row_stride, uint32_t(kHeadDim * 2));
      }
    }
  }
  if constexpr (kWarmCode == 1) warm_attention();
  // v16: one line of every page the chain after the wait touches, prefetched into L2 by a lane each, so that the
  // address translations are warm when the chain needs them (v15's diagnostics left translations and instructions
  // as the cold start's suspects; this warms only the first). The split's pages are those of its hinted split.
  if constexpr (kTouchPages) {
    if (warp == 1) {
      const HintedSplit h = hinted_split(0);
      const bool attends = h.valid;
      const int kv_head = h.kv_head;
      const int64_t first_key = h.first_row;
      const int64_t last_key = first_key + int64_t(max(h.range.n_keys - 1, 0)) * kv_row_stride;
      const float* split_stats = a.workspace + counter_words(p.kv_heads);
      const float* split_values = split_stats + stats_words(p.q_heads, max_splits);
      const void* page = nullptr;
      switch (lane) {
        case 0: page = attends ? p.qkv + int64_t(kv_head) * group * kHeadDim : nullptr; break;
        case 1: page = attends ? p.qkv + (p.q_heads + kv_head) * kHeadDim : nullptr; break;
        case 2: page = attends ? p.qkv + (p.q_heads + p.kv_heads + kv_head) * kHeadDim : nullptr; break;
        case 3: page = attends ? p.q_norm : nullptr; break;
        case 4: page = attends ? p.k_norm : nullptr; break;
        case 5: page = attends ? p.inv_freq : nullptr; break;
        case 6: page = attends ? p.k_cache + first_key : nullptr; break;
        case 7: page = attends ? p.v_cache + first_key : nullptr; break;
        case 8: page = attends ? p.k_cache + last_key : nullptr; break;
        case 9: page = attends ? p.v_cache + last_key : nullptr; break;
        case 10: page = attends ? split_values + int64_t(kv_head) * group * max_splits * kHeadDim : nullptr; break;
        case 11: page = attends ? split_stats + int64_t(kv_head) * group * max_splits * 2 : nullptr; break;
        case 12: page = a.workspace; break;
        case 13: page = a.attention.out; break;
        case 14: page = rows > 0 ? a.residual + row0 : nullptr; break;
        case 15: case 16: case 17: case 18:
          page = a.residual_delta != nullptr && lane - 15 < a.delta_copies && rows > 0
                     ? a.residual_delta + int64_t(lane - 15) * a.hidden + row0 : nullptr;
          break;
        case 19: page = a.norm_partials; break;
        case 20: page = staged < rows ? w_rows + int64_t(staged) * q_dim : nullptr; break;
        case 21: page = rows > 0 ? w_rows + int64_t(rows - 1) * q_dim : nullptr; break;
        default: break;
      }
      if (page != nullptr) prefetch_l2_line(page);
    }
  }
  stamp(a.trace, kTraceIssued);
  [[maybe_unused]] uint32_t passed_before = 0;
  if constexpr (kCounted) {
    // v33: the QKV GEMV's count (qkv, and what came before it), or the PDL wait without a hand-off.
    passed_before = handoff_wait(a.handoff, a.handoff_producers, a.handoff_poll_ns);
  } else {
    pdl_wait();  // qkv comes from the previous kernel, the residual and the cached rows from earlier ones
  }
  stamp(a.trace, kTraceWaited);
  // v3, v4 with l2_prefetch_rows > 0: that many rows past the staged ones go to L2 now, when the QKV GEMV has
  // finished streaming. Default none: all of them (19 MB) measured 4.344 vs 4.283 ms a step at context 128 and
  // did not make the o phase faster (ITERATIONS.md session 7: it is not bound by where its rows come from).
  if (kShortChain && warp == 0) {
    const int prefetched = a.l2_prefetch_rows < 0 ? staged : min(rows, staged + a.l2_prefetch_rows);
    for (int i = staged + lane; i < prefetched; i += kWarpSize)
      prefetch_l2_bulk(w_rows + i * q_dim, uint32_t(q_dim * 2));
  }
  if (a.trace != nullptr && threadIdx.x == 0) {
    a.trace[blockIdx.x * kQkvAttentionOTraceEvents + kTraceAttended] = 0;
    a.trace[blockIdx.x * kQkvAttentionOTraceEvents + kTraceOStaged] = 0;
  }

  // v11: rows [first_late, first_late + late) into the K/V ring, which holds late whole rows (q_dim bf16 each,
  // packed), by warp 0 with their own mbarrier. QkvAttentionOArgs::late_rows (tuning): bit 1 takes the CTA's last
  // rows (the warps that would stream them from global memory are the o phase's last), not the first unstaged ones;
  // bit 2 copies them once every split is in, not as soon as the CTA's ring is free. PRECOND: called by every
  // thread of warp 0, after a barrier that follows the CTA's last use of the ring.
  bf16* late_s = reinterpret_cast<bf16*>(smem + l.ring);  // (late, q_dim)
  const int late = kLateRows && kStages > 0
                       ? min(rows - staged, int(kStages * attention_mma::tile_bytes<kHeadDim>() / size_t(q_dim * 2)))
                       : 0;
  const int first_late = kLateRows && (a.late_rows & 1) ? rows - late : staged;
  const bool late_after_splits = kLateRows && (a.late_rows & 2);
  const auto copy_late_rows = [&] {
    if (warp != 0 || late <= 0) return;
    const uint64_t policy = make_evict_first_policy();
    if (lane == 0) {
      fence_proxy_async_shared();  // the ring's K/V reads and cp.async writes before the copies' writes
      mbarrier_arrive_expect_tx(bar + 1, uint32_t(late * q_dim * 2));
    }
    __syncwarp();
    for (int i = lane; i < late; i += kWarpSize)
      bulk_copy_g2s(late_s + int64_t(i) * q_dim, w_rows + int64_t(first_late + i) * q_dim, uint32_t(q_dim * 2),
                    bar + 1, policy);
  };

  // 2. One split of one kv head's keys, if the position needs this CTA.
  const int32_t position = p.positions[0];
  const int splits = splits_at(position);
  // v46: whether the tiles issued before the wait are this CTA's split's now. Where not (the position or the slot
  // moved, or the CTA has no split now), each thread's copies land before it writes the ring again or exits.
  [[maybe_unused]] bool tiles_issued = false;
  if constexpr ((kSplitPrep & kPrepTilesEarly) != 0) {
    tiles_issued = early_at >= 0 && early_at == position && early_slot == (p.slots ? p.slots[0] : 0) &&
                   cta < splits * int(p.kv_heads);
    if (early_at >= 0 && !tiles_issued) cp_async_wait<0>();
  }
  // v37: a CTA without a split has nothing for its cluster's merge; it arrives at once, so that rank 0's wait is
  // held by its head's splits only.
  if (kClusterMerge && cta >= splits * int(p.kv_heads)) cluster_arrive_relaxed();
  // v29 (kHandOff): the split CTAs multiply only their staged o rows; their unstaged ones (unstaged_per a CTA, in
  // split CTA order) are dealt in contiguous runs to the CTAs without a split, which read them in their first pass
  // while the splits attend, as they read their own. A CTA then multiplies its own rows [0, own_rows) and the
  // foreign rows [foreign_first, foreign_first + foreign_count) of that list, and leaves Σ residual² over all of
  // them as its norm partial (the next norm sums the partials). Not where the free CTAs would take more than
  // kMaxForeignRows each, nor with warm_code bit 64 (diagnostic: the mma o loop alone).
  // v31 (kHandOff 2): a split CTA hands over only its last `handed` unstaged rows (QkvAttentionOArgs::handoff_rows).
  [[maybe_unused]] const int unstaged_per = rows_per_cta - l.staged_rows;
  [[maybe_unused]] const int handed =
      kHandOff == 2 && a.handoff_rows >= 0 ? min(a.handoff_rows, unstaged_per) : unstaged_per;
  // v31 with warm_code bit 512 (`reverse`): the other way round, each CTA without a split hands its last `handed`
  // rows to the split CTAs (which read them from L2: the giver's first pass still reads its whole block), so that
  // the free CTAs, whose exit lets the next MLP's CTAs in, leave sooner. Only where every row block is full.
  [[maybe_unused]] const int attending = splits * int(p.kv_heads);
  [[maybe_unused]] const bool reverse = kHandOff == 2 && (a.warm_code & 512) && a.hidden % rows_per_cta == 0;
  int own_rows = rows, foreign_first = 0, foreign_count = 0;
  if constexpr (kHandOff > 0) {
    const int free_ctas = int(gridDim.x) - attending;
    const int givers = reverse ? free_ctas : attending, takers = reverse ? attending : free_ctas;
    const int total = givers * handed;
    // (v30: a warp's rows in one batch of at most kMaxRowsAWarp)
    const int cap = kOVecs == 0 ? min(kMaxForeignRows, kWarps * kMaxRowsAWarp - rows_per_cta) : kMaxForeignRows;
    if (kHandOff != 3 && !(a.warm_code & 64) && givers > 0 && takers > 0 && handed > 0 &&
        (total + takers - 1) / takers <= cap) {
      const int taker = reverse ? cta : cta - attending;  // (negative: this CTA gives)
      if (taker < 0 || taker >= takers) {
        own_rows = rows - handed;  // (a giver's block is full: a split CTA is never the last; reverse wants all full)
      } else {
        foreign_first = taker * total / takers;
        foreign_count = (taker + 1) * total / takers - foreign_first;
      }
    }
  }
  // The global row of foreign row j: handed row u % handed of giver u / handed (split CTA u / handed, or free CTA
  // attending + u / handed in reverse), which keeps its first rows_per_cta - handed (rows past hidden, which no
  // launch plans, are skipped by their users).
  [[maybe_unused]] const auto foreign_row = [&](int j) {
    const int u = foreign_first + j;
    return int64_t((reverse ? attending : 0) + u / handed) * rows_per_cta + (rows_per_cta - handed) + u % handed;
  };
  __shared__ bf16 foreign_residual[kHandOff ? kMaxForeignRows : 1];  // (foreign_count), as residual_s
  if (kDeferStaging && staging_deferred && warp == 0 && cta >= splits * int(p.kv_heads)) stage_rows();  // (v21)
  // v26: a deferred CTA that turns out to have no split stages now (a stale hint only moves when).
  const auto stage_deferred = [&] {
    if (a.split_staging == 2) {
      if (warp == kWarps - 1) stage_rows_paced(split_prewait);
    } else if (warp == 0) {
      stage_rows_at_once(split_prewait, staged);
    }
  };
  if (kPacedStaging && staging_deferred && cta >= splits * int(p.kv_heads)) stage_deferred();
  uint32_t* arrivals = reinterpret_cast<uint32_t*>(a.workspace);  // v1: splits done; v2: kv heads merged
  uint32_t* departures = arrivals + 1;
  uint32_t* head_arrivals = arrivals + 2;                               // v2: (kv_heads) splits done
  float* split_stats = a.workspace + counter_words(p.kv_heads);                      // (q_heads, max_splits, 2)
  float* split_values = split_stats + stats_words(p.q_heads, max_splits);             // (q_heads, max_splits, D)
  // v35 (kTaggedMerge): the tagged words after the split outputs (qkv_attention_o_plan.cuh). The launch's tag is
  // one more than the count the previous launch left; thread 0 reads it now (the previous launch is done) and uses
  // it only at its split's end, so the load is off the chain.
  uint64_t* tagged_splits = reinterpret_cast<uint64_t*>(split_values + int64_t(p.q_heads) * max_splits * kHeadDim);
  uint64_t* tagged_heads = tagged_splits + tagged_split_words(p.q_heads, max_splits, kHeadDim);  // (q_dim / 2)
  uint32_t* launch_count = reinterpret_cast<uint32_t*>(tagged_heads + tagged_head_words(p.q_heads, kHeadDim));
  __shared__ uint32_t launch_tag_s;  // (v35) every thread's copy of thread 0's launch_tag, from the split's end
  [[maybe_unused]] uint32_t launch_tag = 0;
  if (kTaggedMerge && threadIdx.x == 0) launch_tag = *reinterpret_cast<volatile uint32_t*>(launch_count) + 1u;
  // This CTA's residual rows, read once the previous kernel is done, long before they are needed (v1, v2: first
  // thing after the wait; v3: after the CTA's split, so these L2 round trips are not on the attention's path).
  bf16* residual_s = reinterpret_cast<bf16*>(smem + l.residual);  // (rows)
  // With a delta (the previous layer's MLP, v1_mlp_split_down), it is added first, rounded as the chain's down
  // GEMV adds its output, and zeroed for the next MLP launch: the QKV GEMV, its other reader, is done.
  // Own rows first, first + stride, ... below own_rows.
  const auto read_own_residual = [&](int first, int stride) {
    for (int i = first; i < own_rows; i += stride)
      residual_s[i] = qkv_attention_o_plan::residual_with_delta(a.residual, a.residual_delta, a.delta_copies,
                                                                a.hidden, row0 + i);
  };
  const auto read_residual = [&] {
    read_own_residual(int(threadIdx.x), kThreads);
    if constexpr (kHandOff) {  // (v29: the rows this CTA took over, whose owner leaves them and their delta alone)
      for (int j = threadIdx.x; j < foreign_count; j += kThreads)
        if (foreign_row(j) < a.hidden)
          foreign_residual[j] = qkv_attention_o_plan::residual_with_delta(a.residual, a.residual_delta,
                                                                          a.delta_copies, a.hidden, foreign_row(j));
    }
  };
  // v43 (kSplitPrep bit 1): a CTA with a split reads its residual rows by its last warp in the attention's prepare
  // step (read_residual_last_warp below), not here: warp 0 reads them here, and its round trip then comes before its
  // share of the prepare step (the first q head's norm and RoPE, from qkv), which every thread of the CTA waits for:
  // two L2 round trips one after the other on the split's chain. The last warp prepares nothing while group + 2 <
  // kWarps (Qwen3-8B: 6 of 8 warps prepare), so its round trip runs beside theirs.
  const bool residual_in_prepare = (kSplitPrep & kPrepResidual) && cta < splits * int(p.kv_heads);
  if (!(steps & 2) && !residual_in_prepare) read_residual();
  [[maybe_unused]] const auto read_residual_last_warp = [&] {
    if (warp == kWarps - 1) read_own_residual(lane, kWarpSize);
  };
  // The attention output of q heads [h_begin, h_end) from the splits, each group of 4 outputs handed to
  // sink(quad, lo, hi). Each pass has all its L2 reads in flight at once: first a warp per q head (one split per
  // lane) turns the statistics into merge weights, then each thread merges 4 consecutive outputs of a head at a
  // time, kSplitsAtOnce splits per round of loads. PRECOND: every thread calls it; h_end - h_begin <= kWarps * 8.
  // q head h's merge weights from its splits' statistics (max, sum), lane s holding split s's ((-FLT_MAX, 0) past
  // the splits): weights[h][s] = exp(max_s - max), weights[h][kMaxSplits] = Σ sum_s weight_s. Every lane of the warp.
  const auto weigh_splits = [&](int h, float2 stat) {
    const float m = warp_max(stat.x);
    const float w = lane < splits ? expf(stat.x - m) : 0.0f;
    const float total = warp_sum(stat.y * w);
    weights[h * (kMaxSplits + 1) + lane] = w;
    if (lane == 0) weights[h * (kMaxSplits + 1) + kMaxSplits] = total;
  };
  // merge_heads with four splits a group (v34 and before) pads the last group's sums with zero products where
  // splits % 4 != 0. value + 0 * 0 is value except for a -0 sum (every product underflowing to zero, negative), which
  // it makes +0; the merges that group their splits otherwise (v36: eight, v37: none) pad once here instead, so that
  // every version gives the same bits, that zero's sign included.
  const auto pad_as_four_a_group = [&](float4& value) {
    if (splits % 4 == 0) return;
    const float zero = 0.0f;
    value.x += zero * zero;
    value.y += zero * zero;
    value.z += zero * zero;
    value.w += zero * zero;
  };
  const auto merge_heads = [&](int h_begin, int h_end, auto&& sink) {
    constexpr int kHeadsPerWarp = 8;
    constexpr int kSplitsAtOnce = kMergeLoadsAtOnce ? 8 : 4;
    const auto split_value = [&](int quad, int s) {
      const int h = quad * 4 / kHeadDim, d = quad * 4 % kHeadDim;
      return __ldcg(reinterpret_cast<const float4*>(split_values + (int64_t(h) * max_splits + s) * kHeadDim + d));
    };
    // v3: a thread's first kSplitsAtOnce values are in flight with the statistics (one L2 round trip, not two);
    // the same loads and arithmetic, so the same bits. v36 (kMergeLoadsAtOnce): always, and eight splits at once, so
    // that a head of up to eight splits is merged after one round trip instead of 1 + ceil(splits / 4). It adds no
    // zero products in the loop and pads once after it where four a group pads (pad_as_four_a_group): the same bits.
    const bool early_loads = kMergeLoadsAtOnce || (steps & 4);
    const int first_quad = h_begin * kHeadDim / 4 + int(threadIdx.x);
    float4 early[kSplitsAtOnce];
#pragma unroll
    for (int j = 0; j < kSplitsAtOnce; ++j)
      early[j] = early_loads && first_quad < h_end * kHeadDim / 4 && j < splits ? split_value(first_quad, j)
                                                                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
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
      weigh_splits(h, stat[k]);
    }
    __syncthreads();
    for (int quad = first_quad; quad < h_end * kHeadDim / 4; quad += kThreads) {
      const float* w = weights + (quad * 4 / kHeadDim) * (kMaxSplits + 1);
      float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int s0 = 0; s0 < splits; s0 += kSplitsAtOnce) {
        float4 v[kSplitsAtOnce];
#pragma unroll
        for (int j = 0; j < kSplitsAtOnce; ++j)
          v[j] = early_loads && quad == first_quad && s0 == 0 ? early[j]
                 : s0 + j < splits                             ? split_value(quad, s0 + j)
                                                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int j = 0; j < kSplitsAtOnce; ++j) {
          if (kMergeLoadsAtOnce && s0 + j >= splits) break;  // (v36 pads below, as four splits a group would)
          const float wj = s0 + j < splits ? w[s0 + j] : 0.0f;
          value.x += v[j].x * wj;
          value.y += v[j].y * wj;
          value.z += v[j].z * wj;
          value.w += v[j].w * wj;
        }
      }
      if (kMergeLoadsAtOnce) pad_as_four_a_group(value);
      const float total = w[kMaxSplits];
      sink(quad, __floats2bfloat162_rn(value.x / total, value.y / total),
           __floats2bfloat162_rn(value.z / total, value.w / total));
    }
  };
  // v37 (kClusterMerge): merge_heads for kv head kv_head from the shared memory of its cluster's first `splits` CTAs
  // (rank s: split s's partial, (group, kHeadDim) floats, then its maxima and sums, at l.partial), each group of 4
  // outputs handed to sink(quad, lo, hi). The same weights and the same sums in the same order as merge_heads, and
  // its zero padding (pad_as_four_a_group): the same bits. A thread's values of every split are in
  // flight with the statistics, over distributed shared memory (the GPC's SM-to-SM network), not L2. PRECOND: every
  // thread calls it, after a cluster wait that follows every split's arrival; group <= kWarps; group * kHeadDim <=
  // 4 * kThreads; splits <= kClusterCtas.
  [[maybe_unused]] const auto merge_head_cluster = [&](int kv_head, auto&& sink) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float* partial = reinterpret_cast<float*>(smem + l.partial);
    float* stat_max = partial + kMaxGroup * kHeadDim;
    float* stat_sum = stat_max + kMaxGroup;
    const int quad = int(threadIdx.x);  // this thread's 4 outputs of the kv head's group * kHeadDim
    const bool has_quad = quad < group * kHeadDim / 4;
    float4 v[kClusterCtas];
#pragma unroll
    for (int s = 0; s < kClusterCtas; ++s)
      v[s] = has_quad && s < splits
                 ? *reinterpret_cast<const float4*>(cluster.map_shared_rank(partial, s) + quad * 4)
                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (warp < group)
      weigh_splits(kv_head * group + warp,
                   lane < splits ? make_float2(*cluster.map_shared_rank(stat_max + warp, lane),
                                               *cluster.map_shared_rank(stat_sum + warp, lane))
                                 : make_float2(-FLT_MAX, 0.0f));
    __syncthreads();
    if (!has_quad) return;
    const float* w = weights + (kv_head * group + quad * 4 / kHeadDim) * (kMaxSplits + 1);
    float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < kClusterCtas; ++s) {
      if (s >= splits) break;
      value.x += v[s].x * w[s];
      value.y += v[s].y * w[s];
      value.z += v[s].z * w[s];
      value.w += v[s].w * w[s];
    }
    pad_as_four_a_group(value);
    const float total = w[kMaxSplits];
    sink(kv_head * group * kHeadDim / 4 + quad, __floats2bfloat162_rn(value.x / total, value.y / total),
         __floats2bfloat162_rn(value.z / total, value.w / total));
  };
  [[maybe_unused]] const auto bf162_bits = [](__nv_bfloat162 v) {  // (v35: a tagged word's payload)
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
  };
  const auto store_quad = [](bf16* dst, int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) {
    reinterpret_cast<__nv_bfloat162*>(dst + quad * 4)[0] = lo;
    reinterpret_cast<__nv_bfloat162*>(dst + quad * 4)[1] = hi;
  };
  // v35 (kTaggedMerge): merge_heads for one kv head, run by the head's split own_split, whose partial is still in
  // shared memory. Each thread issues its first quad's values of the first kTaggedAtOnce splits and its warp's
  // statistics together, then polls its stale pairs together (await_tagged_pairs) until each carries the launch's
  // tag: one L2 round trip once the other splits' words have landed. (The first form polled one stale pair at a
  // time, a round trip each.) The same weights, and the same sums in the same order, as merge_heads (whose last
  // group of four splits is padded with zero products: one such product here where it pads), so the same bits.
  // sink(quad, lo, hi) gets the quad's index in the attention output. PRECOND: group <= kWarps; splits <= 32.
  [[maybe_unused]] const auto merge_head_tagged = [&](int kv_head, int own_split, auto&& sink) {
    constexpr int kTaggedAtOnce = 8;
    const uint32_t tag = launch_tag_s;
    const int h_begin = kv_head * group;
    const float* own_values = reinterpret_cast<const float*>(smem + l.partial);  // (group, kHeadDim)
    const float* own_max = own_values + kMaxGroup * kHeadDim;                    // (group)
    const float* own_sum = own_max + kMaxGroup;                                  // (group)
    const auto block = [&](int h, int s) {  // split s of q head h: kHeadDim values, then max and sum
      return tagged_splits + (int64_t(h) * max_splits + s) * (kHeadDim + 2);
    };
    // Quad quad's four values of the other splits in [s0, s0 + kTaggedAtOnce), two pairs a split (pairs 2j, 2j + 1:
    // split s0 + j), loads issued; wanted: the pairs loaded.
    uint64_t v[2 * kTaggedAtOnce][2];
    const uint64_t* v_src[2 * kTaggedAtOnce];
    uint32_t wanted = 0;
    const auto load_values = [&](int quad, int s0) {
      const int h = h_begin + quad * 4 / kHeadDim, d = quad * 4 % kHeadDim;
      wanted = 0;
#pragma unroll
      for (int j = 0; j < kTaggedAtOnce; ++j) {
        v_src[2 * j] = block(h, s0 + j) + d;
        v_src[2 * j + 1] = v_src[2 * j] + 2;
        if (s0 + j < splits && s0 + j != own_split) {
          load_tagged_pair(v_src[2 * j], v[2 * j][0], v[2 * j][1]);
          load_tagged_pair(v_src[2 * j + 1], v[2 * j + 1][0], v[2 * j + 1][1]);
          wanted |= 3u << (2 * j);
        }
      }
    };
    const int quads = group * kHeadDim / 4;
    const int first_quad = int(threadIdx.x);
    if (first_quad < quads) load_values(first_quad, 0);
    // The statistics: warp w < group weighs q head h_begin + w, lane s split s (merge_heads' k = 0).
    const int h_stat = h_begin + warp;
    const bool stat_lane = warp < group && lane < splits;
    const uint64_t* const stat_src[1] = {block(h_stat, lane) + kHeadDim};
    uint64_t stat_words[1][2] = {{0, 0}};
    if (stat_lane && lane != own_split) {
      load_tagged_pair(stat_src[0], stat_words[0][0], stat_words[0][1]);
      await_tagged_pairs(stat_src, stat_words, 1u, tag);
    }
    if (warp < group)
      weigh_splits(h_stat, !stat_lane          ? make_float2(-FLT_MAX, 0.0f)
                           : lane == own_split ? make_float2(own_max[warp], own_sum[warp])
                                               : make_float2(__uint_as_float(word_payload(stat_words[0][0])),
                                                             __uint_as_float(word_payload(stat_words[0][1]))));
    __syncthreads();
    for (int quad = first_quad; quad < quads; quad += kThreads) {
      const int h = h_begin + quad * 4 / kHeadDim, d = quad * 4 % kHeadDim;
      const float* w = weights + h * (kMaxSplits + 1);
      float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int s0 = 0; s0 < splits; s0 += kTaggedAtOnce) {
        if (quad != first_quad || s0 != 0) load_values(quad, s0);
        await_tagged_pairs(v_src, v, wanted, tag);
#pragma unroll
        for (int j = 0; j < kTaggedAtOnce; ++j) {
          const int split_j = s0 + j;
          if (split_j >= splits) break;
          float4 x;
          if (split_j == own_split) {
            x = *reinterpret_cast<const float4*>(own_values + (h - h_begin) * kHeadDim + d);
          } else {
            x = make_float4(__uint_as_float(word_payload(v[2 * j][0])), __uint_as_float(word_payload(v[2 * j][1])),
                            __uint_as_float(word_payload(v[2 * j + 1][0])),
                            __uint_as_float(word_payload(v[2 * j + 1][1])));
          }
          const float wj = w[split_j];
          value.x += x.x * wj;
          value.y += x.y * wj;
          value.z += x.z * wj;
          value.w += x.w * wj;
        }
      }
      pad_as_four_a_group(value);
      const float total = w[kMaxSplits];
      sink(h_begin * kHeadDim / 4 + quad, __floats2bfloat162_rn(value.x / total, value.y / total),
           __floats2bfloat162_rn(value.z / total, value.w / total));
    }
  };
  // v35: the merged heads from their tagged words into x_s, a thread's stale pairs polled together until each
  // carries the launch's tag (the heads' count came first, so most have landed). PRECOND: q_dim <= 8 * 4 * kThreads.
  [[maybe_unused]] const auto receive_tagged_heads = [&] {
    constexpr int kPiecesAtOnce = 4;
    const uint32_t tag = launch_tag_s;
    uint64_t w[2 * kPiecesAtOnce][2];  // pairs 2k, 2k + 1: piece k
    const uint64_t* w_src[2 * kPiecesAtOnce];
    uint32_t wanted = 0;
#pragma unroll
    for (int k = 0; k < kPiecesAtOnce; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * kThreads;  // x_s's 16-byte piece: 8 bf16, 4 tagged words
      w_src[2 * k] = tagged_heads + 4 * i;
      w_src[2 * k + 1] = w_src[2 * k] + 2;
      if (i < q_dim / 8) {
        load_tagged_pair(w_src[2 * k], w[2 * k][0], w[2 * k][1]);
        load_tagged_pair(w_src[2 * k + 1], w[2 * k + 1][0], w[2 * k + 1][1]);
        wanted |= 3u << (2 * k);
      }
    }
    await_tagged_pairs(w_src, w, wanted, tag);
#pragma unroll
    for (int k = 0; k < kPiecesAtOnce; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * kThreads;
      if (i < q_dim / 8)
        reinterpret_cast<uint4*>(x_s)[i] = make_uint4(word_payload(w[2 * k][0]), word_payload(w[2 * k][1]),
                                                      word_payload(w[2 * k + 1][0]), word_payload(w[2 * k + 1][1]));
    }
  };

  // v17 (warm_code bit 8), v18: this CTA's unstaged o rows into L2, a row per lane of warp 0.
  [[maybe_unused]] const auto pull_unstaged_rows = [&] {
    if (warp != 0) return;
    for (int i = staged + lane; i < rows; i += kWarpSize) prefetch_l2_bulk(w_rows + i * q_dim, uint32_t(q_dim * 2));
  };
  // v17 (warm_code bit 16 / 32): a CTA without a split pulls its share of the split CTAs' unstaged o rows into L2
  // after / before its first pass, a row per lane of warp 0. Otherwise those rows come from HBM after the merge,
  // at one SM's rate, and the split CTAs end ~1.5 us after the others (session 19's trace).
  [[maybe_unused]] const auto pull_split_rows = [&] {
    const int split_ctas = splits * int(p.kv_heads), others = int(gridDim.x) - split_ctas;
    const int unstaged = rows_per_cta - l.staged_rows;
    if (warp != 0 || others <= 0 || unstaged <= 0 || cta < split_ctas) return;
    const int total = split_ctas * unstaged, me = cta - split_ctas;
    for (int u = me * total / others + lane, end = (me + 1) * total / others; u < end; u += kWarpSize) {
      const int64_t row = int64_t(u / unstaged) * rows_per_cta + l.staged_rows + u % unstaged;
      if (row < a.hidden) prefetch_l2_bulk(a.w_o + row * q_dim, uint32_t(q_dim * 2));
    }
  };
  // v27 (kMlpLead 2): a CTA without a split, between its first o pass and the merged heads (HBM idles there: the
  // splits' chain is round trips), pulls the next MLP launch's gate rows into L2 by bulk copies into its K/V ring,
  // which it never uses: each MLP CTA's rows past the first mlp_lead_skip_rows (those its ring reads before its PDL
  // wait, while this launch ends), mlp_lead_bytes of them, row r of every MLP CTA before row r + 1, the pieces dealt
  // round-robin over the CTAs without a split. Its warp 0 keeps `window` copies in flight, issuing the next as the
  // oldest lands, and stops once the heads are in (a poll per kLeadPollEvery landed copies): v7 sent
  // the same kind of bytes at once and slowed the splits' chain by ~2.6 us (bench/queue_latency: a dependent load
  // waits behind a burst, barely behind a few copies a CTA), and pulled the rows the MLP reads before its wait
  // anyway. Evict-normal: the evict-first streams until the MLP reads them do not push them out. What is left in
  // flight is waited for at the kernel's end. The MLP's reads find the rows in L2; nothing else changes (a hint).
  __shared__ uint64_t mlp_lead_bar[kMlpLead == 2 ? kMaxMlpLeadWindow : 1];
  // This CTA's copies in flight, and the slot and phase parity of the oldest (warp 0 of a CTA without a split).
  int lead_pending = 0, lead_oldest = 0, lead_window = 1;
  uint32_t lead_parity = 0;
  [[maybe_unused]] const auto lead_land_oldest = [&] {
    mbarrier_wait_parity(&mlp_lead_bar[lead_oldest], lead_parity);
    --lead_pending;
    if (++lead_oldest == lead_window) lead_oldest = 0, lead_parity ^= 1;
  };
  [[maybe_unused]] const auto lead_mlp_rows = [&] {
    const int attending = splits * int(p.kv_heads), free_ctas = int(gridDim.x) - attending;
    const int64_t row_bytes = a.hidden * 2;
    const int slots = int(size_t(kStages) * attention_mma::tile_bytes<kHeadDim>() / size_t(row_bytes));
    lead_window = min(min(a.mlp_lead_window > 0 ? int(a.mlp_lead_window) : kDefaultMlpLeadWindow, kMaxMlpLeadWindow),
                      slots);
    if (warp != 0 || cta < attending || lead_window < 1 || a.mlp_w_gate_up == nullptr || a.mlp_ctas < 1 ||
        row_bytes % 16 != 0) {
      lead_window = 1;
      return;
    }
    // Piece k (row skip + k / mlp_ctas of MLP CTA k % mlp_ctas) for k = this CTA's index among the free ones, then
    // every free_ctas-th, stepped in 32 bits without a division (PRECOND, supports(): mlp_ctas * mlp_inter and the
    // rows < 2^31). A 64-bit division is ~100 dependent instructions: with four a piece, the first form of this loop
    // took ~1 us a piece, and its warp held the CTA's o phase that long after the heads were in.
    const int ctas = a.mlp_ctas, inter = int(a.mlp_inter);
    const int end_row = a.mlp_lead_skip_rows + int((a.mlp_lead_bytes + row_bytes - 1) / row_bytes);
    const int step_t = free_ctas % ctas, step_row = free_ctas / ctas;
    int t = (cta - attending) % ctas, row = a.mlp_lead_skip_rows + (cta - attending) / ctas;
    if (lane == 0) {
      for (int s = 0; s < lead_window; ++s) mbarrier_init(&mlp_lead_bar[s], 1);
      fence_mbarrier_init();
    }
    __syncwarp();
    const uint64_t policy = make_l2_policy(a.mlp_lead_policy);
    unsigned char* slot0 = smem + l.ring;
    const volatile uint32_t* heads_in = arrivals;
    int slot = 0;         // the next copy's
    int pulled = 0;       // copies landed
    uint32_t merged = 0;  // the heads' count as last read
    for (;;) {
      for (; lead_pending < lead_window && row < end_row;) {
        const int f0 = int(uint32_t(t) * uint32_t(inter) / uint32_t(ctas));
        const int features = int(uint32_t(t + 1) * uint32_t(inter) / uint32_t(ctas)) - f0;
        if (row < features) {  // (past its gate rows: nothing)
          if (lane == 0) {
            mbarrier_arrive_expect_tx(&mlp_lead_bar[slot], uint32_t(row_bytes));
            bulk_copy_g2s(slot0 + slot * row_bytes, a.mlp_w_gate_up + (int64_t(f0) + row) * a.hidden,
                          uint32_t(row_bytes), &mlp_lead_bar[slot], policy);
          }
          ++lead_pending;
          if (++slot == lead_window) slot = 0;
        }
        t += step_t, row += step_row;
        if (t >= ctas) t -= ctas, ++row;
      }
      if (lead_pending == 0) break;  // every piece of this CTA pulled
      // The heads' count, read every kLeadPollEvery landed copies and looked at that many later. A load issued
      // behind this SM's copies waits for them (~1.3 us, bench/queue_latency): read at every copy, the count paces
      // the pull to a row every ~0.65 us a CTA (5.9 MB a layer at prompt 128, counted from the trace); every 4th,
      // 9.7 MB, the o phase starting up to two such waits after the heads are in.
      if (pulled % kLeadPollEvery == 0) merged = *heads_in;
      lead_land_oldest();
      ++pulled;
      if (pulled % kLeadPollEvery == 0 && merged >= uint32_t(p.kv_heads)) break;  // the o phase goes first
    }
    // (profiling: the rows this CTA pulled, in place of its "issued" stamp, which no tool reads)
    if (a.trace != nullptr && threadIdx.x == 0)
      a.trace[blockIdx.x * kQkvAttentionOTraceEvents + kTraceIssued] = uint64_t(pulled + lead_pending);
  };
  // v18 (kWarmRows 2): a CTA without a split pulls its unstaged o rows into L2 now, while the splits attend.
  if (kWarmRows == 2 && cta >= splits * int(p.kv_heads)) pull_unstaged_rows();
  bool merged_head = false;  // this CTA merged a kv head's splits (v14: it skips the o loop's warm-up)
  if (cta < splits * p.kv_heads) {
    const int kv_head = cta % int(p.kv_heads), split = split_index(splits);
    bf16* q_s = reinterpret_cast<bf16*>(smem + l.q);
    bf16* new_kv = reinterpret_cast<bf16*>(smem + l.new_kv);
    float* partial = reinterpret_cast<float*>(smem + l.partial);
    float* stat_max = partial + kMaxGroup * kHeadDim;
    float* stat_sum = stat_max + kMaxGroup;
    const attention_mma::Smem sm{reinterpret_cast<bf16*>(smem + l.ring), q_s, new_kv, partial, stat_max, stat_sum,
                                 reinterpret_cast<float*>(smem + l.scores), reinterpret_cast<bf16*>(smem + l.p)};
    const qkv_attention::KeyRange range = qkv_attention::key_range(position, split, splits);
    const int64_t slot = p.slots ? p.slots[0] : 0;
    // (kv_row_stride's value, computed again: naming kv_row_stride here and in v3's hint above changed the register
    // allocation of 377 of this file's 500 kernels, the defaults among them; SASS, session 41)
    const int64_t row_stride = p.kv_heads * kHeadDim;
    const int64_t first_row =
        qkv_attention::split_first_row<kHeadDim>(slot, p.max_ctx, range.key0, position, row_stride, kv_head);
    // Diagnostic (chain_steps > 0 with bit 16): the split's attention runs twice (the second pass recomputes the
    // same partial and rewrites the same cache row), thread 0 stamping o_staged between the passes: the second pass
    // finds its instructions fetched and its K/V rows in L2.
    const int attention_passes = !kLean && a.chain_steps > 0 && (a.chain_steps & 16) ? 2 : 1;
    // v10: the tiles each split takes before it claims any (the ring's kStages - 1 at least; tuning field).
    const int claim_static_tiles = max(kStages - 1, int(a.claim_static_tiles));
    for (int pass = 0; pass < attention_passes; ++pass) {
      if (pass == 1) {
        __syncthreads();  // the first pass's shared memory is read
        stamp(a.trace, kTraceOStaged);
      }
      if constexpr (kStages == 0) {  // v6: every warp on its own keys, no ring
        const attention_warp::Smem wsm{q_s, new_kv, partial, stat_max, stat_sum,
                                       reinterpret_cast<float*>(smem + l.ring)};
        attention_warp::attend_keys<kHeadDim, kThreads>(
            wsm, p.k_cache + first_row, p.v_cache + first_row, row_stride, range.n_keys, range.new_key, group,
            a.attention.scale, [&] {
              qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, 0, kv_head, group, position, slot,
                                                                    range.new_key >= 0, q_s, new_kv);
            });
      } else if (kClaimsAhead > 0 && attention_mma::claims_apply(position + 1, splits, claim_static_tiles)) {
        __shared__ int slot_tile[kMaxKeysPerSplit / kTileKeys];
        const int64_t head_row = slot * p.max_ctx * row_stride + int64_t(kv_head) * kHeadDim;  // its key 0
        attention_mma::attend_claimed_keys<kHeadDim, kThreads, kStages, (kClaimsAhead > 0 ? kClaimsAhead : 1)>(
            sm, slot_tile, p.k_cache + head_row, p.v_cache + head_row, row_stride, position + 1, position, split,
            splits, claim_static_tiles, group, keys_cap, a.attention.scale, head_arrivals + p.kv_heads + kv_head,
            [&] {
              qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, 0, kv_head, group, position, slot,
                                                                    split == splits - 1, q_s, new_kv);
            });
      } else if constexpr (kWarmCode > 0) {
        attend_split<kHeadDim, kStages>(split_smem(), p, p.k_cache + first_row, p.v_cache + first_row, row_stride,
                                        range.n_keys, range.new_key, group, keys_cap, a.attention.scale, kv_head,
                                        position, slot, range.new_key >= 0);
      } else {
        attention_mma::attend_keys<kHeadDim, kThreads, kStages, 2, true, (kSplitPrep & kPrepTilesAtOnce) != 0>(
            sm, p.k_cache + first_row, p.v_cache + first_row, row_stride, range.n_keys, range.new_key, group,
            keys_cap, a.attention.scale, 0.0f,
            [&] {
              qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, 0, kv_head, group, position, slot,
                                                                    range.new_key >= 0, q_s, new_kv);
              if constexpr ((kSplitPrep & kPrepResidual) != 0) read_residual_last_warp();  // (v43; a barrier follows)
            },
            tiles_issued);
      }
    }
    if (kTaggedMerge && threadIdx.x == 0) launch_tag_s = launch_tag;
    __syncthreads();  // partial and statistics complete
    // (profiling: a split CTA's "o_staged" slot, free in the default versions, holds its attention's end, before it
    // writes, counts and perhaps merges: the merging split's "attended" minus this is its merge; session 34)
    stamp(a.trace, kTraceOStaged);
    if (kLateRows && !late_after_splits) copy_late_rows();  // (every thread is past its reads of the ring)
    // v3 with a single split: the head's output straight from shared memory, computed as the merge of one split
    // computes it (weight 1, a sum from 0), without the workspace's round trips.
    const bool lone_split = kShortChain && kHeadMerge && splits == 1;
    // v35: the head's last split merges it, the others leave their partial in tagged words and are done.
    const bool tagged_merger = kTaggedMerge && split == splits - 1;
    if constexpr (kClusterMerge) {
      // v37: the partial stays in this CTA's shared memory. Rank 0 (split 0) merges the head once every split of its
      // cluster has arrived, and counts it as v34's merging split does.
      cluster_arrive_release();
      if (split == 0) {
        cluster_wait_acquire();
        merge_head_cluster(kv_head, [&](int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) {
          store_quad(a.attention.out, quad, lo, hi);
        });
        __syncthreads();  // every thread's stores before thread 0's release add
        if (threadIdx.x == 0) red_release_gpu_add(arrivals, 1u);
        merged_head = true;
      }
    } else if constexpr (kTaggedMerge) {
      if (!tagged_merger) {
        const uint32_t tag = launch_tag_s;
        for (int o = 2 * int(threadIdx.x); o < group * kHeadDim; o += 2 * kThreads) {
          uint64_t* block = tagged_splits + ((int64_t(kv_head) * group + o / kHeadDim) * max_splits + split) *
                                                (kHeadDim + 2);  // (kHeadDim values, max, sum)
          store_tagged_pair(block + o % kHeadDim, __float_as_uint(partial[o]), __float_as_uint(partial[o + 1]), tag);
          if (o % kHeadDim == 0)
            store_tagged_pair(block + kHeadDim, __float_as_uint(stat_max[o / kHeadDim]),
                              __float_as_uint(stat_sum[o / kHeadDim]), tag);
        }
      }
    } else {
      for (int o = threadIdx.x; o < group * kHeadDim; o += kThreads) {
        if (lone_split) {
          a.attention.out[int64_t(kv_head) * group * kHeadDim + o] =
              __float2bfloat16_rn((0.0f + partial[o] * 1.0f) / stat_sum[o / kHeadDim]);
          continue;
        }
        const int64_t head_split = (int64_t(kv_head) * group + o / kHeadDim) * max_splits + split;
        split_values[head_split * kHeadDim + o % kHeadDim] = partial[o];
        if (o % kHeadDim == 0)
          reinterpret_cast<float2*>(split_stats)[head_split] =
              make_float2(stat_max[o / kHeadDim], stat_sum[o / kHeadDim]);
      }
    }
    if constexpr (kTaggedMerge) {
      if (tagged_merger) {
        merge_head_tagged(kv_head, split, [&](int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) {
          store_quad(a.attention.out, quad, lo, hi);
          store_tagged_pair(tagged_heads + 2 * quad, bf162_bits(lo), bf162_bits(hi), launch_tag_s);
        });
        __syncthreads();  // every thread's words stored (no fence: each word carries its tag)
        if (threadIdx.x == 0) atomicAdd(arrivals, 1u);  // (relaxed: a reader polls any word not yet landed)
        merged_head = true;
      }
    } else if constexpr (!kClusterMerge) {
      // visible device-wide before the split (or v3's lone split's head) counts itself in (v34: thread 0's release
      // below, after the barrier, orders the whole CTA's writes before its count)
      if constexpr (!kReleaseCounts) __threadfence();
      __syncthreads();
      if (lone_split) {
        if (threadIdx.x == 0) atomicAdd(arrivals, 1u);
      } else if constexpr (kHeadMerge) {
        __shared__ int last_split;
        if (threadIdx.x == 0) {
          // (v34: acquire and release: the last split sees every other split's partial, and releases its own)
          const uint32_t before = kReleaseCounts ? atom_acq_rel_gpu_add(head_arrivals + kv_head, 1u)
                                                 : atomicAdd(head_arrivals + kv_head, 1u);
          last_split = before + 1 == uint32_t(splits);
          if (last_split) head_arrivals[kv_head] = 0;  // every split of the head is in: ready for the next launch
          if (kClaimsAhead > 0 && last_split) head_arrivals[p.kv_heads + kv_head] = 0;  // (every claim made too)
        }
        __syncthreads();
        merged_head = last_split;
        if (last_split) {
          if constexpr (!kReleaseCounts) __threadfence();  // (v34: thread 0's acquire above, then the barrier)
          merge_heads(kv_head * group, (kv_head + 1) * group, [&](int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) {
            store_quad(a.attention.out, quad, lo, hi);
          });
          // the head's output is visible device-wide before it counts as merged (v34: thread 0's release add)
          if constexpr (!kReleaseCounts) __threadfence();
          __syncthreads();
          if (threadIdx.x == 0) {
            if constexpr (kReleaseCounts)
              red_release_gpu_add(arrivals, 1u);
            else
              atomicAdd(arrivals, 1u);
          }
        }
      } else {
        if (threadIdx.x == 0) atomicAdd(arrivals, 1u);
      }
    }
    stamp(a.trace, kTraceAttended);
    if (kDeferStaging && staging_deferred && warp == 0) stage_rows();  // (v21: the split is counted, merged if last)
    if (kPacedStaging && staging_deferred) stage_deferred();
  } else if (kLateRows && !late_after_splits) {
    copy_late_rows();  // a CTA without a split never uses the ring
  }
  // v4: the first two groups of the rows that are not staged into registers now (the attention CTAs: after their
  // split, when its registers are free), so their HBM round trip overlaps the wait for the attention output.
  constexpr int kV = kOVecs > 0 ? kOVecs : 1;
  constexpr int kOGroup = 16 / kV;  // rows a group: 16 registers of 16 bytes a thread, 64 KB a CTA (q_dim 4096)
  const int64_t o_vecs = q_dim / 8;
  [[maybe_unused]] uint4 wa[kOGroup][kV], wb[kOGroup][kV];  // (v4 only)
  const auto load_group = [&](uint4(&w)[kOGroup][kV], int first) {
    const uint64_t policy = make_evict_first_policy();
#pragma unroll
    for (int j = 0; j < kOGroup; ++j)
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        const int64_t c = threadIdx.x + int64_t(v) * kThreads;
        w[j][v] = first + j < rows && c < o_vecs
                      ? load_stream_16B(reinterpret_cast<const uint4*>(w_rows + int64_t(first + j) * q_dim) + c, policy)
                      : make_uint4(0, 0, 0, 0);
      }
  };
  if constexpr (kOVecs > 0) {
    load_group(wa, staged);
    load_group(wb, staged + kOGroup);
  }
  if (steps & 2) read_residual();

  // v7 (kMlpLead 1): the CTAs without a split, idle until the heads are merged, pull the next MLP's first rows into
  // L2 (HBM idles during the attention's chain). v28 (kMlpLead 3): the same bulk L2 prefetches, issued once the heads
  // are merged (the PM-sampled DRAM read rate of the step is near zero from the splits' tail to the next MLP's start),
  // of the rows past the first mlp_lead_skip_rows of each MLP CTA's gate rows (those its ring reads before its PDL
  // wait). Either way mlp_lead_bytes of each MLP CTA's rows: CTA j of the free ones takes MLP CTAs j, j + free, ...,
  // a lane of warp 0 per 64 KB piece. Fire and forget: nothing waits for them.
  [[maybe_unused]] const auto pull_mlp_rows_l2 = [&](int64_t skip_rows) {
    const int attending = splits * int(p.kv_heads), free_ctas = int(gridDim.x) - attending;
    if (cta < attending || warp != 0 || a.mlp_w_gate_up == nullptr) return;
    constexpr int64_t kPiece = 64 * 1024;
    int k = 0;  // this CTA's pieces so far: lane k % 32 issues piece k
    for (int64_t t = cta - attending; t < a.mlp_ctas; t += free_ctas) {
      const int64_t f0 = norm_mlp_feature_begin(t, a.mlp_ctas, a.mlp_inter);
      const int64_t rows_left = norm_mlp_feature_begin(t + 1, a.mlp_ctas, a.mlp_inter) - f0 - skip_rows;
      const int64_t bytes = min(a.mlp_lead_bytes, max(rows_left, int64_t(0)) * a.hidden * 2);
      const char* rows = reinterpret_cast<const char*>(a.mlp_w_gate_up + (f0 + skip_rows) * a.hidden);
      for (int64_t at = 0; at < bytes; at += kPiece, ++k)
        if (k % kWarpSize == lane) prefetch_l2_bulk(rows + at, uint32_t(min(kPiece, bytes - at)));
    }
  };
  if constexpr (kMlpLead == 1) pull_mlp_rows_l2(0);

  // v14: the o loop once on the attention output's shared memory before it holds the output, to fetch its
  // instructions while the CTA waits for the heads; not in a CTA that merged a head (the merged heads wait on it).
  [[maybe_unused]] const ORows o_rows{reinterpret_cast<const uint4*>(x_s), w_s,   w_rows, residual_s,
                                      a.residual + row0,                   q_dim, rows,   staged};
  if constexpr (kWarmCode == 1) {
    __shared__ float warm_sink[kWarps];  // the warm-up's results, kept where nothing reads them
    if (!(a.warm_code & 1) && !merged_head) {
      warm_sink[warp] = o_rows_pass(o_rows, warp, lane, true);
      stamp(a.trace, kTraceOStaged);
    }
  }

  // 3. The attention output: v1 merges every head's splits here, in every CTA; v2 reads the heads' outputs the
  // last split of each kv head merged. Then this CTA's staged rows are waited for. (v17: in its o loop's last pass.)
  const auto receive_heads = [&] {
    if constexpr (kHeadMerge) {
      if (kTaggedMerge && threadIdx.x == 0) launch_tag_s = launch_tag;  // (a CTA without a split: first here)
      wait_for(arrivals, uint32_t(p.kv_heads));
      stamp(a.trace, kTraceAllSplits);
      if (kTriggerLate && trigger_point == 0) pdl_launch_dependents();
      if (kLateRows && late_after_splits) copy_late_rows();  // (this CTA's split, if any, is long written)
      if constexpr (kTaggedMerge) {
        receive_tagged_heads();
      } else {
        if constexpr (!kReleaseCounts) __threadfence();  // (v34: wait_for's acquire load, then its barrier)
        const uint4* merged = reinterpret_cast<const uint4*>(a.attention.out);
        for (int i = threadIdx.x; i < q_dim / 8; i += kThreads) reinterpret_cast<uint4*>(x_s)[i] = __ldcg(merged + i);
      }
    } else {
      wait_for(arrivals, uint32_t(splits * p.kv_heads));
      stamp(a.trace, kTraceAllSplits);
      if (kTriggerLate && trigger_point == 0) pdl_launch_dependents();
      __threadfence();
      merge_heads(0, int(p.q_heads), [&](int quad, __nv_bfloat162 lo, __nv_bfloat162 hi) {
        store_quad(x_s, quad, lo, hi);
        if (cta == 0) store_quad(a.attention.out, quad, lo, hi);
      });
    }
    __syncthreads();  // x_s complete; every thread of this CTA is past its reads of the partials
    stamp(a.trace, kTraceMerged);
    if (kTriggerLate && trigger_point == 1) pdl_launch_dependents();
    if (threadIdx.x == 0 && atomicAdd(departures, 1u) + 1 == gridDim.x) {
      *arrivals = 0;  // every CTA has seen the count: ready for the next launch
      *departures = 0;
      if constexpr (kTaggedMerge) *launch_count = launch_tag;  // (v35: the next launch's tags one more)
    }
    wait_staged();
    if (late > 0) mbarrier_wait_parity(bar + 1, 0);
    stamp(a.trace, kTraceWeightsIn);
  };
  if constexpr (kWarmRows != 1) receive_heads();

  // 4. o for this CTA's rows: a warp takes kRowsAtOnce rows at a time, a lane every 32nd 16-byte chunk of each
  // (staged rows from shared memory, the rest from global memory).
  const int chunks = int(q_dim / 8);
  const uint4* x_vec = reinterpret_cast<const uint4*>(x_s);
  float sq = 0.0f;
  [[maybe_unused]] float* dots = reinterpret_cast<float*>(smem + l.dots);  // v4, v5: (kWarps, rows_per_cta)
  // v29, v30 (kHandOff): row i of the rows this CTA multiplies, its own [0, own_rows) then those it took over: its
  // 16-byte pieces (o_row; a row past hidden, which no launch plans, reads the last one), and its residual row
  // updated with its o dot product as finish_rows rounds it, its square added to sq (update_row; none past hidden).
  [[maybe_unused]] const auto o_row = [&](int i) -> const uint4* {
    if (i < own_rows)
      return i < staged ? reinterpret_cast<const uint4*>(smem + l.w + size_t(i) * l.row_pitch)
                        : reinterpret_cast<const uint4*>(w_rows + int64_t(i) * q_dim);
    return reinterpret_cast<const uint4*>(a.w_o + min(foreign_row(i - own_rows), a.hidden - 1) * q_dim);
  };
  [[maybe_unused]] const auto update_row = [&](int i, float dot) {
    const int64_t row = i < own_rows ? row0 + i : foreign_row(i - own_rows);
    if (row >= a.hidden) return;
    const bf16 before = i < own_rows ? residual_s[i] : foreign_residual[i - own_rows];
    const float updated = bf16_round(__bfloat162float(before) + bf16_round(dot));
    a.residual[row] = __float2bfloat16_rn(updated);
    sq += updated * updated;
  };
  if constexpr (kOVecs > 0) {
    // v4: groups of kOGroup rows read by the whole CTA (a thread's pieces c = threadIdx.x + v * kThreads of each
    // row), multiplied at once and summed with one transposed warp reduction; the warp sums meet in dots. v1-v3
    // gave each warp 4 whole rows, so the rows that were not staged all fell on warps 4-7, each streaming 32 KB
    // in 4 dependent rounds: ~6.5 us for 152 KB a CTA (trace, context 128).
    float xo[kV][8];
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      const int64_t c = threadIdx.x + int64_t(v) * kThreads;
#pragma unroll
      for (int e = 0; e < 8; ++e) xo[v][e] = 0.0f;
      if (c < o_vecs) bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x_vec[c]), xo[v]);
    }
    const auto keep = [&](float total, int first, int end) {
      const int row = first + warp_sum_transposed_index<kOGroup>(lane);
      if (lane % (kWarpSize / kOGroup) == 0 && row < end) dots[warp * rows_per_cta + row] = total;
    };
    // The staged rows, straight from shared memory (as measured: FMAs read from shared memory as they go).
    for (int first = 0; first < staged; first += kOGroup) {
      float dot[kOGroup];
#pragma unroll
      for (int j = 0; j < kOGroup; ++j) {
        dot[j] = 0.0f;
#pragma unroll
        for (int v = 0; v < kV; ++v) {
          const int64_t c = threadIdx.x + int64_t(v) * kThreads;
          if (first + j >= staged || c >= o_vecs) continue;
          float wf[8];
          bf16x8_to_float(reinterpret_cast<const Bf16x8*>(w_s + int64_t(first + j) * q_dim)[c], wf);
#pragma unroll
          for (int e = 0; e < 8; ++e) dot[j] += wf[e] * xo[v][e];
        }
      }
      keep(warp_sum_transposed<kOGroup>(dot), first, staged);
    }
    stamp(a.trace, kTraceOStaged);
    // The register groups, two in flight: the next-but-one loads as soon as a group is multiplied.
    for (int first = staged; first < rows;) {
      keep(gemv_ring::dot_group<kV, kOGroup>(wa, xo), first, rows);
      first += kOGroup;
      if (first >= rows) break;
      if (first + kOGroup < rows) load_group(wa, first + kOGroup);
      keep(gemv_ring::dot_group<kV, kOGroup>(wb, xo), first, rows);
      first += kOGroup;
      if (first + kOGroup < rows) load_group(wb, first + kOGroup);
    }
  } else if constexpr (kOVecs < 0 && kWarmRows != 1) {
    // v5: the o rows on tensor cores. v4's trace suggested the o phase bound by instructions, not bytes: 13 staged
    // rows (no global load) took 2.5 us of FMAs, bf16 unpacking and shuffles with 8 warps an SM (measured: with
    // 30% fewer instructions a launch the o phase was no shorter, ITERATIONS.md session 7). Here a warp takes
    // the columns [warp, warp + 1) * q_dim / kWarps of every row, 16 rows at a time, as the A operand of
    // mma.m16n8k16 (lane (g, t) reads 16 bytes of rows g and g + 8 at column c = 8 t of each 32-column step, and
    // uses them as the k slots 2t, 2t + 1, 2t + 8, 2t + 9 of two steps), and the attention output as the B
    // operand's column 0 (the same columns, lanes with g == 0; the other 7 columns are zero). The dot product is
    // the sum over k, so any assignment of columns to k slots shared by A and B gives it: one 16-byte load per
    // row per two mma instead of 16 FMAs and 8 unpacks per 16 bytes. Staged rows come from shared memory (rows
    // padded by 64 bytes: conflict-free), the others from global memory through the same generic loads.
    const int tig = lane % 4;
    const int64_t cols_per_warp = q_dim / kWarps;  // PRECOND (supports): q_dim % (kWarps * 32) == 0
    const int64_t piece0 = (warp * cols_per_warp + tig * 8) / 8;  // this lane's first 16-byte piece of a row
    const int col_steps = int(cols_per_warp / 32);                 // two mma k-steps each
    constexpr int kUnroll = 8;                                      // steps in flight a lane: 16 loads of 16 bytes
    const auto row_src = [&](int r) -> const uint4* {
      if (r >= rows) return nullptr;
      return r < staged ? reinterpret_cast<const uint4*>(smem + l.w + size_t(r) * l.row_pitch)
                        : reinterpret_cast<const uint4*>(w_rows + int64_t(r) * q_dim);
    };
    mma_o_tiles<kUnroll>(rows, row_src, x_vec, piece0, col_steps, lane, dots + warp * rows_per_cta);
  }
  if constexpr (kOVecs != 0 && kWarmRows != 1) {
    stamp(a.trace, kTraceORows);
    __syncthreads();
    for (int i = threadIdx.x; i < rows; i += kThreads) {
      float y = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) y += dots[w * rows_per_cta + i];
      const float updated = bf16_round(__bfloat162float(residual_s[i]) + bf16_round(y));
      a.residual[row0 + i] = __float2bfloat16_rn(updated);
      sq += updated * updated;
    }
  }
  // Diagnostic (chain_steps > 0 with bit 8, v1-v3): the o loop runs twice (the second pass recomputes and rewrites
  // the same rows), thread 0 stamping o_staged between: warp 0's rows are staged, so its second pass differs from
  // the first only in finding its instructions already fetched.
  // v17 (kWarmRows 1): the o loop runs a first pass before the heads are in (garbage for the attention output, nothing
  // written) in the CTAs without a split, the last pass receiving the heads first. QkvAttentionOArgs::warm_code:
  // bit 1 no first pass; bit 2 one in the CTAs with a split too (not in one that merged a head); bit 8 the CTAs with
  // a split pull their unstaged rows into L2 once it is written; bit 4 (diagnostic) the first pass reads the
  // attention output's shared memory in place of the unstaged rows.
  [[maybe_unused]] const bool attends = cta < splits * int(p.kv_heads);
  [[maybe_unused]] const bool warm_pass =
      kWarmRows == 1 && !(a.warm_code & 1) && !merged_head && (!attends || (a.warm_code & 2));
  if (kWarmRows == 1 && (a.warm_code & 8) && attends) pull_unstaged_rows();
  const int o_passes = kWarmRows == 1 ? (warm_pass ? 2 : 1)
                                 : !kLean && kOVecs == 0 && a.chain_steps > 0 && (a.chain_steps & 8) ? 2 : 1;
  for (int pass = 0; pass < o_passes; ++pass) {
  [[maybe_unused]] const bool last_pass = pass == o_passes - 1;
  if constexpr (kWarmRows == 1) {
    if (!last_pass && (a.warm_code & 32)) pull_split_rows();
    if (last_pass) {
      if (kMlpLead == 2 && warm_pass && !attends) lead_mlp_rows();  // (v27: after the first pass)
      receive_heads();
      if (kMlpLead == 3 && warm_pass) pull_mlp_rows_l2(a.mlp_lead_skip_rows);  // (v28: the heads are in)
      // v31, warm_code bit 256: a split CTA asks for all its unstaged rows at once (bulk L2 prefetches) as the heads
      // come in, rather than 4 chunks a lane at a time from its loop (~32 KB in flight an SM).
      if (kHandOff == 2 && (a.warm_code & 256) && attends) pull_unstaged_rows();
    } else {
      wait_staged();  // (the first pass reads the staged rows too)
    }
  } else if (pass == 1) {
    stamp(a.trace, kTraceOStaged);
    sq = 0.0f;
  }
  // dot_rows over a warp's kRowsAtOnce rows, chunk c of row r read by load(r, c) (16 bytes), the attention output as
  // the version reads it.
  const auto multiply_rows = [&](float(&acc)[kRowsAtOnce], auto&& load) {
    dot_rows<kRowChunks>(acc, chunks, lane, [&](int c, float(&x)[8]) {
      if constexpr (kTypedRows > 0) {  // (v12, v13: one LDS.128, not four conflicting 32-bit LDS)
        const uint4 xv = load_shared_16B(x_vec + c);
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(xv), x);
      } else {
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x_vec[c]), x);
      }
    }, load);
  };
  // v30 (kHandOff with kOVecs 0): v17's o loop with the rows dealt round-robin, warp w taking rows w, w + kWarps,
  // ... of the CTA's own rows and then the ones it took over, all of them in one batch of up to kMaxRowsAWarp
  // (the hand-off's cap keeps a CTA within kWarps * kMaxRowsAWarp rows): a free CTA's extra rows give no warp a
  // second round, a split CTA's staged rows spread over all its warps, and every warp mixes staged and global
  // rows (v17 gave warps 0-3 the staged rows and 4-7 the rest, which set the o phase's end).
  // v31 (kHandOff 2): in the first pass a taken-over row's slot reads one of the CTA's own rows again (on chip or in
  // L2), so that the taken-over rows leave HBM after the merge, not during the splits, and the pass runs the last
  // pass's code. With warm_code bit 128 (and 2: a first pass in the split CTAs), a split CTA's unstaged rows' slots
  // read its staged rows: the pass only fetches the loop's instructions, with no HBM read to hold up its merge.
  if constexpr (kHandOff > 0 && kOVecs == 0) {
    // (reverse: a giver's first pass reads its whole block, the rows it gives included, into L2 for their takers)
    const bool whole_block = reverse && !last_pass && own_rows < rows;
    const int n_rows = whole_block ? rows : own_rows + foreign_count;
    const int mine = n_rows > warp ? (n_rows - warp + kWarps - 1) / kWarps : 0;  // this warp's rows
    const auto batch = [&](auto rows_tag) {
      constexpr int kRows = decltype(rows_tag)::value;
      float acc[kRows] = {};
      const uint4* src[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        int i = warp + min(r, mine - 1) * kWarps;  // (clamped to its last)
        if (kHandOff == 2 && !last_pass && !whole_block) {
          if (i >= own_rows && own_rows > 0) i = (i - own_rows) % own_rows;
          if ((a.warm_code & 128) && attends && i >= staged && staged > 0) i %= staged;
        }
        src[r] = whole_block && i >= own_rows ? reinterpret_cast<const uint4*>(w_rows + int64_t(i) * q_dim)
                                              : o_row(i);
      }
      dot_rows<4, kRows>(acc, chunks, lane, [&](int c, float(&x)[8]) {
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x_vec[c]), x);
      }, [&](int r, int c) { return src[r][c]; });
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = warp_sum(acc[r]);
      float dot = acc[0];
#pragma unroll
      for (int r = 1; r < kRows; ++r) dot = lane == r ? acc[r] : dot;
      if (last_pass && lane < mine) update_row(warp + lane * kWarps, dot);
    };
    if (mine > 0 && mine <= 2) batch(std::integral_constant<int, 2>{});
    else if (mine > 0 && mine <= 4) batch(std::integral_constant<int, 4>{});
    else if (mine > 0) batch(std::integral_constant<int, kMaxRowsAWarp>{});
  }
  // v29 (kOVecs < 0 with kWarmRows 1): v5's tensor-core o loop in each of v17's passes (the first one, in a CTA
  // without a split, reading its rows while the splits attend; its products land in dots and are dropped), over the
  // CTA's own rows and the ones it took over (kHandOff). Each warp multiplies its q_dim / kWarps columns of every
  // row, 16 rows a tile; the last pass sums the warps' dots in a fixed order and updates the residual rows.
  if constexpr (kOVecs < 0 && kWarmRows == 1) {
    const int n_rows = own_rows + foreign_count;
    const int dots_stride = rows_per_cta + (kHandOff ? kMaxForeignRows : 0);
    const int tig = lane % 4;
    const int64_t cols_per_warp = q_dim / kWarps;  // PRECOND (supports): q_dim % (kWarps * 32) == 0
    const int64_t piece0 = (warp * cols_per_warp + tig * 8) / 8;
    const int col_steps = int(cols_per_warp / 32);
    // A whole tile's loads in flight a lane at Qwen3-8B's q_dim (16 steps: 16 KB a warp, 128 KB a CTA). With v5's 8
    // the first pass ended ~9.5 us after the wait; with 16 no sooner (session 23 traces; 0.980x and 0.968x of v25 at
    // prompt 128 on two leases).
    constexpr int kUnroll = 16;
    mma_o_tiles<kUnroll>(n_rows, [&](int r) { return r < n_rows ? o_row(r) : nullptr; }, x_vec, piece0, col_steps,
                         lane, dots + warp * dots_stride);
    if (last_pass) {
      stamp(a.trace, kTraceORows);
      __syncthreads();  // every warp's dots
      for (int i = threadIdx.x; i < n_rows; i += kThreads) {
        float y = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) y += dots[w * dots_stride + i];
        update_row(i, y);
      }
    }
  }
  if constexpr (kWarmCode == 1) sq += o_rows_pass(o_rows, warp, lane, false);
  for (int first = warp * kRowsAtOnce; kWarmCode != 1 && kOVecs == 0 && !kHandOff && first < rows;
       first += kWarps * kRowsAtOnce) {
    float acc[kRowsAtOnce] = {};
    if (kTypedRows > 0 && first + kRowsAtOnce <= staged) {
      // v12: rows all staged, through shared-memory loads (LDS) rather than generic ones.
      const uint4* rows_s = reinterpret_cast<const uint4*>(smem + l.w + size_t(first) * l.row_pitch);
      multiply_rows(acc, [&](int r, int c) { return load_shared_16B(rows_s + r * (l.row_pitch / 16) + c); });
    } else if (kTypedRows == 1 && first >= staged) {
      // v12: rows all in global memory, through global loads (LDG: the pointer comes from a kernel parameter).
      multiply_rows(acc, [&](int r, int c) {
        return reinterpret_cast<const uint4*>(w_rows + int64_t(min(first + r, rows - 1)) * q_dim)[c];
      });
    } else {
      const uint4* src[kRowsAtOnce];
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) {
        const int row = min(first + r, rows - 1);
        const bool in_ring = row >= first_late && row < first_late + late;
        src[r] = reinterpret_cast<const uint4*>(row < staged ? w_s + int64_t(row) * q_dim
                                                : in_ring    ? late_s + int64_t(row - first_late) * q_dim
                                                             : w_rows + row * q_dim);
        if (kWarmRows == 1 && !last_pass && (a.warm_code & 4) && row >= staged) src[r] = x_vec;  // (v17: bit 4)
      }
      multiply_rows(acc, [&](int r, int c) { return src[r][c]; });
    }
    finish_rows(acc, first, rows, lane, kWarmRows != 1 || last_pass, residual_s, a.residual + row0, sq);
  }
  if constexpr (kWarmRows == 1) {
    if (!last_pass) stamp(a.trace, kTraceOStaged);
    if (!last_pass && (a.warm_code & 16)) pull_split_rows();
  }
  }
  if (kOVecs == 0) stamp(a.trace, kTraceORows);  // (v29: in its last pass)
  if (kTriggerLate && trigger_point == 2) pdl_launch_dependents();
  // Σ residual² over this CTA's rows, summed over warps in a fixed order.
  __shared__ float warp_sq[kWarps];
  sq = warp_sum(sq);
  if (lane == 0) warp_sq[warp] = sq;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += warp_sq[w];
    // (v37: a grid of fewer CTAs than the count of partials the next norm reads, zero past the grid)
    if (!kClusterMerge || cta < partial_count) a.norm_partials[cta] = total;
    if constexpr (kClusterMerge)
      for (int i = int(gridDim.x) + cta; i < partial_count; i += int(gridDim.x)) a.norm_partials[i] = 0.0f;
  }
  // v27: the MLP rows still in flight land before the CTA's shared memory goes.
  if constexpr (kMlpLead == 2)
    while (lead_pending > 0) lead_land_oldest();
  // v31, diagnostic (warm_code bits 1024 and 2048: 1, 2 or 3 us): a CTA without a split stays that long on its SM
  // after its work, so that the next launch's CTAs get the SM later; how the layer's period follows measures what the
  // free CTAs' exit is worth. Every output is written before it.
  if constexpr (kHandOff == 2) {
    const int hold_us = (a.warm_code >> 10) & 3;
    if (hold_us > 0 && !attends && threadIdx.x == 0) {
      const uint64_t until = global_timer_ns() + uint64_t(hold_us) * 1000;
      while (global_timer_ns() < until) {
      }
    }
  }
  stamp(a.trace, kTraceEnd);
  // (v33: its rows, norm partial and zeroed delta rows, for the next MLP)
  if constexpr (kCounted) handoff_finish(a.handoff, passed_before, a.handoff_signal);
#endif
}

struct Plan {
  Grid grid;
  int max_splits, keys_per_split, keys_cap, stages;
  size_t smem_budget;
};

// warp_keys: v6, whose attention core has no K/V ring (stages 0). claim: v10, whose CTAs may take more keys than a
// static split (its keys_cap holds the most slots one may fill; its ring depth is v9's).
// cluster: v37, whose kv heads take at most kClusterCtas splits (its grid comes at launch: cluster_grid_for).
Plan plan_for(const QkvAttentionOArgs& a, bool warp_keys = false, bool claim = false, bool scaled = false,
              bool cluster = false) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  Plan plan{};
  plan.grid = grid_for(a.hidden, p.kv_heads);
  plan.max_splits = max_splits_for(plan.grid, p.kv_heads);
  if (cluster) plan.max_splits = std::min(plan.max_splits, kClusterCtas);
  plan.keys_per_split = a.keys_per_split > 0 ? a.keys_per_split : kDefaultKeysPerSplit;
  // A split gets at most keys_per_split keys until there are max_splits of them, then ceil(keys / max_splits).
  const int64_t keys = a.attention.max_position + 1;
  int64_t per_split = std::max<int64_t>(std::min<int64_t>(plan.keys_per_split, keys),
                                        (keys + plan.max_splits - 1) / plan.max_splits);
  // v22: the most keys a split takes at any position up to max_position under kScaledSplits' rule.
  constexpr int64_t kTarget = kScaledSplitsTarget, kMaxKeys = kScaledSplitsMaxKeys;
  if (scaled && plan.keys_per_split < kMaxKeys && keys > kTarget * plan.keys_per_split)
    per_split = keys <= kTarget * kMaxKeys
                    ? (keys + kTarget - 1) / kTarget
                    : std::max<int64_t>(kMaxKeys, (keys + plan.max_splits - 1) / plan.max_splits);
  plan.keys_cap = int((per_split + kTileKeys - 1) / kTileKeys * kTileKeys);
  plan.smem_budget = a.smem_bytes > 0 ? std::min(size_t(a.smem_bytes), kMaxSmem - kStaticSmemSlack) : kDefaultSmem;
  // K/V ring depth: 2 tiles where a split has at most two, else 4, or the tuning field's 2 / 4 / 8.
  plan.stages = warp_keys ? 0 : a.ring_stages > 0 ? a.ring_stages : plan.keys_cap <= 2 * kTileKeys ? 2 : 4;
  if (claim) {
    // A split's share of the tiles, at the largest context (max_splits) or below it (fewer splits, each at most
    // keys_per_split keys and a tile), two more for the fast ones, and at least its static tiles, a claimed one and
    // the owner's: splits x slots >= the head's tiles, so every claim fits somewhere.
    const int64_t tiles = (keys + kTileKeys - 1) / kTileKeys;
    const int64_t share = std::max<int64_t>((tiles + plan.max_splits - 1) / plan.max_splits,
                                            (plan.keys_per_split + kTileKeys - 1) / kTileKeys + 1);
    const int64_t slots = std::max<int64_t>(share + 2, plan.stages + 1);
    plan.keys_cap = int(slots * kTileKeys);
  }
  return plan;
}

// v37's grid: clusters of kClusterCtas CTAs, at least one a kv head (its splits), with the o rows in blocks as even
// as `clusters` (the most the GPU holds at once) allow; {0, 0} where that does not fit in `clusters`, would take
// more CTAs than the `partial_count` norm partials the next launch reads (qkv_attention_o_partials), or more than
// max_rows rows a CTA. Qwen3-8B on 132 SMs: 15 clusters (one GPC holds one of 8), 35 rows a CTA, 118 with rows in a
// grid of 120.
Grid cluster_grid_for(int64_t hidden, int64_t kv_heads, int clusters, int64_t partial_count, int64_t max_rows) {
  const int64_t most = int64_t(clusters) * kClusterCtas;
  if (clusters < kv_heads || most == 0) return {0, 0};
  const int64_t rows = (hidden + most - 1) / most;
  if (rows > max_rows) return {0, 0};
  const int64_t ctas = std::max((hidden + rows - 1) / rows, kv_heads * kClusterCtas);
  const int64_t grid = (ctas + kClusterCtas - 1) / kClusterCtas * kClusterCtas;
  if (grid > most || grid > partial_count) return {0, 0};
  return {int(grid), int(rows)};
}

Layout layout_of(const QkvAttentionOArgs& a, const Plan& plan, int o_vecs, bool row_barriers = false,
                 int extra_dot_rows = 0) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  return layout_for(int(p.head_dim), plan.stages, int(p.q_heads), int(p.q_heads / p.kv_heads),
                    plan.keys_cap, plan.grid.rows_per_cta, plan.smem_budget, o_vecs, row_barriers,
                    extra_dot_rows);
}

template <int kHeadDim, int kStages, bool kHeadMerge, bool kShortChain, int kOVecs, int kMlpLead = 0,
          bool kLean = false, int kClaimsAhead = 0, bool kLateRows = false, int kTypedRows = 0, int kWarmCode = 0,
          bool kTouchPages = false, int kWarmRows = 0, int kRowChunks = 4,
          bool kDeferStaging = false, bool kScaledSplits = false, bool kReverseSplits = false,
          bool kPacedStaging = false, int kHandOff = 0, bool kTriggerLate = false,
          bool kCounted = false, int kChainSync = 0, int kSplitPrep = 0>
void launch_stages(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  constexpr auto kernel = qkv_attention_o_kernel<kHeadDim, kStages, kHeadMerge, kShortChain, kOVecs, kMlpLead, kLean,
                                                 kClaimsAhead, kLateRows, kTypedRows, kWarmCode, kTouchPages,
                                                 kWarmRows, kRowChunks, kDeferStaging, kScaledSplits, kReverseSplits,
                                                 kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync,
                                                 kSplitPrep>;
  // Set once to the most this kernel ever asks for: the staged rows take what the rest leaves of the budget.
  static std::atomic<bool> configured{false};
  if (!configured.load()) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kMaxSmem - kStaticSmemSlack)));
    configured.store(true);
  }
  if constexpr (kChainSync == 4) {
    // v37: the grid in clusters the GPU holds at once; where they cannot hold one a kv head, v34's kernel (v39:
    // with its o loop).
    const QkNormRopeCacheArgs& p = a.attention.prep;
    const int64_t partial_count = plan.grid.ctas;  // (plan_for's grid: the norm partials the next launch reads)
    Plan clustered = plan;
    const int64_t max_rows = kHandOff ? kWarps * kMaxRowsAWarp : a.hidden;  // (v39: a warp's rows in one batch)
    const int resident = resident_clusters(kernel, dim3(kThreads), plan.smem_budget, kClusterCtas);
    clustered.grid = cluster_grid_for(a.hidden, p.kv_heads, resident, partial_count, max_rows);
    if (clustered.grid.ctas == 0)
      return launch_stages<kHeadDim, kStages, kHeadMerge, kShortChain, kOVecs, kMlpLead, kLean, kClaimsAhead,
                           kLateRows, kTypedRows, kWarmCode, kTouchPages, kWarmRows, kRowChunks, kDeferStaging,
                           kScaledSplits, kReverseSplits, kPacedStaging, kHandOff, kTriggerLate, kCounted, 1,
                           kSplitPrep>(
          a, plan_for(a, false, kClaimsAhead > 0, kScaledSplits), stream);
    const Layout l = layout_of(a, clustered, kOVecs, kPacedStaging, kHandOff ? kMaxForeignRows : 0);
    launch_clustered(kernel, dim3(unsigned(clustered.grid.ctas)), dim3(kThreads), l.bytes, stream, kClusterCtas, a, l,
                     clustered.keys_cap, clustered.keys_per_split, clustered.grid.rows_per_cta, clustered.max_splits,
                     int(partial_count));
  } else {
    const Layout l = layout_of(a, plan, kOVecs, kPacedStaging, kHandOff ? kMaxForeignRows : 0);
    launch(kernel, dim3(unsigned(plan.grid.ctas)), dim3(kThreads), l.bytes, stream, a, l, plan.keys_cap,
           plan.keys_per_split, plan.grid.rows_per_cta, plan.max_splits, plan.grid.ctas);
  }
}

template <int kHeadDim, bool kHeadMerge, bool kShortChain, int kOVecs, int kMlpLead = 0, bool kLean = false,
          int kClaimsAhead = 0, bool kLateRows = false, int kTypedRows = 0, int kWarmCode = 0,
          bool kTouchPages = false, int kWarmRows = 0, int kRowChunks = 4,
          bool kDeferStaging = false, bool kScaledSplits = false, bool kReverseSplits = false,
          bool kPacedStaging = false, int kHandOff = 0, bool kTriggerLate = false,
          bool kCounted = false, int kChainSync = 0, int kSplitPrep = 0>
void launch_head_dim(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  if (plan.stages == 2) {
    launch_stages<kHeadDim, 2, kHeadMerge, kShortChain, kOVecs, kMlpLead, kLean, kClaimsAhead, kLateRows, kTypedRows,
                  kWarmCode, kTouchPages, kWarmRows, kRowChunks, kDeferStaging, kScaledSplits, kReverseSplits,
                  kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync, kSplitPrep>(a, plan, stream);
  } else if (plan.stages == 4) {
    launch_stages<kHeadDim, 4, kHeadMerge, kShortChain, kOVecs, kMlpLead, kLean, kClaimsAhead, kLateRows, kTypedRows,
                  kWarmCode, kTouchPages, kWarmRows, kRowChunks, kDeferStaging, kScaledSplits, kReverseSplits,
                  kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync, kSplitPrep>(a, plan, stream);
  } else {
    launch_stages<kHeadDim, 8, kHeadMerge, kShortChain, kOVecs, kMlpLead, kLean, kClaimsAhead, kLateRows, kTypedRows,
                  kWarmCode, kTouchPages, kWarmRows, kRowChunks, kDeferStaging, kScaledSplits, kReverseSplits,
                  kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync, kSplitPrep>(a, plan, stream);
  }
}

// kOVecs: 0 (v1-v3), v4's 16-byte pieces of a w_o row per thread (2 up to q_dim 4096, 4 up to 8192), or -1 (v5:
// the o rows on tensor cores).
// kWarpKeys: v6's attention core (the kernel's kStages == 0); kMlpLead: the next MLP's rows into L2, 1 v7's burst,
// 2 v27's paced copies.
template <bool kHeadMerge, bool kShortChain = false, int kOVecs = 0, bool kWarpKeys = false, int kMlpLead = 0,
          bool kLean = false, int kClaimsAhead = 0, bool kLateRows = false, int kTypedRows = 0, int kWarmCode = 0,
          bool kTouchPages = false, int kWarmRows = 0, int kRowChunks = 4,
          bool kDeferStaging = false, bool kScaledSplits = false, bool kReverseSplits = false,
          bool kPacedStaging = false, int kHandOff = 0, bool kTriggerLate = false,
          bool kCounted = false, int kChainSync = 0, int kSplitPrep = 0>
void launch_version(const QkvAttentionOArgs& a, cudaStream_t stream) {
  const Plan plan = plan_for(a, kWarpKeys, kClaimsAhead > 0, kScaledSplits, kChainSync == 4);
  if constexpr (kWarpKeys) {
    if (a.attention.prep.head_dim == 128)
      launch_stages<128, 0, kHeadMerge, kShortChain, kOVecs>(a, plan, stream);
    else
      launch_stages<64, 0, kHeadMerge, kShortChain, kOVecs>(a, plan, stream);
  } else if (a.attention.prep.head_dim == 128) {
    launch_head_dim<128, kHeadMerge, kShortChain, kOVecs, kMlpLead, kLean, kClaimsAhead, kLateRows, kTypedRows,
                    kWarmCode, kTouchPages, kWarmRows, kRowChunks, kDeferStaging, kScaledSplits, kReverseSplits,
                    kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync, kSplitPrep>(a, plan, stream);
  } else {
    launch_head_dim<64, kHeadMerge, kShortChain, kOVecs, kMlpLead, kLean, kClaimsAhead, kLateRows, kTypedRows,
                    kWarmCode, kTouchPages, kWarmRows, kRowChunks, kDeferStaging, kScaledSplits, kReverseSplits,
                    kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync, kSplitPrep>(a, plan, stream);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t qkv_attention_o_partials(int64_t hidden, int64_t kv_heads) { return grid_for(hidden, kv_heads).ctas; }

int64_t qkv_attention_o_counter_bytes(int64_t, int64_t kv_heads) { return counter_words(kv_heads) * 4; }

int64_t qkv_attention_o_workspace_floats(int64_t hidden, int64_t q_heads, int64_t kv_heads, int64_t head_dim) {
  const int64_t splits = max_splits_for(grid_for(hidden, kv_heads), kv_heads);
  return counter_words(kv_heads) + stats_words(q_heads, splits) + q_heads * splits * head_dim +
         2 * (tagged_split_words(q_heads, splits, head_dim) + tagged_head_words(q_heads, head_dim)) + 4;
}

namespace {

// What every version needs; warp_keys: v6's plan (no K/V ring); claim: v10's.
bool supports(const QkvAttentionOArgs& a, bool warp_keys, bool claim = false) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  if (p.tokens != 1 || (p.head_dim != 64 && p.head_dim != 128)) return false;
  if (p.kv_heads < 1 || p.q_heads % p.kv_heads != 0 || p.q_heads / p.kv_heads > kMaxGroup) return false;
  if (p.q_heads > kWarps * 8) return false;  // the merge's heads per warp
  if (a.hidden < 1 || a.workspace == nullptr || a.w_o == nullptr || a.residual == nullptr) return false;
  if (a.delta_copies < 1 || a.w_qkv != nullptr) return false;  // (v8 computes the QKV projection itself)
  if (a.attention.max_position < 0 || a.attention.max_position >= p.max_ctx) return false;
  if (a.keys_per_split < 0 || a.keys_per_split > kMaxKeysPerSplit || a.smem_bytes < 0) return false;
  if (a.ring_stages != 0 && a.ring_stages != 2 && a.ring_stages != 4 && a.ring_stages != 8) return false;
  if (device_compute_major() < 9) return false;
  const Plan plan = plan_for(a, warp_keys, claim);
  // Every CTA resident at once (one per SM), at least one split per kv head, a split within the scores buffer,
  // partials per token within what the norm GEMVs read.
  if (plan.grid.ctas > device_sm_count() || plan.max_splits < 1 || plan.keys_cap > kMaxKeysPerSplit ||
      plan.grid.ctas > kMaxNormPartials)
    return false;
  // Room for the attention within the budget (the staged rows may be none).
  return layout_of(a, plan, -1).bytes <= plan.smem_budget;  // (v4's and v5's: v1-v3's and 1 KB more)
}

}  // namespace

bool qkv_attention_o_v1_supports(const QkvAttentionOArgs& a) { return supports(a, false); }

void launch_qkv_attention_o_v1(const QkvAttentionOArgs& a, cudaStream_t stream) { launch_version<false>(a, stream); }

// v2_qkv_attention_o_head_merge: v1 where the last split of each kv head merges the head (kHeadMerge above).
bool qkv_attention_o_v2_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v1_supports(a) && a.attention.out != nullptr;
}

void launch_qkv_attention_o_v2(const QkvAttentionOArgs& a, cudaStream_t stream) { launch_version<true>(a, stream); }

// v3_qkv_attention_o_short_chain: v2 with the attention's dependent chain shortened (kShortChain above): the
// split's cached K/V rows prefetched into L2 before the PDL wait, the residual rows read after the split instead of
// before it, the merge's values in flight with its statistics, a lone split writing its head from shared memory.
bool qkv_attention_o_v3_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v2_supports(a); }

void launch_qkv_attention_o_v3(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, true>(a, stream);
}

// v4_qkv_attention_o_grouped: v3 with the o rows multiplied in groups read by the whole CTA, the first two groups
// of rows that are not staged loaded into registers while the attention runs (kOVecs above).
bool qkv_attention_o_v4_supports(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  return qkv_attention_o_v3_supports(a) && p.q_heads * p.head_dim <= 8 * 4 * kThreads;
}

// v5_qkv_attention_o_mma: v3 with the o rows multiplied on tensor cores (kOVecs == -1 above).
bool qkv_attention_o_v5_supports(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  return qkv_attention_o_v3_supports(a) && (p.q_heads * p.head_dim) % (kWarps * 32) == 0;
}

void launch_qkv_attention_o_v5(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, true, -1>(a, stream);
}

void launch_qkv_attention_o_v4(const QkvAttentionOArgs& a, cudaStream_t stream) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  if (p.q_heads * p.head_dim <= 8 * 2 * kThreads)
    launch_version<true, true, 2>(a, stream);
  else
    launch_version<true, true, 4>(a, stream);
}

// v6_qkv_attention_o_warp_keys: v2 with attention_warp::attend_keys as its attention core (every warp on its own
// 16-key chunks straight from global memory, no K/V ring or block barrier in the loop).
bool qkv_attention_o_v6_supports(const QkvAttentionOArgs& a) {
  return supports(a, true) && a.attention.out != nullptr && a.ring_stages == 0;
}

void launch_qkv_attention_o_v6(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, true>(a, stream);
}

// v7_qkv_attention_o_mlp_lead: v2 whose CTAs without a split pull the next MLP's first rows into L2 while the
// splits attend (QkvAttentionOArgs::mlp_w_gate_up).
bool qkv_attention_o_v7_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v2_supports(a) && a.mlp_inter >= 0 && a.mlp_ctas >= 0 && a.mlp_lead_bytes >= 0 &&
         a.mlp_lead_bytes % 16 == 0 && (a.mlp_w_gate_up == nullptr || a.mlp_ctas > 0) &&
         reinterpret_cast<uintptr_t>(a.mlp_w_gate_up) % 16 == 0;
}

void launch_qkv_attention_o_v7(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, true>(a, stream);
}

// v9_qkv_attention_o_lean: v2 with its tuning and diagnostic paths compiled out (kLean above), as v10 of the MLP
// (ITERATIONS.md session 11). Refuses args that ask for them.
bool qkv_attention_o_v9_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v2_supports(a) && a.l2_prefetch_rows < 0 && a.chain_steps <= 0;
}

void launch_qkv_attention_o_v9(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true>(a, stream);
}

// v10_qkv_attention_o_claimed: v9 whose splits of a kv head share its keys out while they run (kClaimsAhead above,
// attention_mma::attend_claimed_keys). Refuses what v9 refuses and a K/V ring depth other than its own choice.
// QkvAttentionOArgs::claims_ahead: the claims a CTA keeps in flight, 2 (the default), 4 or 8;
// QkvAttentionOArgs::claim_static_tiles: the tiles each split takes before it claims (0: the ring's depth - 1).
bool qkv_attention_o_v10_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v9_supports(a) && a.ring_stages == 0 &&
         (a.claims_ahead == 0 || a.claims_ahead == 2 || a.claims_ahead == 4 || a.claims_ahead == 8) &&
         a.claim_static_tiles >= 0 && a.claim_static_tiles <= kMaxKeysPerSplit / kTileKeys &&
         supports(a, false, true);
}

void launch_qkv_attention_o_v10(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (a.claims_ahead == 8)
    launch_version<true, false, 0, false, false, true, 8>(a, stream);
  else if (a.claims_ahead == 4)
    launch_version<true, false, 0, false, false, true, 4>(a, stream);
  else
    launch_version<true, false, 0, false, false, true, 2>(a, stream);
}

// v11_qkv_attention_o_late_rows: v9 whose CTAs copy the o rows that fit in the K/V ring into it once the ring is
// free (kLateRows above). Refuses what v9 refuses.
// QkvAttentionOArgs::late_rows: which rows and when (0-3, bits above).
bool qkv_attention_o_v11_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v9_supports(a) && a.late_rows >= 0 && a.late_rows <= 3;
}

void launch_qkv_attention_o_v11(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, true>(a, stream);
}

// v12_qkv_attention_o_typed_rows: v9 whose o loop reads staged rows with shared-memory loads and unstaged ones with
// global loads, not both through generic loads (kTypedRows 1 above). Refuses what v9 refuses.
bool qkv_attention_o_v12_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v12(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 1>(a, stream);
}

// v13_qkv_attention_o_shared_rows: v12 with v9's generic loads for the unstaged rows (kTypedRows 2 above).
bool qkv_attention_o_v13_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v13(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 2>(a, stream);
}

// v14_qkv_attention_o_warm_code: v9 whose split attention and o loop are functions of their own, each run once
// before it is needed as a warm-up of its instructions (kWarmCode above). Refuses what v9 refuses.
bool qkv_attention_o_v14_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v14(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 0, 1>(a, stream);
}

// v15_qkv_attention_o_warm_first: v9 whose split attention is a function of its own, run once as a warm-up of its
// instructions first thing in the CTA, before it issues its staged o rows (kWarmCode 2 above). Refuses what v9
// refuses.
bool qkv_attention_o_v15_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v15(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 0, 2>(a, stream);
}

// v16_qkv_attention_o_touch_pages: v9 that prefetches one line of every page its chain touches after the PDL wait
// into L2 before it (kTouchPages above). Refuses what v9 refuses.
bool qkv_attention_o_v16_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v16(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, true>(a, stream);
}

namespace {

// Whether at least half of a launch's positions [0, max_position] give every CTA a split when a split takes at most
// max(keys_per_split, min_split_keys) keys (max_position at least twice the first position that does). v17's
// launcher and those built on it then take a kernel that does nothing different there.
bool mostly_every_cta_splits(const QkvAttentionOArgs& a, int min_split_keys = 0) {
  const Plan plan = plan_for(a);
  const int64_t split_keys = std::max(plan.keys_per_split, min_split_keys);
  return a.attention.max_position >= 2 * split_keys * (plan.max_splits - 1);
}

}  // namespace

// v17_qkv_attention_o_warm_rows: v9 whose o loop runs a first pass before the heads are in, in the CTAs without a
// split (kWarmRows above): its unstaged rows read from HBM while the splits attend, not when every CTA's o phase and
// the next MLP's first copies want HBM at once. Refuses what v9 refuses. QkvAttentionOArgs::warm_code: bit 1 no
// first pass, bit 2 one in the CTAs with a split too, bit 8 those pull their unstaged rows into L2 after their
// split; diagnostic bit 4: the first pass reads shared memory in place of the unstaged rows (instructions only).
bool qkv_attention_o_v17_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

// Where at least half the launch's positions [0, max_position] split the most CTAs the plan has (max_position past
// twice the first position that does), no first pass would run for most steps, and v9's own kernel is launched (and
// warm_code has no effect): v17's code measured 1.2-1.4% slower than v9's at context 8192, where neither does
// anything different (ITERATIONS.md session 15; code layout, as in sessions 7 and 12). With the engine's
// power-of-two graph buckets that is v17's kernel up to the bucket of 1024 positions at Qwen3-8B's shape, v9's past
// it.
void launch_qkv_attention_o_v17(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (mostly_every_cta_splits(a)) return launch_qkv_attention_o_v9(a, stream);
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 1>(a, stream);
}

// v18_qkv_attention_o_pull_rows: v9 whose CTAs without a split pull their unstaged o rows into L2 after the PDL
// wait (kWarmRows 2 above). Refuses what v9 refuses.
bool qkv_attention_o_v18_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v18(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 2>(a, stream);
}

// v19_qkv_attention_o_deep_rows: v9 whose o loop keeps 8 chunks of each of a warp's 4 rows in flight a lane (32
// loads of 16 bytes, 8 KB a warp), not 4 (kRowChunks above). Session 13's Nsight Compute reading of v9's o loop had
// it stalled 76% on the first use of its 16 row loads; an unstaged row's 16 chunks a lane then take 4 dependent
// round trips, 2 here. Refuses what v9 refuses.
bool qkv_attention_o_v19_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v19(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 0, 8>(a, stream);
}

// v20_qkv_attention_o_warm_deep_rows: v17 with v19's o loop; where v17 takes v9's kernel, v19's. Refuses what v9
// refuses; QkvAttentionOArgs::warm_code as v17.
bool qkv_attention_o_v20_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v20(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (mostly_every_cta_splits(a)) return launch_qkv_attention_o_v19(a, stream);
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 1, 8>(a, stream);
}

// v21_qkv_attention_o_late_staging: v17 whose CTAs with a split copy their staged o rows into shared memory once
// their split is counted instead of before the PDL wait (kDeferStaging above): 40-56 of 128 CTAs at context 128
// no longer have 104 KB queued ahead of their chain's loads (session 8: a load waits behind the bytes queued for its
// SM; session 9: 7 staged rows instead of 15 wrote the splits 1.5 us earlier at 8192). v17's kernel at every
// context (no fallback to v9: where every CTA splits, no CTA stages before the wait). Refuses what v9 refuses;
// QkvAttentionOArgs::warm_code as v17.
bool qkv_attention_o_v21_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v21(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 1, 4, true>(a, stream);
}

// v22_qkv_attention_o_scaled_splits: v17 whose positions past 384 keys take fewer, longer splits (kScaledSplits
// above), so that more CTAs read their o rows early; v9's kernel (its own split rule) where at least half of the
// launch's positions give every CTA a split under v22's rule (v17's launcher's test). Refuses what v9 refuses;
// QkvAttentionOArgs::warm_code as v17.
bool qkv_attention_o_v22_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v22(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (mostly_every_cta_splits(a, kScaledSplitsMaxKeys)) return launch_qkv_attention_o_v9(a, stream);
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 1, 4, false, true>(a, stream);
}

// v23_qkv_attention_o_bucket_splits: v17 where v17 runs its own kernel (graph buckets up to 1024 positions at
// Qwen3-8B's shape), v22 where v17 would take v9's (v22's fewer, longer splits; v9's kernel from the bucket of 8192
// positions). Measured on one lease (ITERATIONS.md session 16): v22 against v17 0.998x at prompt 512 (bucket 1024),
// 1.006x at 1024 (bucket 2048), 1.0035x at 2048 (bucket 4096). Refuses what v9 refuses.
bool qkv_attention_o_v23_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v23(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (mostly_every_cta_splits(a)) return launch_qkv_attention_o_v22(a, stream);
  launch_qkv_attention_o_v17(a, stream);
}

// v25_qkv_attention_o_scaled_early: v22 wherever a position of the launch's range may pass the keys from which v22's
// splits differ from v17's (kScaledSplitsTarget splits of keys_per_split: 384 at the default), v17 below them, where
// the two plan the same splits (v17's code measured 0.05% faster there, code layout). Why: v23 took v22 only where
// v17 would run v9's kernel (max_position from 1920 at Qwen3-8B's shape), yet v22 measured faster from prompt 512
// (session 18, one lease: 1.0023x at prompt 512, 1.003x at 760-768, 1.012x at 1024, in buckets of 800-2048
// positions), and the same as v23 past it. Refuses what v9 refuses.
bool qkv_attention_o_v25_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

namespace {

// Whether launch_scaled_early takes kScaledSplits' fewer, longer splits: past kScaledSplitsTarget splits of the
// plan's keys_per_split.
bool scaled_splits(const QkvAttentionOArgs& a) {
  return a.attention.max_position + 1 > int64_t(kScaledSplitsTarget) * plan_for(a).keys_per_split;
}

// v25's choice of kernel, for v25 and the versions built on it (kMlpLead: v27's pull; kPacedStaging: v26's staging):
// v22's (kScaledSplits) where a position of the launch may pass kScaledSplitsTarget splits of keys_per_split keys,
// v17's below; v9's where most of the launch's positions split every CTA under that rule (v22's and v17's launchers'
// tests). kHandOffMode: the split CTAs' unstaged rows taken over by the others, 1 with v29's o loop on tensor
// cores, 2 with v30's round-robin rows, 3 v30's read after the merge (v31); 4: v30's round-robin rows, no hand-off
// (v39). kTriggerLate: v32's PDL trigger.
template <int kMlpLead = 0, bool kPacedStaging = false, int kHandOffMode = 0, bool kTriggerLate = false,
          bool kCounted = false, int kChainSync = 0, int kSplitPrep = 0>
void launch_scaled_early(const QkvAttentionOArgs& a, cudaStream_t stream) {
  const bool scaled = scaled_splits(a);
  if (mostly_every_cta_splits(a, scaled ? kScaledSplitsMaxKeys : 0)) {
    if constexpr (kCounted || kChainSync > 0)  // (v33: v9's kernel with the hand-offs; v34-v36: its sync; v37: v34's)
      return launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 0, 4, false, false, false,
                            false, 0, false, kCounted, kChainSync == 4 ? 1 : kChainSync, kSplitPrep>(a,
                                                                                                      stream);
    return launch_qkv_attention_o_v9(a, stream);
  }
  constexpr int kOVecs = kHandOffMode == 1 ? -1 : 0;
  constexpr int kHandOff = kHandOffMode == 3 ? 2 : kHandOffMode == 4 ? 3 : kHandOffMode > 0 ? 1 : 0;
  if (scaled)
    return launch_version<true, false, kOVecs, false, kMlpLead, true, 0, false, 0, 0, false, 1, 4, false, true,
                          false, kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync, kSplitPrep>(
        a, stream);
  launch_version<true, false, kOVecs, false, kMlpLead, true, 0, false, 0, 0, false, 1, 4, false, false, false,
                 kPacedStaging, kHandOff, kTriggerLate, kCounted, kChainSync, kSplitPrep>(a, stream);
}

}  // namespace

void launch_qkv_attention_o_v25(const QkvAttentionOArgs& a, cudaStream_t stream) { launch_scaled_early(a, stream); }

// v26_qkv_attention_o_paced: v25 whose CTAs without a split keep QkvAttentionOArgs::stage_window staged o rows in
// flight instead of issuing all at once (kPacedStaging above; QkvAttentionOArgs::split_staging says how the CTAs
// with a split stage theirs). Where v25 runs v9's kernel (most positions split every CTA), v9's. Refuses what v9
// refuses, and split_staging outside 0-2 or a negative stage_window. Measured (H200, Qwen3-8B, prompt 128,
// ITERATIONS.md session 20): 1.0003x of v25 with 4 rows in flight, 0.996x with 8, 0.991x with 16; the splits were
// written 0.8 us sooner (7.85 us after the wait against 8.65) and the heads merged 0.66 us sooner, but the paced rows
// landed later, the o phase began no earlier, and the next MLP ran 1.2 us longer from its release.
bool qkv_attention_o_v26_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v9_supports(a) && a.stage_window >= 0 && a.split_staging >= 0 && a.split_staging <= 2;
}

void launch_qkv_attention_o_v26(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, true>(a, stream);
}

// v27_qkv_attention_o_mlp_warm: v25 whose CTAs without a split, once their first o pass is done, pull the next
// MLP's gate rows past those its ring reads before its PDL wait into L2, a few copies in flight at a time, until the
// heads are merged (kMlpLead 2 above): bytes the MLP would read from HBM after its release, moved into the HBM time
// the attention's chain leaves idle. Where v25 runs v9's kernel (every CTA splits: none is free), v9's. Refuses what
// v9 refuses, a negative window or skip, and shapes past the pull's 32-bit arithmetic. Measured (H200, Qwen3-8B,
// ITERATIONS.md session 21): against its own code with nothing to pull (--mlp-l2-lead-kb 0) 0.9993x / 0.9995x /
// 0.9994x / 0.9986x at prompts 128 / 512 / 1024 / 2048; evict-first pulls 0.992x-0.996x of the evict-normal ones.
// Traced, the MLP after its release is no shorter (66.74 us against v25's 66.20) and the heads merge ~0.8 us later.
bool qkv_attention_o_v27_supports(const QkvAttentionOArgs& a) {
  constexpr int64_t kInt32 = int64_t(1) << 31;  // (the pull's piece arithmetic is 32-bit)
  return qkv_attention_o_v9_supports(a) && a.mlp_lead_window >= 0 && a.mlp_lead_skip_rows >= 0 &&
         a.mlp_lead_policy >= 0 && a.mlp_lead_policy <= 2 && a.mlp_lead_bytes >= 0 && a.mlp_ctas >= 0 &&
         a.mlp_inter >= 0 && int64_t(a.mlp_ctas) * a.mlp_inter < kInt32 &&
         a.mlp_lead_skip_rows + a.mlp_lead_bytes / 16 + a.mlp_ctas < kInt32;
}

void launch_qkv_attention_o_v27(const QkvAttentionOArgs& a, cudaStream_t stream) { launch_scaled_early<2>(a, stream); }

// v28_qkv_attention_o_mlp_after_heads: v25 whose CTAs without a split, once the heads are merged, send bulk L2
// prefetches of the next MLP's gate rows past mlp_lead_skip_rows (mlp_lead_bytes of each MLP CTA's) and run their o
// phase while they land (kMlpLead 3 above). Why: the step's DRAM read throughput sampled every 1.5 us (ncu PM
// sampling over one graph replay, ITERATIONS.md session 22) is near zero from the splits' tail to the next MLP's
// first streaming microsecond, ~8 us a layer; v27 pulled during the chain and slowed it, v7 at its start.
// Where v25 runs v9's kernel (every CTA splits: none is free), v9's. Refuses what v9 refuses and a negative skip or
// size.
bool qkv_attention_o_v28_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v9_supports(a) && a.mlp_lead_skip_rows >= 0 && a.mlp_lead_bytes >= 0 && a.mlp_ctas >= 0 &&
         a.mlp_inter >= 0;
}

void launch_qkv_attention_o_v28(const QkvAttentionOArgs& a, cudaStream_t stream) { launch_scaled_early<3>(a, stream); }

// v29_qkv_attention_o_mma_handoff: v25 whose split CTAs multiply only their staged o rows and hand the rest to the
// CTAs without a split (kHandOff above), with the o loop on tensor cores in both of v17's passes (kOVecs -1 with
// kWarmRows 1). Why: at prompt 128 the launch ends when its split CTAs do, ~1.5 us after the others, because they
// read their 15 unstaged rows (120 KB at 192 KB a CTA) from HBM after the merge while the others found theirs in L2
// (their first pass); and the others' o phase runs at ~50% SM issue on FMAs and bf16 unpacking (session 22's PM
// sampling), which v5's mma loop replaces by two mma per 16-byte load a row. Measured (H200, Qwen3-8B,
// ITERATIONS.md session 23): 0.968x of v25 at prompt 128 and 0.965x at 1024 (a tile's 16 steps in flight a lane;
// 8, v5's: 0.980x / 0.977x); the mma loop alone (warm_code 64) 0.985x / 0.986x. Traced, the split CTAs end 2 us
// sooner (12.86 us after the wait against 14.81), the others 4.3 us later: they see the heads 2 us later (their
// first pass reads 23% more rows from HBM while the splits attend) and their o phase takes 5.5 us against 3.4 (a
// load instruction reads 8 rows x 64 bytes, not 512 contiguous bytes of one row). Where v25 runs v9's kernel (every
// CTA splits: none is free), v9's. Refuses what v9 refuses and a q_dim that is not a multiple of 256.
// QkvAttentionOArgs::warm_code as v17, and bit 64 keeps every CTA on its own rows (the mma loop alone).
bool qkv_attention_o_v29_supports(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  if (!qkv_attention_o_v9_supports(a) || (p.q_heads * p.head_dim) % (kWarps * 32) != 0) return false;
  const Plan plan = plan_for(a);
  return layout_of(a, plan, -1, false, kMaxForeignRows).bytes <= plan.smem_budget;
}

void launch_qkv_attention_o_v29(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, false, 1>(a, stream);
}

// v30_qkv_attention_o_handoff_rows: v29's hand-off with v17's o loop (no tensor cores), its rows dealt round-robin
// over the warps in one batch a warp (kHandOff with kOVecs 0): same dot products as v25's loop, row for row. Why:
// v29's mma loop alone measured 0.985x of v25, so the hand-off with v25's own arithmetic. Measured (H200, Qwen3-8B,
// ITERATIONS.md session 23): 0.982x / 0.989x / 0.992x of v25 at prompts 128 / 512 / 1024; the round-robin rows
// alone (warm_code 64) 0.998x / 0.996x at 128 / 1024. Traced at 128, the split CTAs end 1.2 us sooner (13.29 us
// after the wait against 14.56), the others 2.5 us later (15.72 against 13.22): they see the heads 1.8 us later
// (their first pass reads 23% more rows from HBM while the splits attend) and their o phase takes 4.1 us against
// 3.4, in proportion to the rows they read from L2. Where v25 runs v9's kernel, v9's. Refuses what v9 refuses and
// row blocks of more than kWarps * kMaxRowsAWarp rows; QkvAttentionOArgs::warm_code as v29.
bool qkv_attention_o_v30_supports(const QkvAttentionOArgs& a) {
  if (!qkv_attention_o_v9_supports(a)) return false;
  const Plan plan = plan_for(a);
  return plan.grid.rows_per_cta <= kWarps * kMaxRowsAWarp &&
         layout_of(a, plan, 0).bytes <= plan.smem_budget;
}

void launch_qkv_attention_o_v30(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, false, 2>(a, stream);
}

// v31_qkv_attention_o_handoff_late: v30's hand-off whose CTAs without a split read the rows they took over after the
// merge only (their first pass reads their own rows in those slots), and whose split CTAs hand over only their last
// QkvAttentionOArgs::handoff_rows unstaged rows (-1: all). Why: v30's split CTAs ended 1.2 us sooner, but the rows
// they gave away (2.9 MB at prompt 128) were read from HBM during the splits' chain and delayed the merged heads by
// 1.8 us (ITERATIONS.md session 23); after the merge HBM idles (session 22's PM sampling), and a free CTA takes
// ~3.5 rows more than its 32. Where v25 runs v9's kernel, v9's. Refuses what v30 refuses and handoff_rows < -1.
bool qkv_attention_o_v31_supports(const QkvAttentionOArgs& a) {
  return a.handoff_rows >= -1 && qkv_attention_o_v30_supports(a);
}

void launch_qkv_attention_o_v31(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, false, 3>(a, stream);
}

// v32_qkv_attention_o_trigger_late: v25 whose CTAs let the next launch start (PDL's launch_dependents) once every
// split is in, not at their start (kTriggerLate above). Why: with norm_mlp v18 a next MLP CTA fits on an SM beside
// an attention CTA; triggered at the start, as v25 does, its ring fills during the attention's chain, where every
// pull measured so far delayed the chain (v7, v27; ITERATIONS.md sessions 9 and 21). Triggered once the splits are
// in, the MLP's CTAs become resident and fill their rings in the stretch after the splits where HBM runs at 11-30%
// of its peak (session 22's PM sampling), the o phase. With an MLP that does not fit beside (v13-v17), only the CTAs
// on the SMs the attention leaves free (4 of 132 at Qwen3-8B's shape) start later. The same arithmetic as v25: the
// same bits. Where v25 runs v9's kernel, v9's (triggered at its start). Refuses what v25 refuses. Measured
// (ITERATIONS.md session 26): beside v18 no gain (v18 is slower there); alone, with the default MLP, 1.0034x of v25
// at prompt 128 on an H200 (its MLP CTAs on the 4 free SMs no longer fill their rings during the chain), 0.9998x /
// 0.9988x at 128 / 1024 on an H100. Diagnostic: warm_code bits 1024 / 2048 trigger later (kTriggerLate above), to
// measure what the free SMs' early MLP CTAs are worth.
bool qkv_attention_o_v32_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v25_supports(a); }

void launch_qkv_attention_o_v32(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, false, 0, true>(a, stream);
}

// v33_qkv_attention_o_counted: v25 with counter hand-offs (kCounted above; kernels/common/handoff.cuh) where
// QkvAttentionOArgs sets them: its CTAs wait for the QKV GEMV's count of CTAs done (norm_gemv v25's
// handoff_signal) in place of the PDL wait, and count themselves done for the next MLP (norm_mlp v19's handoff)
// once their rows, norm partial and zeroed delta rows are written; with neither, v25. Where v25 runs v9's kernel,
// v9's with the hand-offs. Why: the attention launch's PDL wait returned ~0.9 us after the QKV GEMV's last CTA ended,
// and the next MLP's 2.0-2.3 us after its own last CTA (ITERATIONS.md sessions 16-19), while the waiting CTAs held
// their staged rows or full rings. Refuses what v25 refuses, and a wait without producers or a negative pause.
// Measured (H100, ITERATIONS.md session 30), all three hand-offs (v19, v25, v33) against the defaults' PDL waits:
// 0.991x / 0.989x / 0.988x / 0.989x at prompts 128 / 512 / 1024 / 2048; every boundary released later than with the
// PDL wait (kernels/common/handoff.cuh).
bool qkv_attention_o_v33_supports(const QkvAttentionOArgs& a) {
  return qkv_attention_o_v25_supports(a) && (a.handoff == nullptr || a.handoff_producers > 0) &&
         a.handoff_poll_ns >= 0;
}

void launch_qkv_attention_o_v33(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (a.handoff == nullptr && a.handoff_signal == nullptr) return launch_qkv_attention_o_v25(a, stream);
  launch_scaled_early<0, false, 0, false, true>(a, stream);
}

// v34_qkv_attention_o_release_counts: v25 (v9's kernel where v25 runs it) whose splits, head merges and waits for
// the merged heads synchronize through one thread's release and acquire operations on their counts instead of every
// thread's __threadfence (kChainSync 1 above): a split's thread 0 adds its count with acq_rel semantics after the
// CTA's barrier, the merging split's thread 0 adds the head's with release semantics, and the waiting CTAs' thread 0
// reads the count with acquire loads (wait_for), each followed by a barrier. The same loads, arithmetic and stores:
// v25's bits. Why: the chain from a split's partials to the merged heads in every CTA crosses four rounds of
// __threadfence by all 256 threads (fence.sc.gpu, which orders against every other SC fence on the GPU); traced on
// an H100 at prompt 128 (ITERATIONS.md session 33), the merging split of each kv head counted itself 2.5 us after
// the head's other splits, and every CTA had the merged heads in shared memory 4.2 us after them. Refuses what v25
// refuses.
bool qkv_attention_o_v34_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v25_supports(a); }

void launch_qkv_attention_o_v34(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, false, 0, false, false, 1>(a, stream);
}

// v35_qkv_attention_o_tagged_merge: v34 whose splits hand their partials to the head's merge, and the merge its
// merged head to every CTA, in tagged words (kChainSync 2 above; kernels/common/tagged_words.cuh): no fence and no
// count on the splits' side, and a fixed merging split, the head's last (it owns the new key, so it tends to finish
// last, and it keeps its own partial in shared memory), that polls the others' words instead of learning from an
// atomic's return that it is last. The merged head's count stays (relaxed), so the waiting CTAs poll one word and
// then read the heads, polling only words that have not landed. The same merge arithmetic: v34's bits. Why: traced on
// an H100 at prompt 128 (ITERATIONS.md session 34), v34's merging split took 2.8 us from its attention's end to its
// head counted (its partial written, its count's round trip, the partials' loads, its head written and counted),
// while its attention ended within 0.2 us of its head's other splits'. Refuses what v34 refuses, and GQA groups over
// 8 q heads or attention outputs over 8192 values.
// PRECOND: no tagged word of the workspace carries the tag the next launch will poll for (the launch count it left
// plus one) before that launch writes it: the engine zeroes the whole workspace once (count 0, every tag 0); the
// kernel tests fill what follows the counters with 0xFF before each launch (count 0xFFFFFFFF: tag 0, every word's
// 0xFFFFFFFF).
bool qkv_attention_o_v35_supports(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  return qkv_attention_o_v34_supports(a) && p.q_heads / p.kv_heads <= kWarps && p.q_heads * p.head_dim <= 8192;
}

void launch_qkv_attention_o_v35(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, false, 0, false, false, 2>(a, stream);
}

// v36_qkv_attention_o_merge_at_once: v34 whose head merge has the values of up to eight splits in flight with their
// statistics (kChainSync 3 above: merge_heads' early loads, eight splits a group): one L2 round trip for a head of
// up to eight splits, where v25 and v34 take one for the statistics and one for each four splits' values after them
// (three at six splits, prompt 128's). The same arithmetic: v25's bits. Why: traced on an H100 (ITERATIONS.md
// session 34), v34's merging split takes 2.9 us from its attention's end to its head counted, mostly L2 round trips
// one after another; v35's tagged words showed that cheaper ordering does not shorten it. Measured slower than v34
// past 1536 keys (session 36: its o loop, not its merge; v40 below). Refuses what v34 refuses.
bool qkv_attention_o_v36_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v34_supports(a); }

void launch_qkv_attention_o_v36(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_scaled_early<0, false, 0, false, false, 3>(a, stream);
}

namespace {

// Whether every position of the launch takes at most eight splits (kClusterCtas splits of kScaledSplitsMaxKeys keys:
// up to 1536 keys), where v37-v39 run their cluster merge and v40 runs v36.
bool at_most_eight_splits(const QkvAttentionOArgs& a) {
  return a.attention.max_position + 1 <= int64_t(kClusterCtas) * kScaledSplitsMaxKeys;
}

}  // namespace

// v40_qkv_attention_o_merge_at_once_short: v36 where every position of the launch takes at most eight splits (up
// to kClusterCtas splits of kScaledSplitsMaxKeys keys: 1536), v34 past them. Why: measured on one H100 (ITERATIONS.md
// session 36), v36 against v34 is 1.0006x / 1.0032x / 1.0024x at prompts 128 / 512 / 1024, then 0.998x / 0.994x /
// 0.989x at 2048 / 4096 / 8192; with every kernel loaded at start (CUDA_MODULE_LOADING=EAGER, one code placement
// for both) 1.000x at 2048 and 0.993x / 0.994x at 4096 / 8192. Traced at 8192, v36's o phase after the merge takes
// 6.0 us where v34's takes 4.5: the eight-split merge's ~280 more instructions change the register allocation of
// the whole kernel (neither spills; the SASS differs throughout), and its o loop is the slower for it. Up to eight
// splits the single round trip is worth more. The same bits as v34 and v36. Refuses what v34 refuses.
bool qkv_attention_o_v40_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v34_supports(a); }

void launch_qkv_attention_o_v40(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (!at_most_eight_splits(a)) return launch_qkv_attention_o_v34(a, stream);
  launch_qkv_attention_o_v36(a, stream);
}

// v42_qkv_attention_o_trigger_late_short: v40 whose CTAs let the next launch start once every split is in, not at
// their start (v32's trigger, kTriggerLate above, on v36's kernel up to 1536 keys and v34's past them). The same
// arithmetic as v40: v34's bits. Why: v32's late trigger was the one gain measured on an H200 in session 26 (1.0034x
// of v25 at prompt 128: the next MLP's CTAs on the 4 SMs the attention leaves free no longer fill their rings during
// the chain), and within noise on H100s (0.9998x / 0.9988x at 128 / 1024); it was never measured on top of v34's
// release / acquire chain, nor on an H200 past prompt 128. Measured (ITERATIONS.md session 37, one H100): 1.0032x /
// 1.0047x / 1.0047x / 1.0005x of v40 at prompts 128 / 512 / 1024 / 8192, 1.0011x / 1.0027x at 128 / 1024 with
// every kernel loaded at start; the default since. Refuses what v34 refuses.
bool qkv_attention_o_v42_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v34_supports(a); }

void launch_qkv_attention_o_v42(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (!at_most_eight_splits(a)) return launch_scaled_early<0, false, 0, true, false, 1>(a, stream);
  launch_scaled_early<0, false, 0, true, false, 3>(a, stream);
}

// v43_qkv_attention_o_residual_in_prepare: v42 whose CTAs with a split read their residual rows (and their delta, as
// v42 does) by their last warp inside the attention's prepare step, after their K/V tile loads are issued, instead of
// by warp 0 right after the PDL wait (kSplitPrep bit 1 above); the CTAs without a split read theirs as before. Why:
// SASS of v42 (session 38) has warp 0 stall on that L2 round trip before it starts its share of the prepare step, so
// a split's q is ready two round trips after the wait instead of one; the last warp prepares nothing at Qwen3-8B's
// GQA group (4 q heads, the new key and value: 6 of 8 warps). The same loads, sums and stores: v34's bits. Refuses
// what v34 refuses.
bool qkv_attention_o_v43_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v34_supports(a); }

void launch_qkv_attention_o_v43(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (!at_most_eight_splits(a)) return launch_scaled_early<0, false, 0, true, false, 1, kPrepResidual>(a, stream);
  launch_scaled_early<0, false, 0, true, false, 3, kPrepResidual>(a, stream);
}

namespace {

// Where the launch's plan gives its splits a K/V ring of two tiles (splits of at most two tiles: up to 768 keys at
// the default 64 keys a split, under kScaledSplits' rule past 384), as launch_scaled_early plans it.
bool two_tile_ring(const QkvAttentionOArgs& a) { return plan_for(a, false, false, scaled_splits(a)).stages == 2; }

}  // namespace

// v44_qkv_attention_o_residual_in_prepare_short: v43 where the launch's splits take a ring of two K/V tiles (the
// graph bucket of 512 positions at Qwen3-8B's shape: prompt 128 with 256 tokens generated), v42 elsewhere. Why:
// measured on one H100 (ITERATIONS.md session 38), v43 against v42 is 1.0023x at prompt 128 (lazy loading; 1.0020x
// and 1.0038x eager in a second call), 0.9991x at 512 and 1024 and 0.9895x at 8192 (0.990x eager): with more tiles
// a split, its last warp's residual loads go out behind the ring's K/V loads instead of before them. Bits as v42's.
// Refuses what v34 refuses.
bool qkv_attention_o_v44_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v34_supports(a); }

void launch_qkv_attention_o_v44(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (two_tile_ring(a)) return launch_qkv_attention_o_v43(a, stream);
  launch_qkv_attention_o_v42(a, stream);
}

namespace {

// v44's kernels with kSplitPrep's bits kPrep added: v43's residual read where the splits take a ring of two tiles,
// v36's merge up to eight splits (1536 keys) and v34's past them, v32's late trigger. Past 1536 keys kPrepPast in
// place of kPrep, without the residual read: there the plan's ring is deeper than two tiles, so v44 runs v42's
// kernel too, except under `--attention-o-stages 2` (a two-tile ring forced; v44 then runs v43's residual read,
// these versions do not).
template <int kPrep, int kPrepPast>
void launch_v44_prep(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (!at_most_eight_splits(a)) return launch_scaled_early<0, false, 0, true, false, 1, kPrepPast>(a, stream);
  if (two_tile_ring(a)) return launch_scaled_early<0, false, 0, true, false, 3, kPrep | kPrepResidual>(a, stream);
  launch_scaled_early<0, false, 0, true, false, 3, kPrep>(a, stream);
}

}  // namespace

// v45_qkv_attention_o_tiles_at_once: v44 whose splits have every K and V tile in flight before the attention's
// prepare step where they all fit the K/V ring (kSplitPrep bit 2, attend_keys' kAtOnce), up to 1536 keys; v42 past
// them. Why: the ring is two tiles deep where a split takes at most two tiles (plan_for), and attend_keys issued
// kStages - 1 tiles ahead, so a split of 64 keys or fewer (prompt 128 at Qwen3-8B's shape: 3-6 splits of up to 64
// keys a kv head) issued its V tile only once its K tile was in: two memory round trips one after the other on the
// chain every CTA's o phase waits for. At prompt 512 (a ring of four, splits of two K and two V tiles) the fourth
// tile waited for the first. The same loads into the same slots, the same arithmetic: v34's bits. Refuses what v34
// refuses.
bool qkv_attention_o_v45_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v34_supports(a); }

void launch_qkv_attention_o_v45(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_v44_prep<kPrepTilesAtOnce, 0>(a, stream);
}

// v46_qkv_attention_o_tiles_early: v45 whose CTAs issue the K/V tiles their split starts with before the PDL wait,
// for the position and slot read at their start, ahead of their staged o rows' bulk copies (kSplitPrep bit 4), at
// every context (past 1536 keys on v34's kernel, its first three tiles). Why: the cached rows a split reads are
// written by earlier steps, and a CTA is resident ~4 us before its wait (session 37's trace), while the chain after
// the wait began with those loads' round trip. After the wait the split checks the position and slot; if they moved
// (an eager step), the copies land and the tiles are issued again. v34's bits. Refuses what v34 refuses.
bool qkv_attention_o_v46_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v34_supports(a); }

void launch_qkv_attention_o_v46(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_v44_prep<kPrepTilesAtOnce | kPrepTilesEarly, kPrepTilesAtOnce | kPrepTilesEarly>(a, stream);
}

// v37_qkv_attention_o_cluster_merge: v34 whose grid is in thread-block clusters of 8 CTAs, cluster c holding kv head
// c's splits (kChainSync 4 above): a split leaves its partial in its own shared memory and arrives on the cluster
// barrier, and the head's first split waits on it and merges the head from the cluster's shared memory, then counts
// it as v34 does. The merge's path has no L2 round trip: v34's merging split writes its partial, adds the head's
// count (a round trip), then loads the statistics and the values (two more at prompt 128's up to six splits). The
// same weights and sums: v34's attention output, bit for bit. What it costs: the grid is what the GPU holds at once
// in clusters of 8 (cudaOccupancyMaxActiveClusters: 15 on an H100 or H200, one GPC too small for two), so 120 CTAs
// of 35 o rows (118 with rows) where v34 has 128 of 32, and at most 8 splits a kv head. Where a launch's positions
// pass 8 splits of kScaledSplitsMaxKeys keys (1536 keys), or the GPU cannot hold a cluster a kv head, v34. Why:
// traced on an H100 (ITERATIONS.md session 34), v34's merging split counts its head 2.8 us after its attention's
// end, L2 round trips one after another, on the chain that every CTA's o phase waits for. Refuses what v34 refuses
// and GQA groups over 8 q heads (a warp weighs a q head's splits).
bool qkv_attention_o_v37_supports(const QkvAttentionOArgs& a) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  return qkv_attention_o_v34_supports(a) && p.q_heads / p.kv_heads <= kWarps;
}

namespace {

// v37-v39: the cluster merge (with v32's late trigger, with kHandOffMode's o loop) where the launch's positions stay
// within kClusterCtas splits of kScaledSplitsMaxKeys keys; v34 past them.
template <bool kTriggerLate, int kHandOffMode>
void launch_cluster_merge(const QkvAttentionOArgs& a, cudaStream_t stream) {
  if (!at_most_eight_splits(a)) return launch_qkv_attention_o_v34(a, stream);
  launch_scaled_early<0, false, kHandOffMode, kTriggerLate, false, 4>(a, stream);
}

}  // namespace

void launch_qkv_attention_o_v37(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_cluster_merge<false, 0>(a, stream);
}

// v38_qkv_attention_o_cluster_trigger_late: v37 whose CTAs let the next launch start once every split is in (v32's
// kTriggerLate), not at their start. Why: v37's grid leaves 12 SMs of 132 free (v34's 4), and the next MLP's CTAs
// that take them at once fill their rings during the attention's chain, the pull that v7, v27 and v32 found delays
// it. The same arithmetic as v37. Where v37 runs v34's kernel, v34's. Refuses what v37 refuses.
bool qkv_attention_o_v38_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v37_supports(a); }

void launch_qkv_attention_o_v38(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_cluster_merge<true, 0>(a, stream);
}

// v39_qkv_attention_o_cluster_rows: v38 whose o loop deals a CTA's rows round-robin over its warps in one batch
// (kHandOff 3 above: v30's loop without its hand-off). Why: traced on an H100 (ITERATIONS.md session 35), v37's and
// v38's o phase ran 2.3 us (CTAs without a split) and 4.8 us (split CTAs) longer than v34's: 35 rows a CTA take a
// second round of v17's loop (kRowsAtOnce rows a warp, 8 warps: 32 rows a round) for their last 3 rows, unstaged
// ones, from HBM after the merge. Where v37 runs v34's kernel, v34's (with this loop where the GPU cannot hold a
// cluster a kv head). Refuses what v37 refuses.
bool qkv_attention_o_v39_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v37_supports(a); }

void launch_qkv_attention_o_v39(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_cluster_merge<true, 4>(a, stream);
}

// v24_qkv_attention_o_reverse_splits: v9 whose splits are laid on the CTAs in reverse order (kReverseSplits above),
// the new key's split on the CTAs resident first. Refuses what v9 refuses.
bool qkv_attention_o_v24_supports(const QkvAttentionOArgs& a) { return qkv_attention_o_v9_supports(a); }

void launch_qkv_attention_o_v24(const QkvAttentionOArgs& a, cudaStream_t stream) {
  launch_version<true, false, 0, false, false, true, 0, false, 0, 0, false, 0, 4, false, false, true>(a, stream);
}

}  // namespace qwen3::kernels
