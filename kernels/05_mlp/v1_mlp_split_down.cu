// v1_mlp_split_down: the batch-1 MLP sublayer (RMSNorm, gate|up, SwiGLU, down) in one launch with no grid-wide wait
// inside (kernels.h NormMlpArgs).
//
// Why: in the chain, gate|up and down are two kernels, and the down GEMV cannot start multiplying before the last
// gate|up CTA is done: a grid-wide wait, then a ramp of fresh loads, ~3-5 us a layer in which HBM streams little
// (ITERATIONS.md, sessions 3-5). But the down projection is a sum over the intermediate features, so it splits:
// down(act) = Σ_c down_projᵀ[block c]ᵀ · act[block c]. CTA c computes the gate and up rows of its own block of
// features, applies SwiGLU, and multiplies its block of down_projᵀ rows (down_proj transposed at load time, so the
// block is contiguous rows) without waiting for any other CTA; the (hidden) partials of all CTAs meet in an fp32
// buffer through red.global.add. Each CTA reads one contiguous stream of 3 x features rows, and its down rows are
// already in flight while its last gate|up rows are multiplied.
//
// Layout of the work: one CTA per SM, 512 threads. Every weight row (hidden bf16) is read by the whole CTA at
// once, one 16-byte vector per thread (hidden 4096 = 512 vectors), kDepth rows in flight per thread:
//  * gate|up rows: a thread multiplies its 8 columns by the normed input it holds in registers, a warp sums its
//    lanes, the 16 warp sums of each row meet in shared memory;
//  * the SwiGLU point (once per CTA): one barrier, act[i] = bf16(bf16(silu(g)) * u) for the CTA's features;
//  * down_projᵀ rows: a thread keeps 8 output columns, acc += row * act[i]; at the end it adds them to the delta.
// PRECOND (supports()): hidden % 8 == 0 and hidden / 8 <= 2 * 512; 16-byte aligned rows; residual_delta zero.
//
// Versions in this file (H200, Qwen3-8B, batch 1, context 128; ITERATIONS.md session 6):
//  * v1 (register ring, a row at a time): 166 us a launch, step 7.30 ms against 4.33 for the two GEMVs;
//  * v2_mlp_split_down_ring (gemv_ring.cuh's cp.async ring, 8 rows at a time): ~70 us after its PDL wait (302 MB at
//    ~94% of the read peak), step 4.209 vs 4.332 ms: the default;
//  * v3_mlp_qkv_next (v2 + the next layer's QKV after a grid-wide wait): 4.565 ms, the wait takes the slowest CTA's
//    finish (7 us after the mean) and the QKV rows stream only 2 groups ahead of it;
//  * v4_mlp_split_down_l2 (v2 + the next QKV weights into L2 at the tail): 4.500 ms (48 MB) / 4.354 (12 MB): the
//    tail has no HBM time to spare.
// Session 8 (ITERATIONS.md):
//  * v5_mlp_split_down_full_ring (v2 with all three ring stages in flight, 192 KB a CTA): the default; 0.1-1.6%
//    faster than v2 on four leases at contexts 128, 1024 and 8192;
//  * v6_mlp_split_down_tma (v5 with the groups before the PDL wait as TMA bulk copies): ~1% slower than v5;
//  * v7_mlp_with_o (v5 with the attention's o projection first, then a grid-wide wait for h'): 8-12% slower. Its
//    o rows are in shared memory before the wait, yet a CTA reaches the grid-wide wait 8-13 us after it, and a
//    load issued behind ~192 KB of queued ring copies takes ~4 us (traces).
// Session 9:
//  * v8_mlp_split_down_l2_lead (v5 whose first CTAs, resident ~17 us before the release on the 4 SMs the attention
//    launch leaves free, pull the first 96 / 192 / 384 KB of every other CTA's rows into L2 while the attention
//    runs): 0.991x / 0.982x / 0.764x of v5 at context 128. The other CTAs' waited stamps came earlier (1.3 us after
//    the release, mean, against 3.5), but a lead CTA's warp needed ~30 us to issue its 6 MB of bulk prefetches
//    (its SM's copy engine; it then finished last), the attention launch ran 1.2 us longer and its end reached the
//    MLP's release 2.7 us later instead of 0.45.
// Session 17: v11_mlp_split_down_skewed and v12_mlp_split_down_paired, v10 with fewer features for the CTAs that
// become resident last (a fixed skew; a skew from the previous layer's stamps): 1.001x-1.005x and 0.95x (below);
// v13_mlp_split_down_lean_loop, v10 in 44% fewer instructions: the batch-1 default.
// Session 18: v14_mlp_split_down_batched, v13's kernel for two tokens whose inputs come normed: batch 2's MLP in one
// launch, 1.055x a batch-2 step against gate|up, SwiGLU, down and the residual add as four.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/handoff.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_ring::kThreads;  // 512: a row of Qwen3-8B is one 16-byte piece a thread
using gemv_ring::kWarps;

// Four fp32 additions to global memory in one reduction (sm_90: red.global.add.v4.f32; four scalar ones below).
// No value comes back, so the thread does not wait for L2. PRECOND: p 16-byte aligned.
__device__ __forceinline__ void red_add_f32x4(float* p, const float (&v)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
#else
#pragma unroll
  for (int e = 0; e < 4; ++e) atomicAdd(p + e, v[e]);
#endif
}

// Intermediate features [begin, end) of CTA c: contiguous blocks of near-equal size (kernels.h's split, which
// this file also uses for its o rows and next-layer rows).
__host__ __device__ __forceinline__ int64_t feature_begin(int64_t c, int64_t ctas, int64_t inter) {
  return norm_mlp_feature_begin(c, ctas, inter);
}

__host__ __device__ __forceinline__ int64_t max_features(int64_t ctas, int64_t inter) {
  return (inter + ctas - 1) / ctas;
}

// Every gate and up row of the CTA multiplied: act[i] = bf16(bf16(silu(g)) * u) for its `features`, g and u the
// sums of the kWarps warp sums in dots (gate rows at [0, features), up rows at [features, 2 features) of each
// warp's stride), rounded to bf16 where transformers rounds. PRECOND: every thread of the CTA calls it.
__device__ __forceinline__ void swiglu_block(const float* dots, int64_t dots_stride, int64_t features, float* act) {
  __syncthreads();
  for (int64_t i = threadIdx.x; i < features; i += kThreads) {
    float g = 0.0f, u = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      g += dots[w * dots_stride + i];
      u += dots[w * dots_stride + features + i];
    }
    g = bf16_round(g);
    u = bf16_round(u);
    act[i] = bf16_round(bf16_round(g / (1.0f + expf(-g))) * u);
  }
  __syncthreads();
}

// down += w * act at this thread's columns: one down_projᵀ row (w, this thread's pieces; zeros past the row) scaled
// by its feature's activation. Branch-free: the ring's down phase runs it for every row of a group.
template <int kVecs>
__device__ __forceinline__ void add_scaled_row(float (&down)[kVecs][8], const uint4 (&w)[kVecs], float act) {
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    float wf[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w[v]), wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) down[v][e] += wf[e] * act;
  }
}

// The same for kTokens tokens at once (v14), one 16-byte piece of the row a thread: the piece converted once.
template <int kTokens>
__device__ __forceinline__ void add_scaled_row_tokens(float (&down)[kTokens][8], const uint4& w,
                                                      const float (&act)[kTokens]) {
  float wf[8];
  bf16x8_to_float(reinterpret_cast<const Bf16x8&>(w), wf);
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int e = 0; e < 8; ++e) down[t][e] += wf[e] * act[t];
}

// This CTA's share of the down projection of token `token` of `tokens` into its copy of the delta
// (NormMlpArgs::residual_delta, (delta_copies, tokens, hidden), copy blockIdx.x % delta_copies): fire-and-forget
// reductions at this thread's columns (vecs: hidden / 8).
template <int kVecs>
__device__ __forceinline__ void add_down_partial(const float (&down)[kVecs][8], const NormMlpArgs& a, int64_t vecs,
                                                 int64_t token = 0, int64_t tokens = 1) {
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const int64_t col = threadIdx.x + int64_t(v) * kThreads;
    if (col >= vecs) continue;
    float* dst = a.residual_delta + ((blockIdx.x % a.delta_copies) * tokens + token) * a.hidden + col * 8;
    red_add_f32x4(dst, {down[v][0], down[v][1], down[v][2], down[v][3]});
    red_add_f32x4(dst + 4, {down[v][4], down[v][5], down[v][6], down[v][7]});
  }
}

// kVecs: 16-byte vectors of a row per thread (hidden / 8 <= kVecs * kThreads); kDepth: rows in flight per thread.
template <int kVecs, int kDepth>
__global__ void __launch_bounds__(kThreads, 1) mlp_split_down_kernel(NormMlpArgs a, int prewait_rows) {
  extern __shared__ __align__(16) float smem_f[];
  pdl_launch_dependents();
  const int64_t ctas = gridDim.x;
  const int64_t f0 = feature_begin(blockIdx.x, ctas, a.inter);
  const int64_t features = feature_begin(blockIdx.x + 1, ctas, a.inter) - f0;
  const int64_t dots_stride = 2 * max_features(ctas, a.inter);
  float* dots = smem_f;                          // (kWarps, dots_stride): warp sums of the gate rows, then up rows
  float* act_s = smem_f + kWarps * dots_stride;  // (features): the SwiGLU output of this CTA's block
  const int64_t rows = 3 * features;             // gate rows, up rows, down_projᵀ rows
  const int64_t vecs = a.hidden / 8;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const uint64_t policy = make_evict_first_policy();

  // Row r of this CTA's stream.
  const auto row_ptr = [&](int64_t r) {
    const bf16* p = r < features       ? a.w_gate_up + (f0 + r) * a.hidden
                    : r < 2 * features ? a.w_gate_up + (a.inter + f0 + r - features) * a.hidden
                                       : a.w_down_t + (f0 + r - 2 * features) * a.hidden;
    return reinterpret_cast<const uint4*>(p);
  };
  const auto load_row = [&](uint4(&dst)[kVecs], int64_t r) {
    const uint4* p = row_ptr(r);
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int64_t col = threadIdx.x + int64_t(v) * kThreads;
      dst[v] = col < vecs ? load_stream_16B(p + col, policy) : make_uint4(0, 0, 0, 0);
    }
  };

  // Weights depend on nothing: the first rows are in flight before the wait for the attention sublayer.
  uint4 ring[kDepth][kVecs];
#pragma unroll
  for (int d = 0; d < kDepth; ++d)
    if (d < prewait_rows && d < rows) load_row(ring[d], d);
  pdl_wait();  // residual and norm partials come from the previous kernel; residual_delta was zeroed by it
#pragma unroll
  for (int d = 0; d < kDepth; ++d)
    if (d >= prewait_rows && d < rows) load_row(ring[d], d);

  // The normed input at this thread's columns (every CTA gets the same bits).
  float x[kVecs][8];
  uint4 norm_w[kVecs];
  gemv_ring::load_norm_weight<kVecs>(a.norm_weight, a.hidden, norm_w);
  gemv_ring::normed_from_partials<kVecs>(a.residual, a.norm_partials, a.partial_count, norm_w, a.eps, a.hidden, x);

  float down[kVecs][8] = {};
  for (int64_t r0 = 0; r0 < rows; r0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int64_t r = r0 + d;  // the same for every thread: the branches below are block-uniform
      if (r >= rows) break;
      if (r == 2 * features) swiglu_block(dots, dots_stride, features, act_s);
      if (r < 2 * features) {
        float dot = 0.0f;
#pragma unroll
        for (int v = 0; v < kVecs; ++v) {
          if (threadIdx.x + int64_t(v) * kThreads >= vecs) continue;
          float w[8];
          bf16x8_to_float(reinterpret_cast<const Bf16x8&>(ring[d][v]), w);
#pragma unroll
          for (int e = 0; e < 8; ++e) dot += w[e] * x[v][e];
        }
        dot = warp_sum(dot);
        if (lane == 0) dots[warp * dots_stride + r] = dot;
      } else {
        add_scaled_row<kVecs>(down, ring[d], act_s[r - 2 * features]);
      }
      if (r + kDepth < rows) load_row(ring[d], r + kDepth);
    }
  }

  add_down_partial<kVecs>(down, a, vecs);
}

// ---- v2_mlp_split_down_ring: v1's work split, fed through a shared-memory ring by cp.async -----------------------
// v1 measured 166 us a launch for 302 MB (ncu: a warp issues every 14 cycles, stalled on its loads): each row was
// a dependent chain (8 FMAs, a 5-shuffle warp sum, a shared store) and 8 rows of registers bounded the bytes in
// flight. Here each thread copies its 16 bytes of every row into shared memory with cp.async (no register held
// while in flight) and reads back only what it copied itself, so no barrier guards the ring: kStages groups of
// kGroup rows, kStages - 1 groups in flight (Qwen3-8B: 2 x 64 KB a CTA). A group is multiplied with kGroup
// independent chains and one transposed warp reduction (warp_sum_transposed: 9 shuffles for 8 rows, not 40).
//
// ---- v5-v7: every stage in flight (kFull), its first groups by TMA (kTma), the o projection first (kWithO) ------
// v5: the ring's third stage idled in v2 while a group was multiplied from registers; here each thread issues the
// group kStages ahead into the stage it has just multiplied, so 3 x 64 KB stream a CTA. v7 streams the o rows
// (prefetched while the attention, a separate launch now, runs: its CTAs hold only the SMs they attend on), then
// h' = the residual with the o output, written per row, a grid-wide wait, and the norm of h' for the MLP rows.
//
// ---- v3_mlp_qkv_next (kNext): v2, then the next layer's QKV GEMV in the same launch ----------------------------
// After its down partial, every CTA waits at a grid-wide counter until all partials are in the delta (the CTAs
// are all resident: one per SM), norms bf16(residual + bf16(delta)) itself and multiplies its block of the next
// layer's QKV rows. What a kernel boundary cannot do, the ring does here: the QKV rows are weights, so their
// cp.async copies are in flight during the down rows' tail and the wait; the launch boundary between the MLP and
// the QKV GEMV (and the QKV GEMV's ramp) is gone.
// Points of a CTA's work stamped into NormMlpArgs::trace (profiling; thread 0's view).
enum NormMlpTraceEvent {
  kTraceStart,       // the CTA began (resident)
  kTraceWaited,      // past the PDL wait
  kTraceGateUp,      // every gate|up row multiplied (before the SwiGLU barrier)
  kTraceDown,        // every down row multiplied (v3: before the grid-wide wait)
  kTraceAllIn,       // v3: past the grid-wide wait
  kTraceNormed,      // v3: the next layer's normed input ready
  kTraceRowsDone,    // the last group multiplied
  kTraceEnd,         // its outputs written
};

[[maybe_unused]] __device__ __forceinline__ void stamp(uint64_t* trace, int event) {
  if (trace != nullptr && threadIdx.x == 0) trace[blockIdx.x * kNormMlpTraceEvents + event] = global_timer_ns();
}

// kFull (v5-v7): every stage of the ring in flight (gemv_ring::Ring's kInFlight = kStages), a group's successor
// issued once the group is multiplied. kTma (v6, sm_90): the groups issued before the PDL wait are TMA bulk copies
// (Ring::issue_bulk), meant to keep the norm's loads after the wait from queuing behind them (they still do).
// kWithO (v7): the o projection's rows stream first (NormMlpArgs::w_o), then a grid-wide wait for h' and its norm,
// then the MLP's rows.
template <int kVecs, int kGroup, int kStages, bool kNext, bool kFull = false, bool kTma = false, bool kWithO = false,
          bool kLead = false, bool kL2First = false>
__global__ void __launch_bounds__(kThreads, 1) mlp_split_down_ring_kernel(NormMlpArgs a, int prewait_groups) {
  constexpr int kInFlight = kFull ? kStages : kStages - 1;
  using Ring = gemv_ring::Ring<kVecs, kGroup, kStages, kInFlight>;
  __shared__ uint64_t prologue_bars[kStages];  // kTma: one per group issued before the wait
  extern __shared__ __align__(16) unsigned char smem_raw[];
  pdl_launch_dependents();
  stamp(a.trace, kTraceStart);
  const int64_t ctas = gridDim.x;
  const int64_t f0 = feature_begin(blockIdx.x, ctas, a.inter);
  const int64_t features = feature_begin(blockIdx.x + 1, ctas, a.inter) - f0;
  const int64_t n0 = kNext ? feature_begin(blockIdx.x, ctas, a.next_rows) : 0;  // this CTA's next-layer rows
  const int64_t next_rows = kNext ? feature_begin(blockIdx.x + 1, ctas, a.next_rows) - n0 : 0;
  // kWithO: this CTA's o rows (none past o_ctas).
  const int64_t o_ctas = kWithO ? (a.o_ctas > 0 ? int64_t(a.o_ctas) : ctas) : 0;
  const int64_t o0 = kWithO && blockIdx.x < o_ctas ? feature_begin(blockIdx.x, o_ctas, a.hidden) : 0;
  const int64_t o_rows = kWithO && blockIdx.x < o_ctas ? feature_begin(blockIdx.x + 1, o_ctas, a.hidden) - o0 : 0;
  const int64_t dots_stride =
      std::max<int64_t>(std::max<int64_t>(2 * max_features(ctas, a.inter), kNext ? max_features(ctas, a.next_rows) : 0),
                        kWithO ? max_features(o_ctas, a.hidden) : 0);
  const int64_t vecs = a.hidden / 8;
  const Ring ring{reinterpret_cast<uint4*>(smem_raw), vecs, make_evict_first_policy()};
  float* dots = reinterpret_cast<float*>(smem_raw + Ring::kBytes);  // (kWarps, dots_stride)
  float* act_s = dots + kWarps * dots_stride;                         // (features)
  float* h_s = act_s + max_features(ctas, a.inter);  // kWithO: (o_rows) bf16(h + bf16(Σ delta)) of its o rows
  __shared__ float warp_sq[kWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;

  // Rows in groups, a group never straddling two phases: O [0, R) the o projection's rows (kWithO; R = o_rows),
  // A [R, R + 2F) gate then up rows, B [R + 2F, R + 3F) down_projᵀ rows, C [R + 3F, R + 3F + next_rows) the next
  // layer's QKV rows (kNext).
  const int64_t rows_o = o_rows, rows_a = rows_o + 2 * features, rows_ab = rows_o + 3 * features;
  const int64_t groups_o = (rows_o + kGroup - 1) / kGroup;
  const int64_t groups_a = groups_o + (2 * features + kGroup - 1) / kGroup;
  const int64_t groups_ab = groups_a + (features + kGroup - 1) / kGroup;
  const int64_t groups = groups_ab + (next_rows + kGroup - 1) / kGroup;
  const auto group_first = [&](int64_t g) {
    return g < groups_o    ? g * kGroup
           : g < groups_a  ? rows_o + (g - groups_o) * kGroup
           : g < groups_ab ? rows_a + (g - groups_a) * kGroup
                           : rows_ab + (g - groups_ab) * kGroup;
  };
  const auto group_end = [&](int64_t g) {
    return g < groups_o ? rows_o : g < groups_a ? rows_a : g < groups_ab ? rows_ab : rows_ab + next_rows;
  };
  const auto row_ptr = [&](int64_t r) {
    const bf16* p = r < rows_o                ? a.w_o + (o0 + r) * a.q_dim
                    : r < rows_o + features   ? a.w_gate_up + (f0 + r - rows_o) * a.hidden
                    : r < rows_a              ? a.w_gate_up + (a.inter + f0 + r - rows_o - features) * a.hidden
                    : r < rows_ab             ? a.w_down_t + (f0 + r - rows_a) * a.hidden
                                              : a.w_next + (n0 + r - rows_ab) * a.hidden;
    return reinterpret_cast<const uint4*>(p);
  };
  // Past the last group: an empty cp.async group (Ring::issue commits it all the same).
  const auto issue = [&](int64_t g) {
    if (g < groups)
      ring.issue(g, group_first(g), group_end(g), row_ptr);
    else
      ring.issue(g, 0, 0, row_ptr);
  };
  // kWithO: the phase-A groups [groups_o + o_ahead, groups_o + kInFlight) are not issued while the o rows are
  // multiplied (an empty cp.async group holds each one's place) but after the wait for h': bytes in flight to this
  // SM delay its other loads (the wait's polls, h'), each by about what is queued ahead of it.
  const int64_t o_ahead = kWithO ? (a.o_ahead_groups >= 0 ? min(int64_t(a.o_ahead_groups), int64_t(kInFlight))
                                                           : int64_t(kInFlight))
                                 : int64_t(kInFlight);
  const auto deferred = [&](int64_t g) { return kWithO && g >= groups_o + o_ahead && g < groups_o + kInFlight; };

  const int bulk_groups = kTma ? min(prewait_groups, kInFlight) : 0;
  if constexpr (kTma) gemv_ring::init_bulk_barriers(prologue_bars);
  for (int g = 0; g < kInFlight; ++g) {
    if (g >= prewait_groups) continue;
    if (g < bulk_groups)
      ring.issue_bulk(g, g < groups ? group_first(g) : 0, g < groups ? group_end(g) : 0, row_ptr, &prologue_bars[g]);
    else if (deferred(g))
      cp_async_commit();
    else
      issue(g);
  }
  // kLead (v8): the lead CTAs, resident long before the PDL release on the SMs the attention launch leaves free,
  // pull the first l2_lead_bytes of every other CTA's rows (its gate rows, one contiguous block) into L2 while HBM
  // idles under the attention, a lane a CTA, in 64 KB bulk prefetches. Nothing waits on them, but issuing them
  // holds warp 0 (measured: ~30 us for 6 MB a CTA, the SM's copy engine), so the lead CTA itself starts late.
  if constexpr (kLead) {
    if (blockIdx.x < a.l2_lead_ctas && warp == 0) {
      for (int64_t t = a.l2_lead_ctas + blockIdx.x + int64_t(lane) * a.l2_lead_ctas; t < ctas;
           t += int64_t(kWarpSize) * a.l2_lead_ctas) {
        const int64_t ft = feature_begin(t, ctas, a.inter);
        const int64_t bytes = min(a.l2_lead_bytes, (feature_begin(t + 1, ctas, a.inter) - ft) * a.hidden * 2);
        const char* gate_rows = reinterpret_cast<const char*>(a.w_gate_up + ft * a.hidden);
        for (int64_t at = 0; at < bytes; at += 64 * 1024)
          prefetch_l2_bulk(gate_rows + at, uint32_t(min(int64_t(64 * 1024), bytes - at)));
      }
    }
  }
  // kL2First (v9): this CTA's own first l2_lead_bytes of rows go to L2 (bulk prefetches, a lane a row) instead of
  // into its ring (prewait_groups 0 by default): HBM streams them while the previous kernel drains, as v5's copies
  // do, but nothing is on its way to this SM when the norm's loads go out after the wait; the ring's first groups
  // then come from L2. (v8's lead CTAs did this for the others; their CTAs passed the wait ~2 us earlier.)
  // Rows of groups issued into the ring before the wait (prewait_groups, 0 by default) are not prefetched again.
  if constexpr (kL2First) {
    if (warp == 0) {
      const int64_t issued = min(int64_t(min(prewait_groups, kInFlight)), groups);
      const int64_t in_ring = issued > 0 ? group_first(issued) : 0;
      const int64_t l2_end = min(rows_ab, in_ring + a.l2_lead_bytes / (a.hidden * 2));
      for (int64_t r = in_ring + lane; r < l2_end; r += kWarpSize)
        prefetch_l2_bulk(row_ptr(r), uint32_t(a.hidden * 2));
    }
  }
  uint4 norm_w[kVecs];
  gemv_ring::load_norm_weight<kVecs>(a.norm_weight, a.hidden, norm_w);
  pdl_wait();  // residual and norm partials come from the previous kernel; residual_delta was zeroed by it
  stamp(a.trace, kTraceWaited);
  const auto issue_after_wait = [&] {
    for (int g = 0; g < kInFlight; ++g) {
      if (g < prewait_groups) continue;
      if (deferred(g))
        cp_async_commit();
      else
        issue(g);
    }
  };
  if constexpr (!kL2First) issue_after_wait();

  // x: the normed input at this thread's columns; kWithO: first the attention output (q_dim == hidden), normed h'
  // after the o rows and the grid-wide wait; kL2First: the norm's loads, then the ring's copies, then its arithmetic.
  float x[kVecs][8];
  if constexpr (kL2First) {
    gemv_ring::normed_from_partials_loads_first<kVecs>(a.residual, a.norm_partials, a.partial_count, norm_w, a.eps,
                                                       a.hidden, x, issue_after_wait);
  } else if constexpr (kWithO) {
    // The residual and delta rows of this CTA's o rows now, while little is in flight to this SM (the delta rows
    // are zeroed for this launch's own reductions, which come after the grid-wide wait).
    for (int64_t i = threadIdx.x; i < rows_o; i += kThreads) {
      const int64_t r = o0 + i;
      float delta = 0.0f;  // the sum of the copies, in order
      for (int j = 0; j < a.delta_copies; ++j) delta += __ldcg(a.residual_delta + j * a.hidden + r);
      for (int j = 0; j < a.delta_copies; ++j) a.residual_delta[j * a.hidden + r] = 0.0f;
      h_s[i] = bf16_round(__bfloat162float(a.o_residual[r]) + bf16_round(delta));
    }
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int64_t col = threadIdx.x + int64_t(v) * kThreads;
#pragma unroll
      for (int e = 0; e < 8; ++e) x[v][e] = 0.0f;
      if (col < vecs) bf16x8_to_float(reinterpret_cast<const Bf16x8*>(a.attention_out)[col], x[v]);
    }
  } else {
    gemv_ring::normed_from_partials<kVecs>(a.residual, a.norm_partials, a.partial_count, norm_w, a.eps, a.hidden,
                                           x);
  }
  float down[kVecs][8] = {};
  // kNext, kWithO: the grid-wide wait. PRECOND: all CTAs resident (supports()); each thread's writes fenced.
  const auto wait_for_all = [&] {
    __syncthreads();
    if (threadIdx.x == 0) {
      atomicAdd(a.sync, 1u);
      spin_until_at_least(a.sync, uint32_t(ctas));
      stamp(a.trace, kTraceAllIn);
      // The last CTA past the wait puts both words back to zero for the next launch (no CTA still polls).
      if (atomicAdd(a.sync + 1, 1u) == uint32_t(ctas) - 1) {
        atomicExch(a.sync, 0u);
        atomicExch(a.sync + 1, 0u);
      }
    }
    __syncthreads();
  };
  // kNext: every CTA's partial in the delta before any CTA reads it.
  const auto add_partial_and_wait_for_all = [&] {
    stamp(a.trace, kTraceDown);
    add_down_partial<kVecs>(down, a, vecs);
    __threadfence();  // this thread's reductions before the CTA's arrival below
    wait_for_all();
  };
  // kWithO, once every o row of this CTA is multiplied: h' of its rows (rounded as qkv_attention_o rounds), Σ h'²
  // over them, the grid-wide wait, the deferred phase-A groups, then x = the normed h' (every CTA sums the partials
  // in the same order: the same bits everywhere).
  const auto o_rows_then_norm = [&] {
    if constexpr (kWithO) {
      __syncthreads();  // every warp's o sums in dots
      float sq = 0.0f;
      for (int64_t i = threadIdx.x; i < rows_o; i += kThreads) {
        float y = 0.0f;
        for (int ww = 0; ww < kWarps; ++ww) y += dots[ww * dots_stride + i];  // a fixed order
        const float updated = bf16_round(h_s[i] + bf16_round(y));
        a.o_residual[o0 + i] = __float2bfloat16_rn(updated);
        sq += updated * updated;
      }
      // (block_sum's barriers also put every thread's h' rows and zeroed delta rows before thread 0's fence.)
      const float total = block_sum(sq, warp_sq);
      stamp(a.trace, kTraceDown);
      if (threadIdx.x == 0) {
        if (int64_t(blockIdx.x) < o_ctas) a.o_partials[blockIdx.x] = total;
        __threadfence();  // the CTA's writes before its arrival
      }
      wait_for_all();
      float sum_sq = 0.0f;
      for (int64_t i = lane; i < o_ctas; i += kWarpSize) sum_sq += __ldcg(a.o_partials + i);
      sum_sq = warp_sum(sum_sq);
      float hn[kVecs][8];
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const int64_t col = threadIdx.x + int64_t(v) * kThreads;
#pragma unroll
        for (int e = 0; e < 8; ++e) hn[v][e] = 0.0f;
        if (col < vecs) {
          const uint4 packed = __ldcg(reinterpret_cast<const uint4*>(a.o_residual) + col);
          bf16x8_to_float(reinterpret_cast<const Bf16x8&>(packed), hn[v]);
        }
      }
      gemv_ring::scale_normed<kVecs>(hn, norm_w, 1.0f / sqrtf(sum_sq / float(a.hidden) + a.eps), a.hidden, x);
      stamp(a.trace, kTraceNormed);
      // The deferred groups once h' is in registers (their copies would have queued ahead of its loads).
      for (int64_t g = groups_o + o_ahead; g < groups_o + kInFlight; ++g) issue(g);
    }
  };

  for (int64_t g = 0; g < groups; ++g) {
    if (kWithO && g == groups_o) o_rows_then_norm();
    const int64_t first = group_first(g), end = group_end(g);
    uint4 w[kGroup][kVecs];
    ring.read(g, first, end, w, g < bulk_groups ? &prologue_bars[g] : nullptr);
    if (!kFull) issue(g + kStages - 1);  // into the stage group g - 1 used: this thread has read its pieces of it
    // v4: every row of this CTA is now in flight; its share of the next kernel's weights goes to L2 behind them.
    if (g == (groups > kInFlight ? groups - kInFlight : 0) && warp == 0)
      prefetch_share_l2(a.l2_prefetch, a.l2_prefetch_bytes, lane);
    if (g == groups_a) {
      stamp(a.trace, kTraceGateUp);
      swiglu_block(dots, dots_stride, features, act_s);
    }
    if (kNext && g == groups_ab) {
      // Every down row multiplied: add the partial, wait for every CTA's, then norm the new hidden state.
      uint4 next_norm_w[kVecs];
      gemv_ring::load_norm_weight<kVecs>(a.next_norm_weight, a.hidden, next_norm_w);
      add_partial_and_wait_for_all();
      gemv_ring::normed_with_delta<kVecs>(a.residual, a.residual_delta, a.delta_copies, next_norm_w, a.eps, a.hidden,
                                          warp_sq, x);
      stamp(a.trace, kTraceNormed);
    }
    if (g < groups_a || (kNext && g >= groups_ab)) {
      const float total = gemv_ring::dot_group<kVecs, kGroup>(w, x);
      const int64_t row = first + warp_sum_transposed_index<kGroup>(lane);
      // Phases O, A and C each use the warp-sum buffer from column 0 (phase A's sums overwrite O's after the
      // grid-wide wait; the SwiGLU read phase A's long before phase C).
      const int64_t slot = g < groups_o ? row : g < groups_a ? row - rows_o : row - rows_ab;
      if (lane % (kWarpSize / kGroup) == 0 && row < end) dots[warp * dots_stride + slot] = total;
    } else {
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        add_scaled_row<kVecs>(down, w[j], first + j < end ? act_s[first + j - rows_a] : 0.0f);
    }
    if constexpr (kFull) {
      asm volatile("" ::: "memory");  // this group's shared loads stay before the copies that reuse its stage
      if (deferred(g + kStages))
        cp_async_commit();  // its place in the count: issued after the grid-wide wait
      else
        issue(g + kStages);  // into the stage this group came from: its pieces are multiplied
    }
  }
  cp_async_wait<0>();
  if (kWithO && groups == groups_o) o_rows_then_norm();  // no MLP rows here: the wait in the loop never ran
  stamp(a.trace, kTraceRowsDone);
  if constexpr (kNext) {
    if (groups == groups_ab) {  // no next-layer rows here, so the wait in the loop never ran: arrive all the same
      add_partial_and_wait_for_all();
      stamp(a.trace, kTraceEnd);
      return;
    }
    // The next layer's QKV outputs: the 16 warp sums of each row, in a fixed order.
    __syncthreads();
    for (int64_t i = threadIdx.x; i < next_rows; i += kThreads) {
      float y = 0.0f;
      for (int ww = 0; ww < kWarps; ++ww) y += dots[ww * dots_stride + i];
      a.next_out[n0 + i] = __float2bfloat16_rn(y);
    }
  } else {
    if (!kWithO) stamp(a.trace, kTraceDown);  // (v7 stamps its grid-wide wait's arrival)
    add_down_partial<kVecs>(down, a, vecs);
  }
  stamp(a.trace, kTraceEnd);
}

// ---- v10_mlp_split_down_lean: v5's work and ring in a kernel with nothing else --------------------------------------
// Why: bench/ring_stream measured (H200, isolated launches of Qwen3-8B's 302 MB, ITERATIONS.md session 11) v5 at
// 78.5-79.6 us a launch where the same ring and walk with only dot products take 69.0 us (96% of the grid-stride
// read in the same run), and a lean kernel with v5's norm, SwiGLU point, down rows and reductions 74.2-74.7 us. v5
// carries the o phase, the next-layer phase, TMA prologues, L2 hints and their runtime branches in its loop
// (128 registers, the cap at 512 threads). This is the same arithmetic in the same order (the same bits as v5)
// with only the MLP's two phases: gate|up rows (dot products) then down_projᵀ rows (scaled adds). Rows a thread:
// one 16-byte piece (hidden / 8 <= 512); other shapes run v5.
constexpr int kLeanGroup = 8, kLeanStages = 3;  // v10's ring: 8 rows (64 KB) a stage, every stage in flight
using LeanRing = gemv_ring::Ring<1, kLeanGroup, kLeanStages, kLeanStages>;

// The bytes of a lean kernel's ring of `stages` stages of `group` rows (a 16-byte piece of each a thread): the
// kernel's offset of its warp sums and lean_smem_for's first term, one formula for both.
__host__ __device__ constexpr size_t lean_ring_bytes(int stages, int group) {
  return size_t(stages) * group * kThreads * 16;
}

// How a CTA of the lean kernel finds its features: v10 even blocks (norm_mlp_feature_begin), v11 weighted ones
// (norm_mlp_feature_begin_skewed), v12 even blocks with a tail handed between the CTAs of a pair (pair_transfer).
enum LeanBlocks { kEvenBlocks, kSkewedBlocks, kPairedBlocks };

// v12: what CTA `self` and its partner (the CTA whose block index mirrors its own) move between them, from the
// "waited" stamps the previous launch left (NormMlpArgs::lateness_in): the one that waited later gives the last
// d of its features to the other, d = its features x (stamp difference in us) x permille_per_us / 1000, at most
// max_features. Returns d > 0 where self takes, -d where it gives. Both CTAs of a pair compute it from the same
// two stamps, so they agree. PRECOND: lateness_in complete (read after the PDL wait).
__device__ __forceinline__ int64_t pair_transfer(uint64_t self_stamp, uint64_t partner_stamp, int64_t self_features,
                                                 int64_t partner_features, int64_t permille_per_us,
                                                 int64_t max_features) {
  if (self_stamp == partner_stamp) return 0;
  const bool self_later = self_stamp > partner_stamp;
  const uint64_t apart = self_later ? self_stamp - partner_stamp : partner_stamp - self_stamp;
  const int64_t apart_ns = int64_t(apart < 10000000ull ? apart : 10000000ull);  // (10 ms: stale stamps)
  const int64_t giver_features = self_later ? self_features : partner_features;
  const int64_t d = min(min(max_features, giver_features),
                        (giver_features * apart_ns * permille_per_us + 500000) / 1000000);
  return self_later ? -d : d;
}

// v11 (kSkewedBlocks): the same kernel on norm_mlp_feature_begin_skewed's blocks. v12 (kPairedBlocks): on v10's
// blocks, whose CTA pairs move the tail of the later one's block to the other (pair_transfer); its CTAs write
// their own "waited" stamps for the next launch. A CTA's feature list is then its own block less what it gives,
// then what it takes (the partner's last features): rows are the list's gate rows, up rows, down rows as in v10.
// Before the PDL wait v12 issues only ring groups that are gate rows of its own block whatever the transfer.
// Why (ITERATIONS.md session 17): in v10's trace at prompt 320 the CTAs that find an SM after the attention's split
// CTAs leave (the last ~60 indices) pass the PDL wait 1-2.5 us after the others and end 2.3-4 us after them, the
// same CTAs every layer. Measured (H200, Qwen3-8B): v11 with its last 52 CTAs 5% lighter 1.005x of v10 at prompt
// 320 on one lease, 1.001x on another (3.5% of the late CTAs' work, ~2.3 us of it, moved their ends by only
// ~0.8 us: the tail's HBM is not idle, the next QKV GEMV's CTAs stream their first rows in it). v12 0.95x, and
// with nothing handed over 0.95x too; its first form (thread 0 loading the stamps, a barrier before the loop)
// 0.85x. v12 with nothing to hand over executes 19% more instructions than v10 (54.3 M warp instructions a
// launch against 45.5 M, Nsight Compute), and v10 is close to the SMs' issue rate: hence v13 below.
template <int kBlocks>
__global__ void __launch_bounds__(kThreads, 1) mlp_lean_kernel(NormMlpArgs a, int prewait_groups) {
  constexpr int kGroup = kLeanGroup, kStages = kLeanStages;
  constexpr bool kSkewed = kBlocks == kSkewedBlocks, kPaired = kBlocks == kPairedBlocks;
  using Ring = LeanRing;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  pdl_launch_dependents();
  stamp(a.trace, kTraceStart);
  const int64_t ctas = gridDim.x;
  const auto begin = [&](int64_t c) {
    return kSkewed ? norm_mlp_feature_begin_skewed(c, ctas, a.inter, a.skew_from, a.skew_permille)
                   : feature_begin(c, ctas, a.inter);
  };
  const int64_t f0 = begin(blockIdx.x);
  int64_t features = begin(blockIdx.x + 1) - f0;  // v12: its own block until the transfer is known
  int64_t kept = features, taken_f0 = 0;          // v12: features [kept, features) are the partner's from taken_f0
  const int64_t dots_stride =
      2 * (kSkewed   ? norm_mlp_max_features_skewed(ctas, a.inter, a.skew_from, a.skew_permille)
           : kPaired ? max_features(ctas, a.inter) + a.lateness_max_features
                     : max_features(ctas, a.inter));
  const Ring ring{reinterpret_cast<uint4*>(smem_raw), a.hidden / 8, make_evict_first_policy()};
  float* dots = reinterpret_cast<float*>(smem_raw + Ring::kBytes);  // (kWarps, dots_stride)
  float* act_s = dots + kWarps * dots_stride;                         // (features)
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  // Rows: [0, 2F) gate then up rows (phase A), [2F, 3F) down_projᵀ rows (phase B); a group never straddles them.
  int64_t rows_a = 2 * features, rows = 3 * features;
  int64_t groups_a = (rows_a + kGroup - 1) / kGroup;
  int64_t groups = groups_a + (features + kGroup - 1) / kGroup;
  const auto group_first = [&](int64_t g) { return g < groups_a ? g * kGroup : rows_a + (g - groups_a) * kGroup; };
  const auto group_end = [&](int64_t g) { return g < groups_a ? rows_a : rows; };
  const auto row_ptr = [&](int64_t r) {
    if constexpr (kPaired) {
      const int64_t i = r < features ? r : r < rows_a ? r - features : r - rows_a;  // the row's place in the list
      const int64_t f = i < kept ? f0 + i : taken_f0 + i - kept;
      const bf16* p =
          r < rows_a ? a.w_gate_up + (r < features ? f : a.inter + f) * a.hidden : a.w_down_t + f * a.hidden;
      return reinterpret_cast<const uint4*>(p);
    } else {
      const bf16* p = r < features ? a.w_gate_up + (f0 + r) * a.hidden
                      : r < rows_a ? a.w_gate_up + (a.inter + f0 + r - features) * a.hidden
                                   : a.w_down_t + (f0 + r - rows_a) * a.hidden;
      return reinterpret_cast<const uint4*>(p);
    }
  };
  const auto issue = [&](int64_t g) {  // past the last group: an empty cp.async group keeps the count
    if (g < groups)
      ring.issue(g, group_first(g), group_end(g), row_ptr);
    else
      ring.issue(g, 0, 0, row_ptr);
  };
  // v12: the first groups' 8 rows are gate rows of this block's own features whatever it gives (own_gate_groups);
  // the transfer is applied (settle) before the first issue past them, when the stamps loaded after the wait are
  // back: every thread loads them and computes the same transfer, so no barrier holds the CTA.
  const int64_t own_gate_groups =
      (features > a.lateness_max_features ? features - a.lateness_max_features : 0) / kGroup;
  const int before_wait = kPaired && own_gate_groups < min(prewait_groups, kStages) ? int(own_gate_groups)
                                                                                     : min(prewait_groups, kStages);
  for (int g = 0; g < before_wait; ++g) issue(g);
  uint4 norm_w[1];
  gemv_ring::load_norm_weight<1>(a.norm_weight, a.hidden, norm_w);
  pdl_wait();  // residual and norm partials come from the previous kernel; residual_delta was zeroed by it
  stamp(a.trace, kTraceWaited);
  [[maybe_unused]] uint64_t self_stamp = 0, partner_stamp = 0;
  [[maybe_unused]] const int64_t partner = ctas - 1 - blockIdx.x;
  if constexpr (kPaired) {
    self_stamp = __ldcg(a.lateness_in + blockIdx.x);
    partner_stamp = __ldcg(a.lateness_in + partner);
    if (threadIdx.x == 0) a.lateness_out[blockIdx.x] = global_timer_ns();  // for the next launch
  }
  [[maybe_unused]] bool settled = false;
  const auto settle = [&] {
    if constexpr (kPaired) {
      if (settled) return;
      settled = true;
      const int64_t transfer = partner == blockIdx.x ? 0
                                                     : pair_transfer(self_stamp, partner_stamp, features,
                                                                     begin(partner + 1) - begin(partner),
                                                                     a.lateness_permille_per_us,
                                                                     a.lateness_max_features);
      if (transfer < 0) {
        kept = features + transfer;
        features = kept;
      } else {
        taken_f0 = begin(partner + 1) - transfer;
        features += transfer;
      }
      rows_a = 2 * features;
      rows = 3 * features;
      groups_a = (rows_a + kGroup - 1) / kGroup;
      groups = groups_a + (features + kGroup - 1) / kGroup;
    }
  };
  if (before_wait < kStages) settle();  // (v12 on a block too small for the ring's first groups)
  for (int g = before_wait; g < kStages; ++g) issue(g);
  float x[1][8];
  gemv_ring::normed_from_partials<1>(a.residual, a.norm_partials, a.partial_count, norm_w, a.eps, a.hidden, x);
  float down[1][8] = {};
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = group_first(g), end = group_end(g);
    uint4 w[kGroup][1];
    ring.read(g, first, end, w);
    if (g == groups_a) {
      stamp(a.trace, kTraceGateUp);
      swiglu_block(dots, dots_stride, features, act_s);
    }
    if (g < groups_a) {
      const float total = gemv_ring::dot_group<1, kGroup>(w, x);
      const int64_t row = first + warp_sum_transposed_index<kGroup>(lane);
      if (lane % (kWarpSize / kGroup) == 0 && row < end) dots[warp * dots_stride + row] = total;
    } else {
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        add_scaled_row<1>(down, w[j], first + j < end ? act_s[first + j - rows_a] : 0.0f);
    }
    asm volatile("" ::: "memory");  // this group's shared loads stay before the copies that reuse its stage
    if (g + kStages >= own_gate_groups) settle();  // (v12: the next group's rows may move with the transfer)
    issue(g + kStages);                            // into the stage this group came from: its pieces are multiplied
  }
  cp_async_wait<0>();
  stamp(a.trace, kTraceRowsDone);
  stamp(a.trace, kTraceDown);
  add_down_partial<1>(down, a, a.hidden / 8);
  stamp(a.trace, kTraceEnd);
}

// ---- v13_mlp_split_down_lean_loop: v10's work in fewer instructions ---------------------------------------------
// Why: Nsight Compute over one v10 launch in the decode step (ITERATIONS.md session 17): 45.5 M warp instructions
// for 302 MB, ~77 a thread for each 16 bytes of weights, of which FFMA 10.7%; one instruction issued every 1.5
// cycles a scheduler (4 warps each), so the launch is close to issue-bound, and v12's 19% more instructions cost 5.5%
// of its time. Most of the rest is the ring's bookkeeping: every read checks each row and piece against the bounds
// and zero-fills, every copy recomputes its row's 64-bit address through the gate / up / down choice (a group of 8
// rows may straddle the gate and up rows), and loop arithmetic in 64 bits. v13 does v10's arithmetic with the
// hidden size fixed at compile time (a row is one 16-byte piece a thread), groups that never straddle (the CTA's
// gate rows, then its up rows, then its down rows, each in groups of 8 features), a group's rows addressed from one
// pointer by constant offsets, the stage index carried instead of computed, and the bounds handled only in a
// phase's last group. The dot products and sums are v10's, row for row; a gate or up row may sit at another place
// of its group than in v10, so warp_sum_transposed may add its lanes in another order (a few fp32 ulps).
constexpr int kLeanLoopHidden = 4096;
// v14_mlp_split_down_batched: the same kernel for kTokens tokens decoded together (NormMlpArgs::rows), their inputs
// normed by the caller (NormMlpArgs::normed_input). Every weight piece is read from the ring and converted once and
// multiplied by each token's input: the batched decode layer reads the MLP's 302 MB once for both tokens, in one
// launch instead of gate|up, SwiGLU, down and the residual add (four). The warp sums of the gate and up rows take
// (kTokens, kWarps, 2 x features) floats of shared memory beside the 192 KB ring: 2 tokens fit at Qwen3-8B's shape
// (217 KB), 3 do not. With two tokens the ring holds 6 groups of 4 rows instead of 3 of 8 (as many bytes, all in
// flight): a thread then holds 4 rows' pieces, 8 dot products and 8 activations at a time rather than twice as
// many. Why: with groups of 8, two tokens' inputs and outputs need more than the 128 registers a thread has at 512
// threads, and its spills (64 bytes a thread) went to L2 (the ring leaves ~10 KB of L1): 144.6 us a launch in the
// step, against 82.5 for the two GEMVs it replaces (ITERATIONS.md session 18).
constexpr int kLeanLoopMaxTokens = 2;
constexpr int kLeanBatchedGroup = 4, kLeanBatchedStages = 6;

// kTokens tokens; kNormedInput: their inputs come normed (v14) rather than from the residual and its norm partials
// (v13, one token).
// kPaced (v15): the groups before the PDL wait go out NormMlpArgs::prewait_window at a time (0: 1), a thread
// issuing the next once its oldest has landed (as norm_gemv v22's).
// kLate (v16, with kPaced, one token from the residual): the CTAs from NormMlpArgs::late_cta_from on
// (gemv_ring::resident_late) issue late_prewait_groups before the wait; every CTA issues its other first groups once
// the norm's loads are sent (normed_from_partials_loads_first, at most kPartialsPerLane x 32 partials: the same
// bits).
// kTouchPages (v17, with kPaced, one token from the residual): before the PDL wait, lanes of warp 0 prefetch into
// L2 one line of each page the CTA touches after it (the residual, the norm partials, the delta copies), so that the
// SM's address translations for them are warm when the norm's loads go out.
// kRingGroup, kRingStages (v18, nonzero): a ring of that many stages of that many rows instead of the version's.
// kHandoff (v19): counter hand-offs (kernels/common/handoff.cuh) where NormMlpArgs sets them: the previous launch's
// count (handoff) in place of the PDL wait, and once its reductions are sent the CTA's count for the next launch
// (handoff_signal).
template <int kHidden, int kTokens = 1, bool kNormedInput = false, bool kPaced = false, bool kLate = false,
          bool kTouchPages = false, int kRingGroup = 0, int kRingStages = 0, bool kHandoff = false>
__device__ __forceinline__ void mlp_lean_loop(NormMlpArgs a, int prewait_groups) {
  static_assert(!kLate || (kPaced && kTokens == 1 && !kNormedInput), "v16: v15's kernel");
  constexpr int kGroup = kRingGroup > 0 ? kRingGroup : kTokens == 1 ? kLeanGroup : kLeanBatchedGroup;
  constexpr int kStages = kRingStages > 0 ? kRingStages : kTokens == 1 ? kLeanStages : kLeanBatchedStages;
  constexpr size_t kRingBytes = lean_ring_bytes(kStages, kGroup);
  static_assert(kRingGroup > 0 || kRingBytes == LeanRing::kBytes, "the ring's bytes as lean_smem_for's");
  constexpr int kSums = kGroup * kTokens;  // a group's dot products: its rows x the tokens
  static_assert(kHidden / 8 == kThreads, "one 16-byte piece of a row a thread");
  static_assert(kTokens == 1 || kNormedInput, "several tokens only with normed inputs");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  pdl_launch_dependents();
  stamp(a.trace, kTraceStart);
  const int64_t f0 = feature_begin(blockIdx.x, gridDim.x, a.inter);
  const int features = int(feature_begin(blockIdx.x + 1, gridDim.x, a.inter) - f0);
  const int phase_groups = (features + kGroup - 1) / kGroup;  // groups of gate rows; as many of up and of down rows
  const int groups = 3 * phase_groups;
  const int dots_stride = 2 * int(max_features(gridDim.x, a.inter));
  uint4* const ring = reinterpret_cast<uint4*>(smem_raw) + threadIdx.x;  // this thread's piece of stage 0, row 0
  float* dots = reinterpret_cast<float*>(smem_raw + kRingBytes);  // (kTokens, kWarps, dots_stride)
  float* act_s = dots + kTokens * kWarps * dots_stride;            // (kTokens, dots_stride / 2)
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const uint64_t policy = make_evict_first_policy();
  // This thread's piece of the first row of each phase: gate rows, up rows, down_projᵀ rows of the CTA's features.
  const bf16* const gate_rows = a.w_gate_up + f0 * kHidden + threadIdx.x * 8;
  const bf16* const up_rows = gate_rows + a.inter * kHidden;
  const bf16* const down_rows = a.w_down_t + f0 * kHidden + threadIdx.x * 8;
  const auto phase_of = [&](int g) { return g >= 2 * phase_groups ? 2 : g >= phase_groups ? 1 : 0; };
  // This thread's piece of row `first` of phase `phase`.
  const auto piece_of_row = [&](int phase, int first) {
    return (phase == 0 ? gate_rows : phase == 1 ? up_rows : down_rows) + int64_t(first) * kHidden;
  };
  // Group g into stage `stage`: rows [8q, min(8q + 8, features)) of phase phase_of(g), q = g - phase * phase_groups.
  // Past the last group an empty cp.async group keeps the count.
  const auto issue = [&](int g, int stage) {
    if (g < groups) {
      const int phase = phase_of(g), first = (g - phase * phase_groups) * kGroup;
      const bf16* src = piece_of_row(phase, first);
      gemv_ring::copy_rows<kGroup, kHidden>(ring + stage * (kGroup * kThreads), src, min(kGroup, features - first),
                                            policy);
    }
    cp_async_commit();
  };
  const bool late = kLate && gemv_ring::resident_late(a.late_cta_from);
  const int before_wait = min(late ? a.late_prewait_groups : prewait_groups, kStages);
  gemv_ring::issue_first_groups<kPaced>(before_wait, a.prewait_window > 0 ? int(a.prewait_window) : 1, issue);
  // v18 (kRingGroup set): the beside_l2_groups groups past the ring's first kStages into L2, a lane a group, one
  // bulk prefetch of its rows each, while the CTA waits beside the attention's for its release: HBM streams them
  // while the attention runs, and the loop reads them from L2.
  if constexpr (kRingGroup > 0) {
    const int l2_end = min(groups, kStages + int(a.beside_l2_groups));
    if (warp == 0)
      for (int g = kStages + lane; g < l2_end; g += kWarpSize) {
        const int phase = phase_of(g), first = (g - phase * phase_groups) * kGroup;
        const bf16* row = piece_of_row(phase, first) - threadIdx.x * 8;  // (the row's start, not this lane's piece)
        prefetch_l2_bulk(row, uint32_t(min(kGroup, features - first) * kHidden * 2));
      }
  }
  uint4 norm_w[1];
  if constexpr (!kNormedInput) gemv_ring::load_norm_weight<1>(a.norm_weight, a.hidden, norm_w);
  if constexpr (kTouchPages) {
    static_assert(kPaced && kTokens == 1 && !kNormedInput, "v17: v15's kernel");
    if (warp == 0) {
      const void* page = nullptr;
      if (lane == 0)
        page = a.residual;
      else if (lane == 1)
        page = a.norm_partials;
      else if (lane - 2 < a.delta_copies)
        page = a.residual_delta + (lane - 2) * a.hidden;
      if (page != nullptr) prefetch_l2_line(page);
    }
  }
  [[maybe_unused]] uint32_t passed_before = 0;
  if constexpr (kHandoff) {
    // The attention launch's count (the residual, its norm partials and the zeroed delta), or the PDL wait.
    passed_before = handoff_wait(a.handoff, a.handoff_producers, a.handoff_poll_ns);
  } else {
    pdl_wait();  // the input (residual and norm partials, or normed_input) comes from the previous kernel
  }
  stamp(a.trace, kTraceWaited);
  if (!kLate)
    for (int g = before_wait; g < kStages; ++g) issue(g, g);
  float x[kTokens][8];
  if constexpr (kLate) {
    gemv_ring::normed_from_partials_loads_first<1>(a.residual, a.norm_partials, a.partial_count, norm_w, a.eps,
                                                   a.hidden, x, [&] {
                                                     for (int g = before_wait; g < kStages; ++g) issue(g, g);
                                                   });
  } else if constexpr (kNormedInput) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t)
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(a.normed_input + t * kHidden)[threadIdx.x], x[t]);
  } else {
    gemv_ring::normed_from_partials<1>(a.residual, a.norm_partials, a.partial_count, norm_w, a.eps, a.hidden, x);
  }
  float down[kTokens][8] = {};
  for (int g = 0, stage = 0; g < groups; ++g, stage = stage == kStages - 1 ? 0 : stage + 1) {
    const int phase = phase_of(g), first = (g - phase * phase_groups) * kGroup;
    const int rows = min(kGroup, features - first);
    cp_async_wait<kStages - 1>();
    uint4 w[kGroup][1];
    gemv_ring::read_rows<kGroup>(ring + stage * (kGroup * kThreads), rows, w);  // (rows < kGroup: a phase's last group)
    if (g == 2 * phase_groups) {
      stamp(a.trace, kTraceGateUp);
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
        swiglu_block(dots + t * kWarps * dots_stride, dots_stride, features, act_s + t * (dots_stride / 2));
    }
    if (phase < 2) {
      const float total = gemv_ring::dot_group_tokens<kTokens, kGroup>(w, x);
      const int sum = warp_sum_transposed_index<kSums>(lane);  // this lane's (token, row) of the group
      const int token = kTokens == 1 ? 0 : sum / kGroup, row = first + (kTokens == 1 ? sum : sum % kGroup);
      if (lane % (kWarpSize / kSums) == 0 && row < features)
        dots[(token * kWarps + warp) * dots_stride + phase * features + row] = total;
    } else {
      float act[kGroup][kTokens];
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
#pragma unroll
        for (int t = 0; t < kTokens; ++t) act[j][t] = j < rows ? act_s[t * (dots_stride / 2) + first + j] : 0.0f;
#pragma unroll
      for (int j = 0; j < kGroup; ++j) add_scaled_row_tokens<kTokens>(down, w[j][0], act[j]);
    }
    asm volatile("" ::: "memory");  // this group's shared loads stay before the copies that reuse its stage
    issue(g + kStages, stage);      // into the stage this group came from: its pieces are multiplied
  }
  cp_async_wait<0>();
  stamp(a.trace, kTraceRowsDone);
  stamp(a.trace, kTraceDown);
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
    add_down_partial<1>(reinterpret_cast<const float(&)[1][8]>(down[t]), a, kHidden / 8, t, kTokens);
  stamp(a.trace, kTraceEnd);
  // Every thread's reductions are issued before handoff_finish's barrier, so a CTA that reads the full count sees
  // the whole delta.
  if constexpr (kHandoff) handoff_finish(a.handoff, passed_before, a.handoff_signal);
}

// v13-v17, v19: mlp_lean_loop on the whole SM (512 threads, up to 128 registers a thread).
template <int kHidden, int kTokens = 1, bool kNormedInput = false, bool kPaced = false, bool kLate = false,
          bool kTouchPages = false, bool kHandoff = false>
__global__ void __launch_bounds__(kThreads, 1) mlp_lean_loop_kernel(NormMlpArgs a, int prewait_groups) {
  mlp_lean_loop<kHidden, kTokens, kNormedInput, kPaced, kLate, kTouchPages, 0, 0, kHandoff>(a, prewait_groups);
}

// ---- v18_mlp_split_down_beside: v15 on the part of an SM a qkv_attention_o CTA leaves -----------------------------
// Why: the attention launch's CTAs hold every SM's shared memory (192 KB) until their o phase ends, so the next
// MLP's CTAs become resident only as they leave, and then fill their 192 KB rings while HBM idles (session 22's PM
// sampling: ~6 us a layer at 11-30% of the DRAM's peak from the splits' tail to the MLP's first streaming sample;
// session 24: the layer waits for the attention CTAs' exit). A CTA that fits beside the attention's becomes resident
// as soon as the attention launch triggers its dependents (v25: at its start; v32: once every split is in), and has
// its ring in shared memory when the attention launch ends; with both kernels under one L1 / shared-memory split of
// the SM (EngineOptions::smem_carveout 100: without it the driver picks a split per kernel and none sat beside).
// Measured (H200, ITERATIONS.md session 26): 0.97x of the default with 4 stages beside the attention at 83 KB, 0.85x-
// 0.88x with 2-3 (too few bytes in flight): the attention at 83 KB ends ~5 us later, and full rings at the release
// save the MLP ~0.5 us. Room: an SM has 228 KB of shared memory and 64 K registers. The attention CTA (v25: 256
// threads at 138 registers, 144 allocated: 36 K) leaves 28 K registers, 56 a thread of 512: hence rows in groups of
// 4 (v15's 8 need 32 registers for the group alone) and a ring of beside_stages x 32 KB beside ~13 KB of warp sums
// (4 stages: the attention CTA keeps 83 KB, 3 staged o rows; 3 stages: 115 KB, 7 rows). The same dot products and
// sums as v15, row for row, in groups of 4 (warp_sum_transposed adds a row's lanes in another order).
constexpr int kBesideGroup = 4, kBesideDefaultStages = 4, kBesideMaxStages = 5;
constexpr int kBesideRegisters = 56;

template <int kStages>
__global__ void __maxnreg__(kBesideRegisters) mlp_beside_kernel(NormMlpArgs a, int prewait_groups) {
  mlp_lean_loop<kLeanLoopHidden, 1, false, true, false, false, kBesideGroup, kStages>(a, prewait_groups);
}

// Ring groups a CTA issues before the PDL wait: NormMlpArgs::prewait_rows rounded up to whole groups of
// group_rows, or the version's default.
int prewait_groups_for(const NormMlpArgs& a, int group_rows, int default_groups) {
  return a.prewait_rows >= 0 ? (a.prewait_rows + group_rows - 1) / group_rows : default_groups;
}

int64_t ctas_for(const NormMlpArgs& a) {
  return a.ctas > 0 ? int64_t(a.ctas) : int64_t(device_sm_count());
}

// The warp-sum buffer (kWarps, stride) and the SwiGLU output of a CTA, in bytes.
size_t smem_for(const NormMlpArgs& a) {
  const int64_t ctas = ctas_for(a);
  const int64_t o_ctas = a.o_ctas > 0 ? int64_t(a.o_ctas) : ctas;
  const int64_t stride =
      std::max({2 * max_features(ctas, a.inter), a.w_next ? max_features(ctas, a.next_rows) : int64_t(0),
                a.w_o ? max_features(o_ctas, a.hidden) : int64_t(0)});
  return size_t(kWarps * stride + max_features(ctas, a.inter) + (a.w_o ? max_features(o_ctas, a.hidden) : 0)) *
         sizeof(float);
}

template <int kVecs, int kDepth>
void launch_shape(const NormMlpArgs& a, cudaStream_t stream) {
  const auto kernel = mlp_split_down_kernel<kVecs, kDepth>;
  const size_t smem = smem_for(a);
  if (smem > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // Default: half the ring before the PDL wait (the *_early GEMVs showed that loading much more while the previous
  // kernel drains slows that kernel down more than it helps this one).
  const int prewait = a.prewait_rows >= 0 ? a.prewait_rows : kDepth / 2;
  launch(kernel, dim3(unsigned(ctas_for(a))), dim3(kThreads), smem, stream, a, prewait);
}

template <int kVecs, int kGroup, int kStages>
size_t ring_smem_for(const NormMlpArgs& a) {
  return gemv_ring::Ring<kVecs, kGroup, kStages>::kBytes + smem_for(a);
}

template <int kVecs, int kGroup, int kStages, bool kNext, bool kFull = false, bool kTma = false, bool kWithO = false,
          bool kLead = false, bool kL2First = false>
void launch_ring_shape(const NormMlpArgs& a, cudaStream_t stream) {
  const auto kernel = mlp_split_down_ring_kernel<kVecs, kGroup, kStages, kNext, kFull, kTma, kWithO, kLead, kL2First>;
  const size_t smem = ring_smem_for<kVecs, kGroup, kStages>(a);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // Default: every group the ring holds in flight before the PDL wait (prewait_rows counts rows, rounded up to
  // whole groups). H200 at context 128 (v2): 2 groups 4.247 ms a step, 1 group 4.266, none 4.297.
  // kL2First (v9): none, its first rows go to L2 instead.
  const int prewait_groups = prewait_groups_for(a, kGroup, kL2First ? 0 : kFull ? kStages : kStages - 1);
  launch(kernel, dim3(unsigned(ctas_for(a))), dim3(kThreads), smem, stream, a, prewait_groups);
}

// The ring kernel at the piece count the row needs (kGroup halves where a thread holds two pieces of a row).
template <bool kNext, bool kFull = false, bool kTma = false, bool kWithO = false, bool kLead = false,
          bool kL2First = false>
void launch_ring(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.hidden / 8 <= kThreads)
    launch_ring_shape<1, 8, 3, kNext, kFull, kTma, kWithO, kLead, kL2First>(a, stream);
  else
    launch_ring_shape<2, 4, 3, kNext, kFull, kTma, kWithO, kLead, kL2First>(a, stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t norm_mlp_ctas(const NormMlpArgs& args) { return ctas_for(args); }

bool mlp_split_down_v1_supports(const NormMlpArgs& a);

namespace {

// v1's and v2's checks without the next-layer and o fields.
bool ring_supports(const NormMlpArgs& a) {
  NormMlpArgs mlp_only = a;
  mlp_only.w_next = nullptr;
  mlp_only.w_o = nullptr;
  if (!mlp_split_down_v1_supports(mlp_only)) return false;
  const size_t smem = a.hidden / 8 <= kThreads ? ring_smem_for<1, 8, 3>(a) : ring_smem_for<2, 4, 3>(a);
  return smem <= size_t(device_optin_smem_bytes());
}

// The args without v4's L2 prefetch (a runtime branch of the ring kernel they share): what v2, v5, v6 and v7 launch.
NormMlpArgs without_l2_prefetch(NormMlpArgs a) {
  a.l2_prefetch = nullptr;
  a.l2_prefetch_bytes = 0;
  return a;
}

}  // namespace

bool mlp_split_down_v2_supports(const NormMlpArgs& a) {
  return a.w_next == nullptr && a.w_o == nullptr && ring_supports(a);
}

void launch_mlp_split_down_v2(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<false>(without_l2_prefetch(a), stream);
}

// v5_mlp_split_down_full_ring: v2 with all three stages of the ring in flight (192 KB a CTA, not 128).
bool mlp_split_down_v5_supports(const NormMlpArgs& a) { return mlp_split_down_v2_supports(a); }

void launch_mlp_split_down_v5(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<false, true>(without_l2_prefetch(a), stream);
}

// v6_mlp_split_down_tma: v5 whose groups before the PDL wait are TMA bulk copies (sm_90).
bool mlp_split_down_v6_supports(const NormMlpArgs& a) {
  return device_compute_major() >= 9 && mlp_split_down_v5_supports(a);
}

void launch_mlp_split_down_v6(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<false, true, true>(without_l2_prefetch(a), stream);
}

// v7_mlp_with_o: v5 with the o projection's rows first (NormMlpArgs::w_o), then a grid-wide wait for h'.
bool mlp_with_o_v7_supports(const NormMlpArgs& a) {
  if (a.w_o == nullptr || a.attention_out == nullptr || a.o_residual == nullptr || a.o_partials == nullptr ||
      a.sync == nullptr || a.w_next != nullptr)
    return false;
  if (a.q_dim != a.hidden || a.o_residual != a.residual || a.o_ctas < 0 || a.o_ctas > ctas_for(a)) return false;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!aligned(a.w_o) || !aligned(a.attention_out) || !aligned(a.o_residual)) return false;
  return ctas_for(a) <= int64_t(device_sm_count()) && ring_supports(a);
}

void launch_mlp_with_o_v7(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<false, true, false, true>(without_l2_prefetch(a), stream);
}

// v8_mlp_split_down_l2_lead: v5 whose first l2_lead_ctas CTAs pull the first l2_lead_bytes of every other CTA's rows
// into L2 before the PDL wait (NormMlpArgs::l2_lead_ctas).
bool mlp_split_down_v8_supports(const NormMlpArgs& a) {
  return device_compute_major() >= 9 && mlp_split_down_v5_supports(a) && a.l2_lead_ctas >= 0 &&
         a.l2_lead_ctas <= ctas_for(a) && a.l2_lead_bytes >= 0 && a.l2_lead_bytes % 16 == 0;
}

void launch_mlp_split_down_v8(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<false, true, false, false, true>(without_l2_prefetch(a), stream);
}

// v9_mlp_split_down_l2_first: v5 whose CTAs pull their own first rows into L2 before the PDL wait instead of into
// the ring, and issue the norm's loads before the ring's first copies (sm_90: bulk L2 prefetches).
bool mlp_split_down_v9_supports(const NormMlpArgs& a) {
  return device_compute_major() >= 9 && mlp_split_down_v5_supports(a) && a.l2_lead_bytes >= 0 &&
         a.partial_count <= int64_t(gemv_ring::kPartialsPerLane) * kWarpSize;
}

void launch_mlp_split_down_v9(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<false, true, false, false, false, true>(without_l2_prefetch(a), stream);
}

// The lean kernel's shared memory where a CTA takes at most `most` features: its ring, then for each of `tokens`
// tokens the warp sums of its gate and up rows (kWarps, 2 most) and its activations (most), as smem_for() counts
// them for one.
size_t lean_smem_for(int64_t most, int64_t tokens = 1, size_t ring_bytes = LeanRing::kBytes) {
  return ring_bytes + size_t(tokens * (kWarps * 2 * most + most)) * sizeof(float);
}

// One of the lean kernels (mlp_lean_kernel, mlp_lean_loop_kernel) on one CTA per SM; group and stages: its ring's.
void launch_lean(void (*kernel)(NormMlpArgs, int), const NormMlpArgs& a, int64_t most, cudaStream_t stream,
                 int64_t tokens = 1, int group = kLeanGroup, int stages = kLeanStages) {
  const size_t smem = lean_smem_for(most, tokens, lean_ring_bytes(stages, group));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // Every group of the ring before the PDL wait by default, as v5.
  const int prewait_groups = prewait_groups_for(a, group, stages);
  launch(kernel, dim3(unsigned(ctas_for(a))), dim3(kThreads), smem, stream, a, prewait_groups);
  CUDA_CHECK_LAUNCH();
}

// v10_mlp_split_down_lean: v5's MLP alone in its own kernel (hidden / 8 <= 512; other shapes: v5).
bool mlp_split_down_v10_supports(const NormMlpArgs& a) { return mlp_split_down_v5_supports(a); }

void launch_mlp_split_down_v10(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.hidden / 8 > kThreads) return launch_mlp_split_down_v5(a, stream);
  launch_lean(mlp_lean_kernel<kEvenBlocks>, a, max_features(ctas_for(a), a.inter), stream);
}

// v11_mlp_split_down_skewed: v10 on weighted feature blocks (NormMlpArgs::skew_from, skew_permille; hidden / 8 <=
// 512), its smem sized for the largest block.
int64_t skewed_most(const NormMlpArgs& a) {
  return norm_mlp_max_features_skewed(ctas_for(a), a.inter, a.skew_from, a.skew_permille);
}

bool mlp_split_down_v11_supports(const NormMlpArgs& a) {
  if (a.hidden / 8 > kThreads || a.skew_from < 0 || a.skew_permille < 0 || a.skew_permille >= 1000) return false;
  return mlp_split_down_v10_supports(a) && lean_smem_for(skewed_most(a)) <= size_t(device_optin_smem_bytes());
}

void launch_mlp_split_down_v11(const NormMlpArgs& a, cudaStream_t stream) {
  launch_lean(mlp_lean_kernel<kSkewedBlocks>, a, skewed_most(a), stream);
}

// v12_mlp_split_down_paired: v10 whose CTA pairs hand a block's tail from the later one to the other
// (NormMlpArgs::lateness_in; hidden / 8 <= 512), its smem sized for a block and the features it may take.
int64_t paired_most(const NormMlpArgs& a) { return max_features(ctas_for(a), a.inter) + a.lateness_max_features; }

bool mlp_split_down_v12_supports(const NormMlpArgs& a) {
  if (a.hidden / 8 > kThreads || a.lateness_in == nullptr || a.lateness_out == nullptr ||
      a.lateness_in == a.lateness_out || a.lateness_permille_per_us < 0 || a.lateness_permille_per_us > 1000 ||
      a.lateness_max_features < 0 || a.lateness_max_features > 64)
    return false;
  return mlp_split_down_v10_supports(a) && lean_smem_for(paired_most(a)) <= size_t(device_optin_smem_bytes());
}

void launch_mlp_split_down_v12(const NormMlpArgs& a, cudaStream_t stream) {
  launch_lean(mlp_lean_kernel<kPairedBlocks>, a, paired_most(a), stream);
}

// v13_mlp_split_down_lean_loop: v10's work in mlp_lean_loop_kernel at hidden 4096 (Qwen3-8B's); other shapes run
// v10 (and v10 v5 past 4096).
bool mlp_split_down_v13_supports(const NormMlpArgs& a) { return mlp_split_down_v10_supports(a); }

void launch_mlp_split_down_v13(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.hidden != kLeanLoopHidden) return launch_mlp_split_down_v10(a, stream);
  launch_lean(mlp_lean_loop_kernel<kLeanLoopHidden>, a, max_features(ctas_for(a), a.inter), stream);
}

// v15_mlp_split_down_paced: v13 whose ring groups before the PDL wait (three of 64 KB) go out one at a time
// (NormMlpArgs::prewait_window), each once the previous has landed, instead of 192 KB at once as the CTA becomes
// resident while the attention launch's o phase and its last writes run (bench/queue_latency: a dependent load
// waits behind such a burst; norm_gemv v22 gained 0.8% the same way). Other shapes v10.
bool mlp_split_down_v15_supports(const NormMlpArgs& a) {
  return mlp_split_down_v10_supports(a) && a.prewait_window >= 0;
}

void launch_mlp_split_down_v15(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.hidden != kLeanLoopHidden) return launch_mlp_split_down_v10(a, stream);
  launch_lean(mlp_lean_loop_kernel<kLeanLoopHidden, 1, false, true>, a, max_features(ctas_for(a), a.inter), stream);
}

// v19_mlp_split_down_handoff: v15 with counter hand-offs (kHandoff above) where NormMlpArgs sets them: its CTAs
// wait for the attention launch's count (qkv_attention_o v33) in place of the PDL wait, and once their reductions
// into the delta are sent add 1 to handoff_signal, so that the next layer's QKV GEMV (norm_gemv
// v25_gemv_norm_ring_handoff) goes on when all have, instead of at this grid's completion; with neither, v15. Why:
// the QKV GEMV's PDL wait returned 1.4-2.0 us after the MLP's last CTA ended (ITERATIONS.md sessions 16-19), time in
// which its CTAs hold full rings and HBM idles; a counter's last add is seen within an L2 round trip. Shapes v15
// runs v10 on: refused with a hand-off (v10 neither waits on nor adds to a count), v15 without. Measured (H100,
// ITERATIONS.md session 30): slower. With v25 alone 0.993x / 0.991x of the default at prompts 128 / 1024; with v33
// too its mean CTA passed the attention's count 5.71 us after the attention launch's last CTA ended, against 2.99
// for the PDL wait.
bool mlp_split_down_v19_supports(const NormMlpArgs& a) {
  if (!mlp_split_down_v15_supports(a)) return false;
  if (a.handoff_signal == nullptr && a.handoff == nullptr) return true;
  return a.hidden == kLeanLoopHidden && a.rows == 1 && a.normed_input == nullptr &&
         (a.handoff == nullptr || a.handoff_producers > 0) && a.handoff_poll_ns >= 0;
}

void launch_mlp_split_down_v19(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.handoff_signal == nullptr && a.handoff == nullptr) return launch_mlp_split_down_v15(a, stream);
  launch_lean(mlp_lean_loop_kernel<kLeanLoopHidden, 1, false, true, false, false, true>, a,
              max_features(ctas_for(a), a.inter), stream);
}

// v16_mlp_split_down_late: v15 whose CTAs from late_cta_from on (0: a quarter of the grid) issue late_prewait_groups
// (default 1) ring groups before the PDL wait, and the rest after it once the norm's loads are sent (every CTA
// sends its loads before its remaining copies). Why: traced at prompt 128 (mlp-trace-20261201T1642Z-s21-v25-p128 by
// CTA index), the CTAs resident ~3 us before the attention launch's end pass their wait 1.7-2.2 us after it, the
// last 48 (resident in its last microsecond) 3.0-3.8 us after it, against 1.4 for the first 12: pacing three groups
// one at a time outlasts the release. Other shapes, more than kPartialsPerLane x 32 partials: v15.
bool mlp_split_down_v16_supports(const NormMlpArgs& a) {
  return mlp_split_down_v15_supports(a) && a.late_cta_from >= -1 && a.late_prewait_groups >= 0;
}

void launch_mlp_split_down_v16(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.late_cta_from < 0 || a.partial_count > int64_t(gemv_ring::kPartialsPerLane) * kWarpSize)
    return launch_mlp_split_down_v15(a, stream);
  if (a.hidden != kLeanLoopHidden) return launch_mlp_split_down_v10(a, stream);
  launch_lean(mlp_lean_loop_kernel<kLeanLoopHidden, 1, false, true, true>, a, max_features(ctas_for(a), a.inter),
              stream);
}

// v17_mlp_split_down_touch_pages: v15 whose warp 0 prefetches into L2, before the PDL wait, one line of each page the
// CTA touches after it (the residual, the norm partials, the delta copies): the address translations of the norm's
// loads warm (as norm_gemv v24's). Other shapes v10.
bool mlp_split_down_v17_supports(const NormMlpArgs& a) { return mlp_split_down_v15_supports(a); }

void launch_mlp_split_down_v17(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.hidden != kLeanLoopHidden) return launch_mlp_split_down_v10(a, stream);
  launch_lean(mlp_lean_loop_kernel<kLeanLoopHidden, 1, false, true, false, true>, a,
              max_features(ctas_for(a), a.inter), stream);
}

// v18_mlp_split_down_beside: v15's kernel in groups of 4 rows, NormMlpArgs::beside_stages of them in its ring (0:
// 4), at most 56 registers a thread (mlp_beside_kernel above), so that a CTA fits on an SM beside a qkv_attention_o
// CTA, and NormMlpArgs::beside_l2_groups groups past its ring pulled into L2 before its wait. Other shapes v15.
// Refuses what v15 refuses, a negative beside_l2_groups and beside_stages outside 0 and 2-5.
bool mlp_split_down_v18_supports(const NormMlpArgs& a) {
  return mlp_split_down_v15_supports(a) && a.beside_l2_groups >= 0 &&
         (a.beside_stages == 0 || (a.beside_stages >= 2 && a.beside_stages <= kBesideMaxStages));
}

void launch_mlp_split_down_v18(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.hidden != kLeanLoopHidden) return launch_mlp_split_down_v15(a, stream);
  const int stages = a.beside_stages > 0 ? int(a.beside_stages) : kBesideDefaultStages;
  const int64_t most = max_features(ctas_for(a), a.inter);
  const auto kernel = stages == 2   ? mlp_beside_kernel<2>
                      : stages == 3 ? mlp_beside_kernel<3>
                      : stages == 4 ? mlp_beside_kernel<4>
                                    : mlp_beside_kernel<5>;
  launch_lean(kernel, a, most, stream, 1, kBesideGroup, stages);
}

// v14_mlp_split_down_batched: mlp_lean_loop_kernel for 1-2 tokens whose inputs come normed (NormMlpArgs::rows,
// normed_input), at hidden 4096 only.
bool mlp_split_down_v14_supports(const NormMlpArgs& a) {
  if (a.normed_input == nullptr || a.rows < 1 || a.rows > kLeanLoopMaxTokens || a.hidden != kLeanLoopHidden ||
      a.inter < 1 || a.ctas < 0 || a.delta_copies < 1 || a.w_next != nullptr || a.w_o != nullptr)
    return false;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!aligned(a.normed_input) || !aligned(a.w_gate_up) || !aligned(a.w_down_t) || !aligned(a.residual_delta))
    return false;
  return lean_smem_for(max_features(ctas_for(a), a.inter), a.rows) <= size_t(device_optin_smem_bytes());
}

void launch_mlp_split_down_v14(const NormMlpArgs& a, cudaStream_t stream) {
  const int64_t most = max_features(ctas_for(a), a.inter);
  if (a.rows == 1)
    launch_lean(mlp_lean_loop_kernel<kLeanLoopHidden, 1, true>, a, most, stream);
  else
    launch_lean(mlp_lean_loop_kernel<kLeanLoopHidden, kLeanLoopMaxTokens, true>, a, most, stream, a.rows,
                kLeanBatchedGroup, kLeanBatchedStages);
}

// v4_mlp_split_down_l2: v2 with NormMlpArgs::l2_prefetch (v2's kernel; the prefetch is its one runtime branch).
bool mlp_split_down_v4_supports(const NormMlpArgs& a) {
  return mlp_split_down_v2_supports(a) && reinterpret_cast<uintptr_t>(a.l2_prefetch) % 16 == 0 &&
         a.l2_prefetch_bytes % 16 == 0 && a.l2_prefetch_bytes >= 0;
}

void launch_mlp_split_down_v4(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<false>(a, stream);
}

// v3 needs the next layer's QKV fields, and every CTA resident at once (one per SM) for its grid-wide wait.
bool mlp_qkv_next_v3_supports(const NormMlpArgs& a) {
  if (a.w_next == nullptr || a.next_norm_weight == nullptr || a.next_out == nullptr || a.sync == nullptr ||
      a.next_rows < 1 || a.w_o != nullptr || !ring_supports(a))
    return false;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return aligned(a.w_next) && aligned(a.next_norm_weight) && ctas_for(a) <= int64_t(device_sm_count());
}

void launch_mlp_qkv_next_v3(const NormMlpArgs& a, cudaStream_t stream) {
  launch_ring<true>(a, stream);
}

bool mlp_split_down_v1_supports(const NormMlpArgs& a) {
  if (a.w_next != nullptr || a.w_o != nullptr) return false;  // (v3's next-layer QKV, v7's o rows)
  if (a.rows != 1 || a.normed_input != nullptr) return false;  // (v14's tokens)
  if (a.hidden < 8 || a.hidden % 8 != 0 || a.hidden / 8 > 2 * kThreads || a.inter < 1) return false;
  if (a.partial_count < 1 || a.partial_count > kMaxNormPartials || a.ctas < 0 || a.delta_copies < 1) return false;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!aligned(a.residual) || !aligned(a.norm_weight) || !aligned(a.w_gate_up) || !aligned(a.w_down_t) ||
      !aligned(a.residual_delta))
    return false;
  return smem_for(a) <= size_t(device_optin_smem_bytes());
}

void launch_mlp_split_down_v1(const NormMlpArgs& a, cudaStream_t stream) {
  if (a.hidden / 8 <= kThreads)
    launch_shape<1, 8>(a, stream);
  else
    launch_shape<2, 4>(a, stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
