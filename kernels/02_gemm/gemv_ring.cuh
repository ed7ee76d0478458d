// The shared-memory row ring of the one-CTA-per-SM batch-1 decode GEMVs (v1_mlp_split_down.cu's v2-v4,
// v12_gemv_norm_ring): a weight row (hidden bf16) is read by the whole CTA at once, one 16-byte piece per thread
// (kVecs pieces where hidden / 8 > kThreads). Each thread copies its pieces with cp.async into a ring of kStages
// groups of kGroup rows and reads back only what it copied itself, so no barrier guards the ring and no register is
// held while bytes are in flight: kStages - 1 groups (Qwen3-8B: 2 x 64 KB a CTA) stream while one is multiplied.
// With kInFlight = kStages (the *_full versions), every stage streams: a thread copies its pieces of a group into
// registers, multiplies them, and only then issues the group kStages ahead into the stage it just emptied (its FMAs
// have consumed the registers, so its shared loads are done before its copies can land there).
// Why not registers (v1_mlp_split_down): with one CTA per SM the register file bounds the bytes in flight to a few
// rows, and a row's dependent chain (FMAs, warp sum) then sets the pace (ITERATIONS.md session 6).
#pragma once

#include <cstdint>

#include "kernels/common/dtype.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::gemv_ring {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / kWarpSize;

// kBlock: the CTA's threads (qkv_attention_o v8 runs the ring with 256).
template <int kVecs, int kGroup, int kStages, int kInFlight = kStages - 1, int kBlock = kThreads>
struct Ring {
  static_assert(kStages >= 2, "one group multiplied, at least one in flight");
  static_assert(kInFlight == kStages - 1 || kInFlight == kStages, "groups in flight: kStages - 1 or every stage");
  static constexpr int64_t kRowVecs = int64_t(kVecs) * kBlock;  // a row's slot, in 16-byte pieces
  static constexpr size_t kBytes = size_t(kStages) * kGroup * kRowVecs * 16;

  uint4* base;      // (kStages, kGroup, kRowVecs) in shared memory
  int64_t vecs;     // 16-byte pieces of a row: hidden / 8 <= kRowVecs
  uint64_t policy;  // L2 policy of the copies (evict-first: weights are read once a token)

  __device__ uint4* stage(int64_t g) const { return base + (g % kStages) * kGroup * kRowVecs; }

  // This thread's pieces of rows [first, min(first + kGroup, end)) into stage g % kStages, row_ptr(r) a row's
  // global address, as one cp.async group. Always commits, also when there is nothing to copy (past the last
  // group), so that the wait_group count in read() stays exact.
  template <class RowPtr>
  __device__ void issue(int64_t g, int64_t first, int64_t end, RowPtr&& row_ptr) const {
    uint4* s = stage(g);
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      if (first + j >= end) break;
      const uint4* src = row_ptr(first + j);
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const int64_t col = threadIdx.x + int64_t(v) * kBlock;
        if (col < vecs) cp_async_16B_policy(s + j * kRowVecs + col, src + col, policy);
      }
    }
    cp_async_commit();
  }

  // The same rows by TMA bulk copies, a whole row each, issued by thread 0 and completing on bar; every thread
  // commits an empty cp.async group, so the count read() waits for stays exact. Why (the *_tma versions): a load
  // issued after 128 KB of a CTA's copies (the norm's input, after the PDL wait) completed ~3.8 us later (traced),
  // and a bulk copy is one instruction for the TMA unit rather than 512 threads' requests. Measured: no better (the
  // load waits behind the bytes on their way to the SM, however requested; ITERATIONS.md session 8).
  // PRECOND: sm_90; bar initialised for one arrival and fenced for the async proxy; a row of vecs pieces is
  // contiguous in global memory and 16-byte aligned.
  template <class RowPtr>
  __device__ void issue_bulk(int64_t g, int64_t first, int64_t end, RowPtr&& row_ptr, uint64_t* bar) const {
    if (threadIdx.x == 0) {
      const int64_t n = end - first < kGroup ? (end > first ? end - first : 0) : kGroup;
      const uint32_t row_bytes = uint32_t(vecs * 16);
      mbarrier_arrive_expect_tx(bar, uint32_t(n) * row_bytes);
      uint4* s = stage(g);
      for (int64_t j = 0; j < n; ++j) bulk_copy_g2s(s + j * kRowVecs, row_ptr(first + j), row_bytes, bar, policy);
    }
    cp_async_commit();
  }

  // Waits for group g (issued kInFlight - 1 groups before the newest; bar: the barrier of a group issue_bulk issued,
  // nullptr otherwise) and copies this thread's pieces of its rows [first, end) into w; zeros past end or past the
  // row. PRECOND: groups issued in order, g the oldest unread, and groups g + 1 .. g + kInFlight - 1 issued (empty
  // ones past the last group).
  __device__ void read(int64_t g, int64_t first, int64_t end, uint4 (&w)[kGroup][kVecs],
                       uint64_t* bar = nullptr) const {
    cp_async_wait<kInFlight - 1>();
    if (bar != nullptr) mbarrier_wait_parity(bar, 0);
    const uint4* s = stage(g);
#pragma unroll
    for (int j = 0; j < kGroup; ++j)
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const int64_t col = threadIdx.x + int64_t(v) * kBlock;
        w[j][v] = col < vecs && first + j < end ? s[j * kRowVecs + col] : make_uint4(0, 0, 0, 0);
      }
  }
};

// The lean rings of norm_mlp v13 and norm_gemv v18: Ring's layout with a row of kRowElems bf16 one 16-byte piece a
// thread (kRowElems / 8 == kBlock, fixed at compile time), its bookkeeping kept by the caller. copy_rows issues this
// thread's pieces of `rows` (<= kGroup) consecutive rows from src (its piece of the first) to dst (its piece of a
// stage's first row); the caller commits the cp.async group. read_rows reads them back and zeros the pieces past
// `rows` (a stage's rows past them hold an older group's).
template <int kGroup, int kRowElems, int kBlock = kThreads>
__device__ __forceinline__ void copy_rows(uint4* dst, const bf16* src, int rows, uint64_t policy) {
  static_assert(kRowElems / 8 == kBlock, "one 16-byte piece of a row a thread");
#pragma unroll
  for (int j = 0; j < kGroup; ++j)
    if (j < rows) cp_async_16B_policy(dst + j * kBlock, src + j * kRowElems, policy);
}

// norm_gemv v23, norm_mlp v16: whether this CTA is among the last of its launch to become resident (the block
// scheduler places a launch's CTAs in index order as the previous launch's CTAs leave their SMs): its index is
// at least `from` (NormGemvArgs / NormMlpArgs::late_cta_from; 0: a quarter of the grid, rounded down).
__device__ __forceinline__ bool resident_late(int32_t from) {
  return int(blockIdx.x) >= (from > 0 ? int(from) : int(gridDim.x / 4));
}

// The lean rings' first `groups` groups, issue(g, stage g) each (the caller's: copy_rows and a commit). kPaced
// (norm_gemv v22, norm_mlp v15): at most `window` (1-4) of this thread's groups in flight, the next issued once the
// oldest has landed, instead of all at once: the loads around a launch boundary wait behind such a burst
// (bench/queue_latency).
template <bool kPaced, class Issue>
__device__ __forceinline__ void issue_first_groups(int groups, int window, Issue&& issue) {
  for (int g = 0; g < groups; ++g) {
    if (kPaced && g >= window) cp_async_wait_pending(window - 1);
    issue(g, g);
  }
}

template <int kGroup, int kBlock = kThreads>
__device__ __forceinline__ void read_rows(const uint4* src, int rows, uint4 (&w)[kGroup][1]) {
#pragma unroll
  for (int j = 0; j < kGroup; ++j) w[j][0] = src[j * kBlock];
  if (rows < kGroup) {
#pragma unroll
    for (int j = 0; j < kGroup; ++j)
      if (j >= rows) w[j][0] = make_uint4(0, 0, 0, 0);
  }
}

// The barriers Ring::issue_bulk completes on, one per group issued that way: initialised by thread 0 for one
// arrival each, fenced for the async proxy, and visible to every thread before any waits on them. PRECOND: every
// thread of the CTA calls it; sm_90.
template <int kN>
__device__ __forceinline__ void init_bulk_barriers(uint64_t (&bars)[kN]) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < kN; ++i) mbarrier_init(&bars[i], 1);
    fence_mbarrier_init();
  }
  __syncthreads();
}

// kGroup dot products of this thread's pieces of kGroup rows with its x, summed over the warp and returned
// transposed (warp_sum_transposed): lane l holds the warp's sum for row warp_sum_transposed_index<kGroup>(l).
template <int kVecs, int kGroup>
__device__ __forceinline__ float dot_group(const uint4 (&w)[kGroup][kVecs], const float (&x)[kVecs][8]) {
  float dot[kGroup];
#pragma unroll
  for (int j = 0; j < kGroup; ++j) {
    dot[j] = 0.0f;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      float wf[8];
      bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[j][v]), wf);
#pragma unroll
      for (int e = 0; e < 8; ++e) dot[j] += wf[e] * x[v][e];
    }
  }
  return warp_sum_transposed<kGroup>(dot);
}

// The same for kTokens inputs at once, a row one 16-byte piece a thread (the lean rings): each piece converted once
// for all of them. The kGroup x kTokens sums go through one warp_sum_transposed, value t * kGroup + j the dot product
// of row j with token t's x: lane l holds the warp's sum for token i / kGroup, row i % kGroup, i =
// warp_sum_transposed_index<kGroup * kTokens>(l). kTokens 1 is dot_group<1, kGroup>'s arithmetic.
template <int kTokens, int kGroup>
__device__ __forceinline__ float dot_group_tokens(const uint4 (&w)[kGroup][1], const float (&x)[kTokens][8]) {
  float dot[kGroup * kTokens];
#pragma unroll
  for (int j = 0; j < kGroup; ++j) {
    float wf[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[j][0]), wf);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      dot[t * kGroup + j] = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) dot[t * kGroup + j] += wf[e] * x[t][e];
    }
  }
  return warp_sum_transposed<kGroup * kTokens>(dot);
}

// This thread's 16-byte pieces of a norm weight (hidden bf16): loaded before the PDL wait (weights), so the norm
// after it waits on one round trip less.
template <int kVecs, int kBlock = kThreads>
__device__ __forceinline__ void load_norm_weight(const bf16* norm_weight, int64_t hidden, uint4 (&w)[kVecs]) {
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kBlock;
    w[v] = col < hidden / 8 ? reinterpret_cast<const uint4*>(norm_weight)[col] : make_uint4(0, 0, 0, 0);
  }
}

// x = bf16(w * bf16(h * inv_rms)) at this thread's columns, as gemv_fused::norm_prologue makes it; zeros past the
// row.
template <int kVecs, int kBlock = kThreads>
__device__ __forceinline__ void scale_normed(const float (&h)[kVecs][8], const uint4 (&norm_w)[kVecs], float inv_rms,
                                             int64_t hidden, float (&x)[kVecs][8]) {
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kBlock;
#pragma unroll
    for (int e = 0; e < 8; ++e) x[v][e] = 0.0f;
    if (col >= hidden / 8) continue;
    float w[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8&>(norm_w[v]), w);
#pragma unroll
    for (int e = 0; e < 8; ++e) x[v][e] = bf16_round(w[e] * bf16_round(h[v][e] * inv_rms));
  }
}

// The normed input at this thread's columns (scale_normed), inv_rms from the producer's partial sums of squares
// (every warp sums them in norm_prologue's order, so every CTA gets the same bits), norm_w this thread's pieces of
// the norm weight (load_norm_weight).
template <int kVecs, int kBlock = kThreads>
__device__ __forceinline__ void normed_from_partials(const bf16* residual, const float* partials,
                                                     int64_t partial_count, const uint4 (&norm_w)[kVecs], float eps,
                                                     int64_t hidden, float (&x)[kVecs][8]) {
  const int lane = threadIdx.x % kWarpSize;
  float sum_sq = 0.0f;
  for (int64_t i = lane; i < partial_count; i += kWarpSize) sum_sq += partials[i];
  sum_sq = warp_sum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / float(hidden) + eps);
  float h[kVecs][8] = {};
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kBlock;
    if (col < hidden / 8) bf16x8_to_float(reinterpret_cast<const Bf16x8*>(residual)[col], h[v]);
  }
  scale_normed<kVecs, kBlock>(h, norm_w, inv_rms, hidden, x);
}

// normed_from_partials with every load issued before between() runs and the arithmetic after it: a caller issues
// its ring copies there, so the norm's loads are not queued behind them (v9_mlp_split_down_l2_first). The same sums
// in the same order: the same bits. PRECOND: partial_count <= kPartialsPerLane * kWarpSize.
constexpr int kPartialsPerLane = 8;
template <int kVecs, int kBlock = kThreads, class Between>
__device__ __forceinline__ void normed_from_partials_loads_first(const bf16* residual, const float* partials,
                                                                 int64_t partial_count, const uint4 (&norm_w)[kVecs],
                                                                 float eps, int64_t hidden, float (&x)[kVecs][8],
                                                                 Between&& between) {
  const int lane = threadIdx.x % kWarpSize;
  float part[kPartialsPerLane];
#pragma unroll
  for (int k = 0; k < kPartialsPerLane; ++k) {
    const int64_t i = lane + int64_t(k) * kWarpSize;
    part[k] = i < partial_count ? partials[i] : 0.0f;
  }
  uint4 h_raw[kVecs];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kBlock;
    h_raw[v] = col < hidden / 8 ? reinterpret_cast<const uint4*>(residual)[col] : make_uint4(0, 0, 0, 0);
  }
  between();
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kPartialsPerLane; ++k)
    if (lane + int64_t(k) * kWarpSize < partial_count) sum_sq += part[k];
  sum_sq = warp_sum(sum_sq);
  const float inv_rms = 1.0f / sqrtf(sum_sq / float(hidden) + eps);
  float h[kVecs][8];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) bf16x8_to_float(reinterpret_cast<const Bf16x8&>(h_raw[v]), h[v]);
  scale_normed<kVecs, kBlock>(h, norm_w, inv_rms, hidden, x);
}

// x = scale_normed(hn) with inv_rms from Σ hn² over the CTA, sq this thread's part of it, summed warp by warp in a
// fixed order (every CTA gets the same bits). PRECOND: every thread of the CTA calls it (two barriers); warp_sq
// holds kBlock / 32 floats of shared memory.
template <int kVecs, int kBlock>
__device__ __forceinline__ void normed_by_block_sum(const float (&hn)[kVecs][8], float sq, const uint4 (&norm_w)[kVecs],
                                                    float eps, int64_t hidden, float* warp_sq, float (&x)[kVecs][8]) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  sq = warp_sum(sq);
  __syncthreads();  // warp_sq may still be read by an earlier call
  if (lane == 0) warp_sq[warp] = sq;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kBlock / kWarpSize; ++w) total += warp_sq[w];
  scale_normed<kVecs, kBlock>(hn, norm_w, 1.0f / sqrtf(total / float(hidden) + eps), hidden, x);
}

// d += one delta copy at a thread's 8 columns (its two float4 pieces), the copies summed in order.
__device__ __forceinline__ void add_delta_copy(float (&d)[8], const float4& d0, const float4& d1) {
  d[0] += d0.x, d[1] += d0.y, d[2] += d0.z, d[3] += d0.w;
  d[4] += d1.x, d[5] += d1.y, d[6] += d1.z, d[7] += d1.w;
}

// hn = bf16(h + bf16(d)) at a thread's 8 columns, rounded as the chain's down GEMV adds its output to the
// residual, and sq += hn².
__device__ __forceinline__ void fold_delta(const float (&h)[8], const float (&d)[8], float (&hn)[8], float& sq) {
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    hn[e] = bf16_round(h[e] + bf16_round(d[e]));
    sq += hn[e] * hn[e];
  }
}

// normed_with_delta (below) with every load issued before between() runs and the arithmetic after it (v16). The
// same sums in the same order: the same bits. PRECOND: copies <= kMaxCopies; as normed_with_delta.
template <int kVecs, int kMaxCopies, int kBlock = kThreads, class Between>
__device__ __forceinline__ void normed_with_delta_loads_first(const bf16* residual, const float* delta, int copies,
                                                              const uint4 (&norm_w)[kVecs], float eps, int64_t hidden,
                                                              float* warp_sq, float (&x)[kVecs][8],
                                                              Between&& between) {
  uint4 h_raw[kVecs];
  float4 d_raw[kVecs][kMaxCopies][2];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kBlock;
    const bool in = col < hidden / 8;
    h_raw[v] = in ? reinterpret_cast<const uint4*>(residual)[col] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kMaxCopies; ++j) {
      const float4* copy = reinterpret_cast<const float4*>(delta + j * hidden);
      const bool load = in && j < copies;
      d_raw[v][j][0] = load ? __ldcg(copy + 2 * col) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      d_raw[v][j][1] = load ? __ldcg(copy + 2 * col + 1) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  between();
  float hn[kVecs][8];
  float sq = 0.0f;
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kBlock;
#pragma unroll
    for (int e = 0; e < 8; ++e) hn[v][e] = 0.0f;
    if (col >= hidden / 8) continue;
    float h[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8&>(h_raw[v]), h);
    float d[8] = {};
#pragma unroll
    for (int j = 0; j < kMaxCopies; ++j) {
      if (j >= copies) break;
      add_delta_copy(d, d_raw[v][j][0], d_raw[v][j][1]);
    }
    fold_delta(h, d, hn[v], sq);
  }
  normed_by_block_sum<kVecs, kBlock>(hn, sq, norm_w, eps, hidden, warp_sq, x);
}

// The same for the hidden state h' = bf16(residual + bf16(delta)) (NormGemvArgs::residual_delta), the delta the
// sum of `copies` (hidden) vectors `tokens` x hidden apart (NormMlpArgs::delta_copies; a delta of several tokens
// is laid out (copies, tokens, hidden), and delta points at this token's row of copy 0), summed in order: the CTA
// sums h'² itself (a fixed order: every CTA gets the same bits). The delta is read through L2 (ld.global.cg): in
// v3_mlp_qkv_next other CTAs of the same launch wrote it. PRECOND: every thread of the CTA calls it
// (two barriers); warp_sq holds kBlock / 32 floats of shared memory.
template <int kVecs, int kBlock = kThreads>
__device__ __forceinline__ void normed_with_delta(const bf16* residual, const float* delta, int copies,
                                                  const uint4 (&norm_w)[kVecs], float eps, int64_t hidden,
                                                  float* warp_sq, float (&x)[kVecs][8], int tokens = 1) {
  float hn[kVecs][8];
  float sq = 0.0f;
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kBlock;
#pragma unroll
    for (int e = 0; e < 8; ++e) hn[v][e] = 0.0f;
    if (col >= hidden / 8) continue;
    float h[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8*>(residual)[col], h);
    float d[8] = {};
    for (int j = 0; j < copies; ++j) {
      const float4* copy = reinterpret_cast<const float4*>(delta + j * tokens * hidden);
      add_delta_copy(d, __ldcg(copy + 2 * col), __ldcg(copy + 2 * col + 1));
    }
    fold_delta(h, d, hn[v], sq);
  }
  normed_by_block_sum<kVecs, kBlock>(hn, sq, norm_w, eps, hidden, warp_sq, x);
}

}  // namespace qwen3::kernels::gemv_ring
