// The tensor-core attention over one CTA's keys, shared by v2_qkv_attention_mma (and its v3-v12 variants) and
// v1_qkv_attention_o: for the GQA group of one kv head, S = Q Kᵀ and O = P V with mma.sync m16n8k16 over K/V tiles
// streamed through a cp.async ring, leaving the CTA's unnormalized output and softmax statistics in shared memory
// for whichever merge the caller runs. The layout and the reasons for it are in v2_qkv_attention_mma.cu's header.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::attention_mma {

constexpr int kTileKeys = 64;  // one n-tile of 8 keys per warp in q·Kᵀ
constexpr int kMaxGroup = 8;   // q heads per kv head: rows 0..7 of the m16n8k16 A operand

// ldmatrix .trans, two 8x8 b16 matrices: lanes 0-15 give the row addresses (rows of matrix i/8).
[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* smem_row_ptr) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}

// Element offset of (key, chunk) in a swizzled (kTileKeys, kHeadDim) tile: 16-byte chunk c of key k at c ^ (k%8).
template <int kHeadDim>
__device__ __forceinline__ int swizzled(int key, int chunk) {
  return key * kHeadDim + ((chunk ^ (key & 7)) * 8);
}

// Bytes of the shared-memory pieces below, for callers laying out their own dynamic shared memory.
template <int kHeadDim>
constexpr size_t tile_bytes() { return size_t(kTileKeys) * kHeadDim * 2; }
constexpr int p_stride(int keys_cap) { return keys_cap + 8; }  // bf16 P rows, padded so 8 rows hit disjoint banks

// The caller's shared memory for one CTA's keys.
struct Smem {
  bf16* ring;       // kStages x (kTileKeys, kHeadDim) bf16, swizzled
  bf16* q_s;        // (group, kHeadDim) bf16: QK-normed, RoPE'd q, written by the caller's prepare()
  bf16* new_kv;     // (2, kHeadDim) bf16: the new key and value (prepare(), where this CTA owns the new key)
  float* partial;   // (group, kHeadDim): on return, the unnormalized output
  float* stat_max;  // (group): on return, the max score per q head (-FLT_MAX for a CTA without keys)
  float* stat_sum;  // (group): on return, Σ bf16(exp(score - max)) per q head
  float* scores;    // (group, keys_cap) scratch
  bf16* p_s;        // (group, p_stride(keys_cap)) scratch
};

// The steps attend_keys and attend_claimed_keys share. Every thread of the CTA (kThreads of them) calls each; warp
// and lane coordinates come from threadIdx.x (gid = lane / 4, tig = lane % 4: the mma fragment's).

// Q as the A operand of every q·Kᵀ step: row gid = q head gid (zero past the group), rows 8-15 zero.
template <int kHeadDim>
__device__ __forceinline__ void load_q_fragments(const Smem& sm, int group, uint32_t (&q_frag)[kHeadDim / 16][2]) {
  const int lane = threadIdx.x % kWarpSize, gid = lane / 4, tig = lane % 4;
#pragma unroll
  for (int s = 0; s < kHeadDim / 16; ++s) {
    const bool valid = gid < group;
    q_frag[s][0] = valid ? *reinterpret_cast<const uint32_t*>(sm.q_s + gid * kHeadDim + 16 * s + tig * 2) : 0u;
    q_frag[s][1] = valid ? *reinterpret_cast<const uint32_t*>(sm.q_s + gid * kHeadDim + 16 * s + 8 + tig * 2) : 0u;
  }
}

// The new key's row of K (is_v false) or V from sm.new_kv into row `key` of a swizzled tile, then a barrier.
template <int kHeadDim, int kThreads>
__device__ __forceinline__ void put_new_row(const Smem& sm, bf16* tile, int key, bool is_v) {
  for (int piece = threadIdx.x; piece < kHeadDim / 8; piece += kThreads)
    *reinterpret_cast<uint4*>(tile + swizzled<kHeadDim>(key, piece)) =
        *reinterpret_cast<const uint4*>(sm.new_kv + (is_v ? kHeadDim : 0) + piece * 8);
  __syncthreads();
}

// S for this warp's 8 keys of a K tile (8 rows x 8 keys x head_dim), unscaled, into s_acc (zero on entry) over
// kChains accumulator chains and summed into chain 0: s_acc[0][0..1] = (q head gid, keys warp * 8 + 2 tig, + 1).
template <int kHeadDim, int kChains>
__device__ __forceinline__ void score_tile(const bf16* tile, const uint32_t (&q_frag)[kHeadDim / 16][2], int warp,
                                           int lane, float (&s_acc)[kChains][4]) {
  const int row = warp * 8 + lane % 8;  // the key whose row address this lane gives ldmatrix
#pragma unroll
  for (int s = 0; s < kHeadDim / 16; s += 2) {
    uint32_t b[4];  // chunks 2s, 2s+1 (step s) and 2s+2, 2s+3 (step s+1) of the 8 keys
    ldmatrix_x4(b, tile + swizzled<kHeadDim>(row, 2 * s + lane / 8));
    const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
    const uint32_t a0[4] = {q_frag[s][0], 0u, q_frag[s][1], 0u};
    const uint32_t a1[4] = {q_frag[s + 1][0], 0u, q_frag[s + 1][1], 0u};
    mma_bf16_16816(s_acc[0], a0, b0);
    mma_bf16_16816(s_acc[kChains - 1], a1, b1);
  }
  if constexpr (kChains == 2)
#pragma unroll
    for (int e = 0; e < 4; ++e) s_acc[0][e] += s_acc[1][e];
}

// P = bf16(exp(s - max)) per q head over keys [0, valid_keys) of sm.scores and 0 over [valid_keys, padded_keys);
// the max and Σ P of each head into sm.stat_max / sm.stat_sum; then a barrier.
template <int kThreads>
__device__ __forceinline__ void scores_to_p(const Smem& sm, int group, int keys_cap, int p_row, int valid_keys,
                                            int padded_keys) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  for (int g = warp; g < group; g += kThreads / kWarpSize) {
    float m = -FLT_MAX;
    for (int key = lane; key < valid_keys; key += kWarpSize) m = fmaxf(m, sm.scores[g * keys_cap + key]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int key = lane; key < padded_keys; key += kWarpSize) {
      const bf16 e = __float2bfloat16_rn(key < valid_keys ? expf(sm.scores[g * keys_cap + key] - m) : 0.0f);
      sm.p_s[g * p_row + key] = e;
      sum += __bfloat162float(e);
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      sm.stat_max[g] = m;
      sm.stat_sum[g] = sum;
    }
  }
  __syncthreads();
}

// O += P V for a V tile holding keys [first, first + kTileKeys) of this CTA's P: this warp's kDimTiles n-tiles
// (8 output columns each), 16 keys a step, step j into chain j % kChains.
template <int kHeadDim, int kThreads, int kChains>
__device__ __forceinline__ void accumulate_pv(const Smem& sm, const bf16* tile, int first, int p_row, int group,
                                              float (&o_acc)[kChains][kHeadDim / 8 / (kThreads / kWarpSize)][4]) {
  constexpr int kDimTiles = kHeadDim / 8 / (kThreads / kWarpSize);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int gid = lane / 4, tig = lane % 4;
#pragma unroll
  for (int j = 0; j < kTileKeys / 16; ++j) {  // 16 keys per step
    const int kb = first + 16 * j;
    const bool valid = gid < group;
    const uint32_t pa[4] = {
        valid ? *reinterpret_cast<const uint32_t*>(sm.p_s + gid * p_row + kb + tig * 2) : 0u, 0u,
        valid ? *reinterpret_cast<const uint32_t*>(sm.p_s + gid * p_row + kb + 8 + tig * 2) : 0u, 0u};
    const int key = 16 * j + lane % 16;  // lanes 0-15: rows of the two 8x8 matrices (keys +0..7, +8..15)
#pragma unroll
    for (int t = 0; t < kDimTiles; ++t) {
      uint32_t b[2];
      ldmatrix_x2_trans(b, tile + swizzled<kHeadDim>(key, warp * kDimTiles + t));
      mma_bf16_16816(o_acc[j % kChains][t], pa, b);
    }
  }
}

// The chains summed, and this CTA's unnormalized output into sm.partial: o_acc[0][t][0..1] = (q head gid, columns
// 8 * (warp * kDimTiles + t) + 2 tig, + 1).
template <int kHeadDim, int kThreads, int kChains>
__device__ __forceinline__ void store_partial(const Smem& sm, int group,
                                              float (&o_acc)[kChains][kHeadDim / 8 / (kThreads / kWarpSize)][4]) {
  constexpr int kDimTiles = kHeadDim / 8 / (kThreads / kWarpSize);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int gid = lane / 4, tig = lane % 4;
  if constexpr (kChains == 2)
#pragma unroll
    for (int t = 0; t < kDimTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[0][t][e] += o_acc[1][t][e];
  if (gid < group)
#pragma unroll
    for (int t = 0; t < kDimTiles; ++t) {
      const int col = 8 * (warp * kDimTiles + t) + tig * 2;
      sm.partial[gid * kHeadDim + col] = o_acc[0][t][0];
      sm.partial[gid * kHeadDim + col + 1] = o_acc[0][t][1];
    }
}

// One split's K tiles then V tiles, i in [0, 2 * tiles): issue(i) copies tile i into ring slot i % kStages,
// swizzled, and commits one cp.async group (an empty one past the last tile). Local key new_key (if >= 0) is not
// read: its row is zero-filled here and put in by attend_keys from sm.new_kv. kLean: each thread's load offsets
// computed once (v10), chunk `piece` of keys key_base + j * kKeyStep (kKeyStep % 8 == 0: the same swizzle).
// issue_ahead: what attend_keys issues before its prepare step, kStages - 1 tiles, or with at_once (v45) every tile
// where they all fit the ring, then empty groups up to kStages (so that every loop step waits on the same count).
// PRECOND: blockDim.x == kThreads; every thread of the CTA issues the same i in the same order.
template <int kHeadDim, int kThreads, int kStages, bool kLean>
struct TileLoads {
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per K/V row
  static constexpr int kTileElems = kTileKeys * kHeadDim;
  static constexpr int kKeyStep = kThreads / kChunks, kLoadsPerThread = kTileKeys / kKeyStep;
  static_assert(kThreads % kChunks == 0 && kKeyStep % 8 == 0 && kTileKeys % kKeyStep == 0, "lean tile loads");
  bf16* ring;
  const bf16* k_rows;
  const bf16* v_rows;
  int64_t row_stride;
  int n_keys, new_key, tiles, key_base, smem_base;
  int64_t gmem_base;

  __device__ __forceinline__ TileLoads(bf16* ring_, const bf16* k_rows_, const bf16* v_rows_, int64_t row_stride_,
                                       int n_keys_, int new_key_)
      : ring(ring_), k_rows(k_rows_), v_rows(v_rows_), row_stride(row_stride_), n_keys(n_keys_), new_key(new_key_),
        tiles((n_keys_ + kTileKeys - 1) / kTileKeys), key_base(thread_key()),
        smem_base(swizzled<kHeadDim>(thread_key(), thread_piece())),
        gmem_base(int64_t(thread_key()) * row_stride_ + thread_piece() * 8) {}
  // This thread's chunk and first key (unsigned arithmetic on threadIdx.x, as the kernels before TileLoads had it).
  static __device__ __forceinline__ int thread_piece() { return threadIdx.x % kChunks; }
  static __device__ __forceinline__ int thread_key() { return threadIdx.x / kChunks; }

  // Whether every K and V tile fits the ring at once.
  __device__ __forceinline__ bool fit_ring() const { return 2 * tiles <= kStages; }

  __device__ __forceinline__ void issue(int i) const {
    if (i < 2 * tiles) {
      const bool is_v = i >= tiles;
      const int first = (is_v ? i - tiles : i) * kTileKeys;
      const bf16* src = (is_v ? v_rows : k_rows) + int64_t(first) * row_stride;  // (also the dummy of skipped loads)
      bf16* dst = ring + (i % kStages) * kTileElems;
      if constexpr (kLean) {
        const int end = n_keys - first - key_base, skip = new_key - first - key_base;  // in this thread's keys
#pragma unroll
        for (int j = 0; j < kLoadsPerThread; ++j) {
          const bool load = j * kKeyStep < end && j * kKeyStep != skip;
          cp_async_16B_zfill(dst + smem_base + j * kKeyStep * kHeadDim,
                             load ? src + gmem_base + int64_t(j * kKeyStep) * row_stride : src, load ? 16 : 0);
        }
      } else {
        for (int c = threadIdx.x; c < kTileKeys * kChunks; c += kThreads) {
          const int key = c / kChunks, piece = c % kChunks;
          const bool load = first + key < n_keys && first + key != new_key;
          cp_async_16B_zfill(dst + swizzled<kHeadDim>(key, piece),
                             load ? src + int64_t(key) * row_stride + piece * 8 : src, load ? 16 : 0);
        }
      }
    }
    cp_async_commit();
  }

  // Whether issue_ahead(at_once) issues every tile (kStages in flight ahead of the first consumed, not kStages - 1).
  __device__ __forceinline__ bool all_ahead(bool at_once) const { return at_once && fit_ring(); }
  __device__ __forceinline__ void issue_ahead(bool at_once) const {
    if (all_ahead(at_once)) {
#pragma unroll
      for (int i = 0; i < kStages; ++i) issue(i);
    } else {
#pragma unroll
      for (int i = 0; i < kStages - 1; ++i) issue(i);
    }
  }
};

// Keys [0, n_keys) of k_rows / v_rows (row_stride elements apart; local key new_key, if >= 0, is taken from
// sm.new_kv instead of memory) against the group's q heads. `prepare()` runs after the first kStages - 1 tiles are
// issued and must leave sm.q_s (and sm.new_kv for the owner) written; a barrier follows it. The next kernel's launch
// is triggered once a fraction pdl_trigger of the tiles is consumed (pdl_trigger <= 0: never here; the caller did).
// kLean: each thread's tile-load offsets computed once (v10); kChains: accumulator chains per product (v8).
// kAtOnce (v45): where every K and V tile fits the ring, all are issued before prepare(), not kStages - 1 (with a
// split of one K tile and one V tile in a ring of two, its V tile otherwise goes out only once its K tile is in: two
// memory round trips one after the other). issued (v46): the caller has issued them already, with TileLoads'
// issue_ahead(kAtOnce) on the same arguments and sm.ring, and committed nothing since.
// PRECOND: blockDim.x == kThreads; group <= kMaxGroup; n_keys <= keys_cap, keys_cap a multiple of kTileKeys; every
// thread calls it; cp.async groups committed by the caller before the call are complete or harmless to wait on.
template <int kHeadDim, int kThreads, int kStages, int kChains, bool kLean, bool kAtOnce = false, class Prepare>
__device__ __forceinline__ void attend_keys(const Smem& sm, const bf16* k_rows, const bf16* v_rows,
                                            int64_t row_stride, int n_keys, int new_key, int group, int keys_cap,
                                            float scale, float pdl_trigger, Prepare&& prepare, bool issued = false) {
  constexpr int kWarps = kThreads / kWarpSize;
  constexpr int kChunks = kHeadDim / 8;             // 16-byte chunks per K/V row
  constexpr int kKSteps = kHeadDim / 16;            // q·Kᵀ reduction steps
  constexpr int kDimTiles = kHeadDim / 8 / kWarps;  // P·V n-tiles (8 output columns) per warp: 2 or 1
  constexpr int kTileElems = kTileKeys * kHeadDim;
  static_assert(kDimTiles >= 1 && kChunks % 4 == 0, "head_dim 64 or 128");
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int gid = lane / 4, tig = lane % 4;  // mma fragment coordinates
  const int p_row = p_stride(keys_cap);  // bf16 elements between P rows

  const TileLoads<kHeadDim, kThreads, kStages, kLean> loads(sm.ring, k_rows, v_rows, row_stride, n_keys, new_key);
  const int tiles = loads.tiles;  // K tiles, then as many V tiles
  // The tiles in flight ahead of the one a loop step consumes: kStages - 1, or kStages where all were issued at once.
  const bool at_once = loads.all_ahead(kAtOnce);
  if (!issued) loads.issue_ahead(kAtOnce);

  prepare();
  if (n_keys == 0 && threadIdx.x < group) {  // an empty CTA (tiny context): weight 0 in the merge
    sm.stat_max[threadIdx.x] = -FLT_MAX;
    sm.stat_sum[threadIdx.x] = 0.0f;
  }
  __syncthreads();

  uint32_t q_frag[kKSteps][2];
  load_q_fragments<kHeadDim>(sm, group, q_frag);
  static_assert(kChains == 1 || kChains == 2, "one or two accumulator chains");
  float o_acc[kChains][kDimTiles][4] = {};  // (q head gid, columns of this warp's n-tiles), per chain

  const int trigger_tile = pdl_trigger > 0.0f ? int(pdl_trigger * float(2 * tiles)) : -1;
  for (int i = 0; i < 2 * tiles; ++i) {
    if (i == trigger_tile) pdl_launch_dependents();
    if (at_once)
      cp_async_wait<kStages - 1>();
    else
      cp_async_wait<kStages - 2>();
    __syncthreads();  // tile i is in for every thread, and every thread is done with tile i - 1's slot
    loads.issue(i + (at_once ? kStages : kStages - 1));  // (past the last tile: an empty group)
    bf16* tile = sm.ring + (i % kStages) * kTileElems;
    const bool is_v = i >= tiles;
    const int first = (is_v ? i - tiles : i) * kTileKeys;
    if (new_key >= first && new_key < first + kTileKeys)  // the new row goes into its tile (CTA-uniform)
      put_new_row<kHeadDim, kThreads>(sm, tile, new_key - first, is_v);
    if (!is_v) {  // S[g][key] for this warp's 8 keys
      float s_acc[kChains][4] = {};
      score_tile<kHeadDim, kChains>(tile, q_frag, warp, lane, s_acc);
      const int local = first + warp * 8 + tig * 2;  // s_acc[0][0..1]: q head gid, keys local, local + 1
      if (gid < group) {
        if (local < n_keys) sm.scores[gid * keys_cap + local] = s_acc[0][0] * scale;
        if (local + 1 < n_keys) sm.scores[gid * keys_cap + local + 1] = s_acc[0][1] * scale;
      }
    } else {
      if (i == tiles)  // every score is in (the barrier above)
        scores_to_p<kThreads>(sm, group, keys_cap, p_row, n_keys, tiles * kTileKeys);
      accumulate_pv<kHeadDim, kThreads, kChains>(sm, tile, first, p_row, group, o_acc);
    }
  }

  if (pdl_trigger > 0.0f) pdl_launch_dependents();  // (a no-op where the loop did)
  store_partial<kHeadDim, kThreads, kChains>(sm, group, o_acc);
  cp_async_wait<0>();  // only empty commit groups are left; none may be outstanding at exit
}

// Where attend_claimed_keys' tiles come from: a kv head's keys in tiles of kTileKeys, [0, tiles), the last one
// (with the new key) belonging to the head's last split (the owner). Split s of `splits` first takes the static
// tiles [s A, s A + A) (A = static_tiles, at least kStages - 1: the ones its ring issues before any claim can come
// back); the tiles [splits A, tiles - 1) are claimed one at a time from the head's counter by whichever split is
// ready first; the owner takes the last tile after its claims run out. Used where every split has its A static
// tiles (claims_apply); with fewer keys the caller runs attend_keys over static ranges.
struct ClaimedTiles {
  int tiles;         // ceil(keys / kTileKeys)
  int pool_end;      // tiles - 1: the tiles anyone may take end here
  int dynamic_first;  // splits * A: the first claimed tile
  int static_first;  // s * A
  int static_count;  // this split's static tiles: clamp(pool_end - s A, 0, A)
  bool owner;        // the last split
  int last_keys;     // keys in the last tile
};

__device__ __forceinline__ bool claims_apply(int keys, int splits, int static_tiles) {
  return (keys + kTileKeys - 1) / kTileKeys - 1 >= splits * static_tiles;
}

__device__ __forceinline__ ClaimedTiles claimed_tiles(int keys, int split, int splits, int static_tiles) {
  ClaimedTiles t;
  t.tiles = (keys + kTileKeys - 1) / kTileKeys;
  t.pool_end = t.tiles - 1;
  t.dynamic_first = splits * static_tiles;
  t.static_first = split * static_tiles;
  t.static_count = max(0, min(static_tiles, t.pool_end - t.static_first));
  t.owner = split == splits - 1;
  t.last_keys = keys - t.pool_end * kTileKeys;
  return t;
}

// attend_keys over tiles the CTAs of a kv head share out while they run (qkv_attention_o v10): a CTA's static
// tiles, then tiles claimed from *claims (the head's counter, zero at the launch's start; the caller resets it once
// every split of the head is done), then the owner's last tile (ClaimedTiles). A CTA whose K/V rows arrive slower
// claims fewer tiles, so the head's splits end closer together (at context 8192 ~8 of the 128 splits a layer ran
// ~2.8 us behind the others, and the merge waited for them: ITERATIONS.md session 12). Each CTA's result is the
// softmax-weighted partial over the keys it took, in shared memory as attend_keys leaves it; the caller's merge
// weighs the splits as before. Thread 0 keeps kClaimsAhead claims in flight, so a claim's round trip is hidden
// behind that many tiles (in registers: a claim's result is read only when its slot is resolved); slot_tile
// (shared, keys_cap / kTileKeys ints) maps a CTA's slots to the tiles they hold.
// keys: the head's keys (the position + 1); k_rows / v_rows: its key 0; position: the new key (from sm.new_kv,
// prepared by the owner; never read from the cache). PRECOND: as attend_keys; static_tiles >= kStages - 1;
// claims_apply(keys, splits, static_tiles); keys_cap / kTileKeys > static_tiles and splits x (keys_cap / kTileKeys)
// >= the head's tiles; the same kStages and static_tiles in every split of the head.
template <int kHeadDim, int kThreads, int kStages, int kClaimsAhead, class Prepare>
__device__ __forceinline__ void attend_claimed_keys(const Smem& sm, int* slot_tile, const bf16* k_rows,
                                                    const bf16* v_rows, int64_t row_stride, int keys, int position,
                                                    int split, int splits, int static_tiles, int group, int keys_cap,
                                                    float scale, uint32_t* claims, Prepare&& prepare) {
  constexpr int kWarps = kThreads / kWarpSize;
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kKSteps = kHeadDim / 16;
  constexpr int kDimTiles = kHeadDim / 8 / kWarps;
  constexpr int kTileElems = kTileKeys * kHeadDim;
  constexpr int kChains = 2;
  constexpr int kIssueAhead = kStages - 1;
  constexpr int kNone = -1;  // a slot with no tile: the K phase ended before it
  static_assert(kDimTiles >= 1 && kChunks % 4 == 0, "head_dim 64 or 128");
  static_assert(kClaimsAhead >= 1, "a claim in flight at least");
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int gid = lane / 4, tig = lane % 4;
  const int p_row = p_stride(keys_cap);
  const int cap = keys_cap / kTileKeys;
  const ClaimedTiles ct = claimed_tiles(keys, split, splits, static_tiles);
  __shared__ int k_slots;  // the CTA's K slots, written by thread 0 once known (kNone before)

  constexpr int kKeyStep = kThreads / kChunks, kLoadsPerThread = kTileKeys / kKeyStep;
  static_assert(kThreads % kChunks == 0 && kKeyStep % 8 == 0 && kTileKeys % kKeyStep == 0, "lean tile loads");
  const int piece = threadIdx.x % kChunks, key_base = threadIdx.x / kChunks;
  const int smem_base = swizzled<kHeadDim>(key_base, piece);
  const int64_t gmem_base = int64_t(key_base) * row_stride + piece * 8;

  // The slots every thread knows without a claim: the static ones, and if they are all there is (the static range
  // clipped, or nothing left to claim) the owner's last tile right after them. known_slots: -1 while claims decide.
  // (claims_apply: every split has its static_tiles.) Not written as static_count == static_tiles: ptxas of CUDA
  // 13.0 compiled that test of max(0, min(1, x)) to the predicate output of a VIMNMX.RELU, which reads "x was in
  // [0, 1]", not "the clamp is 1", on the H200 (profiles/ptxas-vimnmx-relu.md), and no split ever claimed a tile.
  const bool claims_open = ct.dynamic_first < ct.pool_end;
  const int known_slots = claims_open ? -1 : ct.static_count + (ct.owner ? 1 : 0);
  const auto static_tile = [&](int slot) {  // PRECOND: slot < static_count, or the owner's slot after them
    return slot < ct.static_count ? ct.static_first + slot : ct.pool_end;
  };

  // Thread 0: the claims. A claim's value c is tile dynamic_first + c while that is before pool_end; the first one
  // past it ends the K phase (the owner's last tile takes that slot). Claims stop at the CTA's capacity (the owner
  // keeps its last slot for its own tile).
  uint32_t pending[kClaimsAhead];
  int next_resolve = ct.static_count, next_claim = ct.static_count;
  bool ended = !claims_open;
  const int claim_cap = ct.owner ? cap - 1 : cap;
  const auto claim = [&](int k) {
    if (next_claim < claim_cap && !ended) {
      pending[k] = atomicAdd(claims, 1u);
      ++next_claim;
    } else {
      pending[k] = 0xffffffffu;  // no claim: resolves as the end
    }
  };
  // Resolves slot next_resolve from pending[0] into slot_tile and shifts the claims in flight. Thread 0 only.
  const auto resolve_next = [&] {
    const int slot = next_resolve++;
    if (ended) return;
    const int tile = pending[0] < 0xffffffffu && ct.dynamic_first + int(pending[0]) < ct.pool_end
                         ? ct.dynamic_first + int(pending[0])
                         : kNone;
    if (tile != kNone) {
      slot_tile[slot] = tile;
      if (slot + 1 == cap) {  // (a non-owner at its capacity)
        k_slots = cap;
        ended = true;
      }
    } else {
      slot_tile[slot] = ct.owner ? ct.pool_end : kNone;
      k_slots = ct.owner ? slot + 1 : slot;
      ended = true;
    }
#pragma unroll
    for (int k = 0; k + 1 < kClaimsAhead; ++k) pending[k] = pending[k + 1];
  };
  if (threadIdx.x == 0) {
    k_slots = known_slots >= 0 ? known_slots : kNone;
#pragma unroll
    for (int k = 0; k < kClaimsAhead; ++k) claim(k);
  }

  // Ring position i: K slot i while i < k_slots, else V slot i - k_slots. PRECOND (for every position issued): its
  // slot is known (static, or resolved by thread 0 before the barrier that precedes the issue).
  const auto slot_of = [&](int slot) { return slot < ct.static_count || known_slots >= 0 ? static_tile(slot)
                                                                                         : slot_tile[slot]; };
  auto issue = [&](int i, int n) {  // n: the K slots, or kNone while not known (then i is a K position)
    const bool is_v = n != kNone && i >= n;
    if (!(is_v && i - n >= n)) {
      const int slot = is_v ? i - n : i;
      const int tile = slot_of(slot);
      const int first = tile * kTileKeys;
      const bf16* src = (is_v ? v_rows : k_rows) + int64_t(first) * row_stride;
      bf16* dst = sm.ring + (i % kStages) * kTileElems;
      const int end = keys - first - key_base, skip = position - first - key_base;
#pragma unroll
      for (int j = 0; j < kLoadsPerThread; ++j) {
        const bool load = j * kKeyStep < end && j * kKeyStep != skip;
        cp_async_16B_zfill(dst + smem_base + j * kKeyStep * kHeadDim,
                           load ? src + gmem_base + int64_t(j * kKeyStep) * row_stride : src, load ? 16 : 0);
      }
    }
    cp_async_commit();
  };
  // The first kIssueAhead positions need no claim: static slots, then (where that is all) the owner's tile and V slots.
#pragma unroll
  for (int i = 0; i < kIssueAhead; ++i) issue(i, known_slots >= 0 ? known_slots : kNone);

  prepare();
  __syncthreads();  // (k_slots written)
  const int n0 = k_slots;
  if (n0 == 0 && threadIdx.x < group) {  // no keys for this CTA: weight 0 in the merge
    sm.stat_max[threadIdx.x] = -FLT_MAX;
    sm.stat_sum[threadIdx.x] = 0.0f;
  }

  uint32_t q_frag[kKSteps][2];
  load_q_fragments<kHeadDim>(sm, group, q_frag);
  float o_acc[kChains][kDimTiles][4] = {};

  for (int i = 0;; ++i) {
    // Thread 0 resolves the slot the issue below needs (claimed kClaimsAhead resolutions ago) and claims another.
    if (threadIdx.x == 0 && !ended && next_resolve <= i + kIssueAhead) {
      resolve_next();
      claim(kClaimsAhead - 1);
    }
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile i is in for every thread, every thread is done with tile i - 1's slot; k_slots is set
    const int n = k_slots;  // kNone while the K phase has not ended
    if (n != kNone && i >= 2 * n) break;
    issue(i + kIssueAhead, n);
    bf16* tile = sm.ring + (i % kStages) * kTileElems;
    const bool is_v = n != kNone && i >= n;
    const int slot = is_v ? i - n : i;
    const int first = slot * kTileKeys;  // the slot's keys in this CTA's scores and P
    if (ct.owner && n != kNone && slot == n - 1)  // the owner's last tile: the new key from shared memory
      put_new_row<kHeadDim, kThreads>(sm, tile, position - ct.pool_end * kTileKeys, is_v);
    if (!is_v) {
      float s_acc[kChains][4] = {};
      score_tile<kHeadDim, kChains>(tile, q_frag, warp, lane, s_acc);
      const int local = first + warp * 8 + tig * 2;  // every key of the slot: the softmax masks the invalid ones
      if (gid < group) {
        sm.scores[gid * keys_cap + local] = s_acc[0][0] * scale;
        sm.scores[gid * keys_cap + local + 1] = s_acc[0][1] * scale;
      }
    } else {
      if (i == n)  // every score is in: P over this CTA's valid keys
        scores_to_p<kThreads>(sm, group, keys_cap, p_row,
                              n * kTileKeys - (ct.owner ? kTileKeys - ct.last_keys : 0), n * kTileKeys);
      accumulate_pv<kHeadDim, kThreads, kChains>(sm, tile, first, p_row, group, o_acc);
    }
  }

  store_partial<kHeadDim, kThreads, kChains>(sm, group, o_acc);
  cp_async_wait<0>();
}

}  // namespace qwen3::kernels::attention_mma
