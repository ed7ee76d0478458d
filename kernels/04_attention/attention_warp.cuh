// The decode attention over one CTA's keys with every warp on its own keys: v6_qkv_attention_o_warp_keys's core
// (v1_qkv_attention_o.cu), an alternative to attention_mma::attend_keys with the same inputs and outputs.
//
// Why: attention_mma::attend_keys streams K then V tiles through a CTA-wide cp.async ring, a block barrier per
// 64-key tile, all scores to shared memory, a softmax pass by group warps, and P back through shared memory for
// ldmatrix. Nsight Compute on that loop at context 8192 (ITERATIONS.md session 3): ~5,350 instructions a warp for
// 512 keys, a warp issuing every 6.9 cycles, DRAM 27% busy: the split's 256 KB of K/V take ~15 us because of the
// instructions between the loads, not the bytes. Here a warp takes 16 keys at a time (chunks w, w + 8, ... of the
// split) straight from global memory into registers (past L1: through L1 the step was 2% slower at 8192, the
// lines of 64-128 KB in flight a CTA evicting each other beside a 160 KB shared-memory carve-out), the next chunk's
// loads in flight while it computes this one, and keeps its own online softmax: no barrier and no shared memory
// inside the loop, ~110 instructions a chunk.
// Measured in the decode step (H200, Qwen3-8B, ITERATIONS.md session 9): not faster. The attention phase at 8192
// (wait -> split written) took 16-18 us against v2's 15.4, the step 4.842 vs 4.823 ms (0.996x), 4.447 vs 4.444 at
// 1024, 4.366 vs 4.327 at 128. Both are near what the split's K/V read pattern streams by itself in one launch
// (bench/kv_read_pattern: 33.6 MB in 10.5-11.3 us with 64-128 KB in flight a CTA), so the loop's instructions were
// not what bounded it.
//
// Register layouts, chosen so that no fragment needs ldmatrix or a pass through shared memory (mma.m16n8k16 bf16,
// thread (gid, tig) = (lane / 4, lane % 4)):
//  - S = Q Kᵀ, A = Q (rows: q heads, zero past the group), B = K (n: 8 keys, one per gid). The dot product does not
//    care in which order it visits the head dimension, so k-step s = 2c + j takes, for logical columns
//    tig*2, +1 / tig*2+8, +9, the dims c*32 + tig*8 + 4j + {0, 1} / {2, 3}: lane (gid, tig) then needs exactly the
//    16-byte pieces K[key gid][c*32 + tig*8, +8) of its key, c < head_dim / 32, and the same pieces of q.
//  - Oᵀ = Vᵀ Pᵀ, A = Vᵀ (rows: dims), B = Pᵀ (n: q heads). S's accumulator (head gid, keys tig*2, +1) is already
//    Pᵀ's B fragment (keys tig*2, +1 of head gid), the two 8-key n-tiles of a chunk its two halves. Output dims are
//    permuted too: m-tile t's rows gid / gid+8 are dims gid*(head_dim/8) + 2t / + 2t+1, so lane (gid, tig) reads
//    V[key][gid*(head_dim/8), +head_dim/8) of its four keys tig*2, tig*2+1, tig*2+8, tig*2+9 and pairs them with
//    byte permutes; its accumulators are (dims gid*(head_dim/8) + 2t, +1) x (heads tig*2, tig*2+1).
// Numerics: P = bf16(exp(s - m)) with m the warp's running maximum (rescaled in fp32 when it grows), sum = Σ P as
// floats, the warps merged like splits (weights exp(m_w - m)). attend_keys rounds P against the CTA's maximum, so
// the two differ by bf16 roundings of P, both within the attention tests' bounds against the exact oracle.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::attention_warp {

constexpr int kChunkKeys = 16;  // keys a warp takes at a time: two 8-key n-tiles of S, one k-step of P V

// Bytes of the shared memory a CTA's `warps` leave their partial results in (Smem::scratch).
constexpr size_t scratch_bytes(int warps, int group, int head_dim) {
  return size_t(warps) * size_t(group) * size_t(head_dim + 2) * 4;
}

// The caller's shared memory for one CTA's keys.
struct Smem {
  const bf16* q_s;  // (group, kHeadDim) bf16: QK-normed, RoPE'd q, written by the caller's prepare()
  const bf16* new_kv;  // (2, kHeadDim) bf16: the new key and value (prepare(), where this CTA owns the new key)
  float* partial;      // (group, kHeadDim): on return, the unnormalized output
  float* stat_max;     // (group): on return, the max score per q head (-FLT_MAX for a CTA without keys)
  float* stat_sum;     // (group): on return, Σ bf16(exp(score - max)) per q head
  float* scratch;      // scratch_bytes(): (warps, group, 2) statistics, then (warps, group, kHeadDim) outputs
};

// One chunk's K and V as a lane holds them (see the header): K pieces of key gid of each n-tile, V pieces of its
// four keys.
template <int kHeadDim>
struct Chunk {
  static constexpr int kKPieces = kHeadDim / 32, kVPieces = kHeadDim / 64;
  uint4 k[2][kKPieces];  // (n-tile, c): K[key0 + 8 n + gid][c*32 + tig*8, +8)
  uint4 v[4][kVPieces];  // (key tig*2, tig*2+1, tig*2+8, tig*2+9; p): V[key][gid*(kHeadDim/8) + 8p, +8)
};

// Keys [0, n_keys) of k_rows / v_rows (row_stride elements apart; local key new_key, if >= 0, is taken from
// sm.new_kv instead of memory) against the group's q heads. `prepare()` runs after each warp's first chunk is
// issued and must leave sm.q_s (and sm.new_kv for the owner) written; a barrier follows it, and one more before
// the warps' results are merged into sm.partial / stat_max / stat_sum (complete on return, after a barrier).
// PRECOND: blockDim.x == kThreads; 1 <= group <= 8 (the n of Oᵀ's mma, rows 0-7 of S's); head_dim 64 or 128;
// every thread calls it; K/V rows [0, n_keys) other than new_key are not written during the call (they are read
// through the non-coherent path).
template <int kHeadDim, int kThreads, class Prepare>
__device__ __forceinline__ void attend_keys(const Smem& sm, const bf16* k_rows, const bf16* v_rows, int64_t row_stride,
                                            int n_keys, int new_key, int group, float scale, Prepare&& prepare) {
  constexpr int kWarps = kThreads / kWarpSize;
  constexpr int kDimsPerLane = kHeadDim / 8;  // output dims a lane accumulates (per q head pair)
  constexpr int kMTiles = kHeadDim / 16;      // m-tiles of Oᵀ
  constexpr int kKPieces = Chunk<kHeadDim>::kKPieces, kVPieces = Chunk<kHeadDim>::kVPieces;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128");
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int gid = lane / 4, tig = lane % 4;
  const int chunks = (n_keys + kChunkKeys - 1) / kChunkKeys;
  const uint4 zero = make_uint4(0, 0, 0, 0);

  // Chunk `ch`'s pieces into c; keys past n_keys and the new key read as zero.
  const auto load = [&](Chunk<kHeadDim>& c, int ch) {
    const int key0 = ch * kChunkKeys;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const int key = key0 + 8 * n + gid;
      const bool valid = key < n_keys && key != new_key;
      const bf16* row = k_rows + int64_t(key) * row_stride + tig * 8;
#pragma unroll
      for (int c4 = 0; c4 < kKPieces; ++c4) c.k[n][c4] = valid ? load_nc_no_l1_16B(row + c4 * 32) : zero;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int key = key0 + tig * 2 + (i & 1) + (i >> 1) * 8;
      const bool valid = key < n_keys && key != new_key;
      const bf16* row = v_rows + int64_t(key) * row_stride + gid * kDimsPerLane;
#pragma unroll
      for (int p = 0; p < kVPieces; ++p) c.v[i][p] = valid ? load_nc_no_l1_16B(row + p * 8) : zero;
    }
  };

  Chunk<kHeadDim> bufs[2];
  if (warp < chunks) load(bufs[0], warp);

  prepare();
  __syncthreads();  // q_s and new_kv written

  // Q as S's A operand: a0 / a2 of k-step 2c + j (rows 8-15 zero), zero past the group.
  uint32_t qa[kKPieces][2][2];
#pragma unroll
  for (int c4 = 0; c4 < kKPieces; ++c4) {
    const uint4 q = gid < group ? *reinterpret_cast<const uint4*>(sm.q_s + gid * kHeadDim + c4 * 32 + tig * 8) : zero;
    qa[c4][0][0] = q.x;
    qa[c4][0][1] = q.y;
    qa[c4][1][0] = q.z;
    qa[c4][1][1] = q.w;
  }
  float o[kMTiles][4] = {};   // Oᵀ: (dims gid*kDimsPerLane + 2t, +1) x (heads tig*2, tig*2+1)
  float m_run = -FLT_MAX;     // head gid's running maximum (the same on its 4 lanes)
  float sum_run = 0.0f;       // this lane's part of head gid's Σ P

  const auto compute = [&](Chunk<kHeadDim>& c, int ch) {
    const int key0 = ch * kChunkKeys;
    if (new_key >= key0 && new_key < key0 + kChunkKeys) {  // warp-uniform: the new row from shared memory
#pragma unroll
      for (int n = 0; n < 2; ++n)
        if (key0 + 8 * n + gid == new_key)
#pragma unroll
          for (int c4 = 0; c4 < kKPieces; ++c4)
            c.k[n][c4] = *reinterpret_cast<const uint4*>(sm.new_kv + c4 * 32 + tig * 8);
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (key0 + tig * 2 + (i & 1) + (i >> 1) * 8 == new_key)
#pragma unroll
          for (int p = 0; p < kVPieces; ++p)
            c.v[i][p] = *reinterpret_cast<const uint4*>(sm.new_kv + kHeadDim + gid * kDimsPerLane + p * 8);
    }
    float s[2][4] = {};  // S: (head gid, keys key0 + 8n + tig*2, +1); rows gid + 8 zero
#pragma unroll
    for (int c4 = 0; c4 < kKPieces; ++c4)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const uint32_t a[4] = {qa[c4][j][0], 0u, qa[c4][j][1], 0u};
          const uint32_t b[2] = {j ? c.k[n][c4].z : c.k[n][c4].x, j ? c.k[n][c4].w : c.k[n][c4].y};
          mma_bf16_16816(s[n], a, b);
        }
    float score[2][2];
    float m_chunk = -FLT_MAX;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = key0 + 8 * n + tig * 2 + e < n_keys;
        score[n][e] = valid ? s[n][e] * scale : -INFINITY;
        m_chunk = fmaxf(m_chunk, score[n][e]);
      }
    m_chunk = fmaxf(m_chunk, __shfl_xor_sync(0xffffffffu, m_chunk, 1));
    m_chunk = fmaxf(m_chunk, __shfl_xor_sync(0xffffffffu, m_chunk, 2));
    const float m_new = fmaxf(m_run, m_chunk);
    const float factor = expf(m_run - m_new);  // head gid's rescale of what is summed so far
    m_run = m_new;
    uint32_t pb[2];  // Pᵀ's B fragment: keys tig*2, +1 (n-tile 0) and tig*2+8, +9 (n-tile 1) of head gid
    float p_sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const __nv_bfloat162 p2 = __floats2bfloat162_rn(expf(score[n][0] - m_new), expf(score[n][1] - m_new));
      p_sum += __low2float(p2) + __high2float(p2);
      pb[n] = *reinterpret_cast<const uint32_t*>(&p2);
    }
    sum_run = sum_run * factor + p_sum;
    // Each accumulator column is a q head: its factor from a lane of that head's row (gid == head).
    const float f0 = __shfl_sync(0xffffffffu, factor, (tig * 2) * 4);
    const float f1 = __shfl_sync(0xffffffffu, factor, (tig * 2 + 1) * 4);
#pragma unroll
    for (int t = 0; t < kMTiles; ++t) {
      o[t][0] *= f0;
      o[t][1] *= f1;
      o[t][2] *= f0;
      o[t][3] *= f1;
      const uint32_t* v0 = reinterpret_cast<const uint32_t*>(&c.v[0][t / 4]);
      const uint32_t* v1 = reinterpret_cast<const uint32_t*>(&c.v[1][t / 4]);
      const uint32_t* v2 = reinterpret_cast<const uint32_t*>(&c.v[2][t / 4]);
      const uint32_t* v3 = reinterpret_cast<const uint32_t*>(&c.v[3][t / 4]);
      // Vᵀ's A fragment: (dim 2t | 2t+1 of this lane's dims) x (keys tig*2, +1 | tig*2+8, +9).
      const uint32_t a[4] = {__byte_perm(v0[t % 4], v1[t % 4], 0x5410), __byte_perm(v0[t % 4], v1[t % 4], 0x7632),
                             __byte_perm(v2[t % 4], v3[t % 4], 0x5410), __byte_perm(v2[t % 4], v3[t % 4], 0x7632)};
      mma_bf16_16816(o[t], a, pb);
    }
  };

  // Warp `warp` takes chunks warp, warp + kWarps, ...; the next one's loads are issued before this one is used.
  for (int ch = warp; ch < chunks; ch += 2 * kWarps) {
    if (ch + kWarps < chunks) load(bufs[1], ch + kWarps);
    compute(bufs[0], ch);
    if (ch + kWarps >= chunks) break;
    if (ch + 2 * kWarps < chunks) load(bufs[0], ch + 2 * kWarps);
    compute(bufs[1], ch + kWarps);
  }

  // The warp's statistics and outputs to shared memory, then merged over the warps like splits.
  float* warp_stats = sm.scratch;                           // (kWarps, group, 2): max, Σ P
  float* warp_out = sm.scratch + kWarps * group * 2;        // (kWarps, group, kHeadDim)
  sum_run += __shfl_xor_sync(0xffffffffu, sum_run, 1);
  sum_run += __shfl_xor_sync(0xffffffffu, sum_run, 2);
  if (tig == 0 && gid < group) {
    warp_stats[(warp * group + gid) * 2] = m_run;
    warp_stats[(warp * group + gid) * 2 + 1] = sum_run;
  }
#pragma unroll
  for (int t = 0; t < kMTiles; ++t) {
    const int dim = gid * kDimsPerLane + 2 * t;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int head = tig * 2 + e;
      if (head < group)
        *reinterpret_cast<float2*>(warp_out + (warp * group + head) * kHeadDim + dim) =
            make_float2(o[t][e], o[t][2 + e]);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * kHeadDim; i += kThreads) {
    const int head = i / kHeadDim;
    float m = -FLT_MAX;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, warp_stats[(w * group + head) * 2]);
    float value = 0.0f, total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float weight = expf(warp_stats[(w * group + head) * 2] - m);
      value += weight * warp_out[(w * group + head) * kHeadDim + i % kHeadDim];
      total += weight * warp_stats[(w * group + head) * 2 + 1];
    }
    sm.partial[i] = value;
    if (i % kHeadDim == 0) {
      sm.stat_max[head] = m;
      sm.stat_sum[head] = total;
    }
  }
  __syncthreads();
}

}  // namespace qwen3::kernels::attention_warp
