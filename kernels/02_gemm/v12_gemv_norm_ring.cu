// v12_gemv_norm_ring: the batch-1 QKV GEMV with its RMSNorm folded in (NormGemvArgs, residual_delta too), on
// gemv_ring's shared-memory ring with one CTA per SM.
// Why: the layer time line of session 6 (bench/layer_timeline.py over --mlp-trace and --attention-o-trace) put
// v10's QKV GEMV at 21.6 us a layer for its 50 MB (2.3 TB/s, half the read peak) between the MLP's last CTA and the
// attention's PDL wait. A warp of v10 streams its two 8 KB rows in 8 dependent round trips of 2 KB: the bytes in
// flight per warp, not HBM, set the pace. Here each CTA owns ~n / SMs contiguous rows (Qwen3-8B: 46-47, 6 groups
// of 8), copies the first kStages - 1 groups (128 KB) into shared memory from the moment it is resident (before
// the PDL wait: weights), and multiplies 8 rows at a time with one transposed warp sum; the 16 warp sums of a row
// meet in shared memory at the end. Other batch sizes and shapes the ring does not take: v10.
// v17_gemv_norm_ring_pair (kPair): v12 launched in clusters of two CTAs that split the norm's reads. With the MLP's
// output as four fp32 copies of the delta (NormMlpArgs::delta_copies), every CTA of v12 reads the same 72 KB from
// L2 after its PDL wait (8 KB of h, 64 KB of delta): 9.5 MB of reads of the same lines by 132 SMs at once, and the
// normed input is ready ~3.5 us after the wait (session 11's trace). Here each CTA of a pair reads half the
// columns, writes its bf16 h' into its shared memory and its warps' sums of squares, and after one cluster barrier
// takes the other half from its partner's shared memory (DSMEM): half the L2 reads, the same bits as v12 (the same
// h' and the same 16 warp sums added in the same order).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/handoff.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {

bool gemv_norm_v10_supports(const NormGemvArgs& a);
void launch_gemv_norm_v10(const NormGemvArgs& a, cudaStream_t stream);

namespace {

using gemv_ring::kThreads;
using gemv_ring::kWarps;
constexpr int kStages = 3;
// v22: ring groups (of 4 rows, 32 KB) in flight before the PDL wait. Measured (H200, Qwen3-8B, prompt 128,
// ITERATIONS.md session 20): 1 group 1.0077x of v18, 2 groups 1.0030x, 3 1.0017x; 4 groups before the wait one at a
// time 1.0034x.
constexpr int kDefaultPrewaitWindow = 1;
constexpr int kMaxDeltaCopiesL2First = 4;  // v16: the delta copies its norm loads ahead of the ring (registers)

// Points of a CTA's work stamped into NormGemvArgs::trace (profiling; thread 0's view).
enum NormGemvTraceEvent {
  kTraceStart,     // the CTA began (resident)
  kTraceWaited,    // past the PDL wait
  kTraceNormed,    // the normed input in registers
  kTraceRowsDone,  // the last group multiplied
  kTraceEnd,       // its outputs written
};

__device__ __forceinline__ void stamp(uint64_t* trace, int event) {
  if (trace != nullptr && threadIdx.x == 0) trace[blockIdx.x * kNormGemvTraceEvents + event] = global_timer_ns();
}

// v17: gemv_ring::normed_with_delta for a cluster of two CTAs that each read half the columns. The warps
// [rank * W / 2, (rank + 1) * W / 2) of CTA `rank` (W = kBlock / 32) load their columns of h and of the delta
// copies, keep bf16 h' in hn_s and their warp sums of squares in warp_sq; after a cluster barrier the other warps
// read theirs from the partner's shared memory. The result is normed_with_delta's bit for bit. The caller must
// call cluster_arrive_after_reads() after this (every thread) and cluster_wait_before_exit() before the CTA exits:
// the partner reads this CTA's shared memory until it arrives. PRECOND: sm_90, launched in clusters of 2 along x;
// hidden / 8 <= kBlock (one piece a thread); hn_s holds hidden bf16, warp_sq kBlock / 32 floats, both shared.
template <int kBlock>
__device__ __forceinline__ void normed_with_delta_pair(const bf16* residual, const float* delta, int copies,
                                                       const uint4 (&norm_w)[1], float eps, int64_t hidden,
                                                       float* warp_sq, bf16* hn_s, float (&x)[1][8]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kBlockWarps = kBlock / kWarpSize, kHalfWarps = kBlockWarps / 2;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), partner = rank ^ 1u;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t col = threadIdx.x;  // this thread's 8 columns
  const bool loads_here = unsigned(warp / kHalfWarps) == rank;
  float hn[1][8] = {};
  if (loads_here) {
    float sq = 0.0f;
    if (col < hidden / 8) {
      float h[8], d[8] = {};
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(residual)[col], h);
      for (int j = 0; j < copies; ++j) {
        const float4* copy = reinterpret_cast<const float4*>(delta + j * hidden);
        gemv_ring::add_delta_copy(d, __ldcg(copy + 2 * col), __ldcg(copy + 2 * col + 1));
      }
      gemv_ring::fold_delta(h, d, hn[0], sq);
      reinterpret_cast<Bf16x8*>(hn_s)[col] = float_to_bf16x8(hn[0]);  // h' is bf16-rounded: exact
    }
    sq = warp_sum(sq);
    if (lane == 0) warp_sq[warp] = sq;
  }
  cluster.sync();  // both halves of h' and all warp sums written and visible to the pair
  const float* partner_sq = cluster.map_shared_rank(warp_sq, partner);
  if (!loads_here && col < hidden / 8)
    bf16x8_to_float(reinterpret_cast<const Bf16x8*>(cluster.map_shared_rank(hn_s, partner))[col], hn[0]);
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kBlockWarps; ++w) total += unsigned(w / kHalfWarps) == rank ? warp_sq[w] : partner_sq[w];
  gemv_ring::scale_normed<1, kBlock>(hn, norm_w, 1.0f / sqrtf(total / float(hidden) + eps), hidden, x);
#endif
}

// The pair's last use of each other's shared memory: every thread arrives once it is done reading the partner's,
// and waits for the partner's arrival before its CTA exits (its shared memory must outlive the partner's reads).
__device__ __forceinline__ void cluster_arrive_after_reads() { cluster_arrive_release<true>(); }

__device__ __forceinline__ void cluster_wait_before_exit() { cluster_wait_acquire<true>(); }

// The QKV GEMV's normed input at this thread's columns: from h and the MLP's delta copies where the args carry
// them (residual_delta), from the producer's partial sums of squares of h otherwise.
template <int kVecs, int kBlock>
__device__ __forceinline__ void normed_input(const bf16* residual, const float* delta, int copies,
                                             const float* partials, int64_t partial_count,
                                             const uint4 (&norm_w)[kVecs], float eps, int64_t hidden,
                                             float* warp_sq, float (&x)[kVecs][8]) {
  if (delta != nullptr)
    gemv_ring::normed_with_delta<kVecs, kBlock>(residual, delta, copies, norm_w, eps, hidden, warp_sq, x);
  else
    gemv_ring::normed_from_partials<kVecs, kBlock>(residual, partials, partial_count, norm_w, eps, hidden, x);
}

// y[i] for the CTA's rows i < rows: the sum of the warps' dot products in dots (kBlock / 32, dots_stride), in a fixed
// order, rounded to bf16. PRECOND: every warp's sums written and visible (after a barrier).
template <int kBlock, class Index>
__device__ __forceinline__ void write_row_sums(const float* dots, Index dots_stride, Index rows, bf16* y) {
  for (Index i = threadIdx.x; i < rows; i += kBlock) {
    float sum = 0.0f;
    for (int w = 0; w < kBlock / kWarpSize; ++w) sum += dots[w * dots_stride + i];
    y[i] = __float2bfloat16_rn(sum);
  }
}

// kFull (v13, v14): every stage of the ring in flight (gemv_ring::Ring's kInFlight = kStages), a group's successor
// issued once the group is multiplied. kTma (v14, sm_90): the groups issued before the PDL wait are TMA bulk copies
// (Ring::issue_bulk), meant to keep the norm's loads after the wait from queuing behind them (they still do).
// kBlock: the CTA's threads (v15: 256, the 8 warps qkv_attention_o v8 streams with; else 512).
// kL2First (v16, with kFull): before the PDL wait the CTA pulls its first l2_first_bytes of rows into L2 instead of
// copying groups into its ring (prewait_groups 0), and after it sends the norm's loads out before the ring's first
// copies, so that nothing queued for this SM delays them (ITERATIONS.md session 8: ~3.5 us from the wait to the
// normed input behind v12's 128 KB); the ring's first groups then come from L2.
// kPair (v17, kVecs 1, launched in clusters of 2): the delta form's norm split over the pair
// (normed_with_delta_pair); h' sits in shared memory after the warp sums.
template <int kVecs, int kGroup, bool kFull, bool kTma, int kBlock = kThreads, bool kL2First = false,
          bool kPair = false>
__global__ void __launch_bounds__(kBlock, 1) norm_gemv_ring_kernel(NormGemvArgs a, int prewait_groups) {
  constexpr int kInFlight = kFull ? kStages : kStages - 1;
  constexpr int kBlockWarps = kBlock / kWarpSize;
  using Ring = gemv_ring::Ring<kVecs, kGroup, kStages, kInFlight, kBlock>;
  __shared__ uint64_t prologue_bars[kStages];  // kTma: one per group issued before the wait
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float warp_sq[kBlockWarps];
  pdl_launch_dependents();
  stamp(a.trace, kTraceStart);
  const int64_t ctas = gridDim.x;
  const int64_t row0 = blockIdx.x * a.n / ctas;
  const int64_t rows = (blockIdx.x + 1) * a.n / ctas - row0;
  const int64_t dots_stride = (a.n + ctas - 1) / ctas;
  const Ring ring{reinterpret_cast<uint4*>(smem_raw), a.k / 8, make_evict_first_policy()};
  float* dots = reinterpret_cast<float*>(smem_raw + Ring::kBytes);  // (kWarps, dots_stride): warp sums per row
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  const auto row_ptr = [&](int64_t r) { return reinterpret_cast<const uint4*>(a.w + (row0 + r) * a.k); };
  const auto issue = [&](int64_t g) { ring.issue(g, g * kGroup, rows, row_ptr); };

  const int bulk_groups = kTma ? min(prewait_groups, kInFlight) : 0;
  if constexpr (kTma) gemv_ring::init_bulk_barriers(prologue_bars);
  for (int g = 0; g < kInFlight; ++g) {
    if (g >= prewait_groups) continue;
    if (g < bulk_groups)
      ring.issue_bulk(g, g * kGroup, rows, row_ptr, &prologue_bars[g]);
    else
      issue(g);
  }
  if constexpr (kL2First) {
    if (warp == 0) {
      const int64_t l2_rows = min(rows, a.l2_first_bytes / (a.k * 2));
      for (int64_t r = lane; r < l2_rows; r += kWarpSize) prefetch_l2_bulk(row_ptr(r), uint32_t(a.k * 2));
    }
  }
  uint4 norm_w[kVecs];
  gemv_ring::load_norm_weight<kVecs, kBlock>(a.norm_weight, a.k, norm_w);
  pdl_wait();  // the residual, its partials or delta come from earlier kernels
  stamp(a.trace, kTraceWaited);
  float x[kVecs][8];
  if constexpr (kL2First) {
    const auto issue_rest = [&] {
      for (int g = 0; g < kInFlight; ++g)
        if (g >= prewait_groups) issue(g);
    };
    if (a.residual_delta != nullptr)
      gemv_ring::normed_with_delta_loads_first<kVecs, kMaxDeltaCopiesL2First, kBlock>(
          a.residual, a.residual_delta, a.delta_copies, norm_w, a.eps, a.k, warp_sq, x, issue_rest);
    else
      gemv_ring::normed_from_partials_loads_first<kVecs, kBlock>(a.residual, a.norm_partials, a.partial_count,
                                                                 norm_w, a.eps, a.k, x, issue_rest);
    stamp(a.trace, kTraceNormed);
  } else {
    // v12: none left (every group in flight before the wait). v13: the ring's last stage once the norm's loads
    // are done, so they do not queue behind its bytes.
    if (!kFull)
      for (int g = 0; g < kInFlight; ++g)
        if (g >= prewait_groups) issue(g);
    if constexpr (kPair) {
      static_assert(kVecs == 1, "v17: one piece of a row a thread");
      bf16* hn_s = reinterpret_cast<bf16*>(smem_raw + Ring::kBytes + size_t(kBlockWarps) * dots_stride * 4);
      if (a.residual_delta != nullptr)
        normed_with_delta_pair<kBlock>(a.residual, a.residual_delta, a.delta_copies, norm_w, a.eps, a.k, warp_sq,
                                       hn_s, x);
      else
        gemv_ring::normed_from_partials<kVecs, kBlock>(a.residual, a.norm_partials, a.partial_count, norm_w,
                                                       a.eps, a.k, x);
      cluster_arrive_after_reads();
    } else {
      normed_input<kVecs, kBlock>(a.residual, a.residual_delta, a.delta_copies, a.norm_partials, a.partial_count,
                                  norm_w, a.eps, a.k, warp_sq, x);
    }
    stamp(a.trace, kTraceNormed);
    if (kFull)
      for (int g = 0; g < kInFlight; ++g)
        if (g >= prewait_groups) issue(g);
  }

  for (int64_t g = 0; g < groups; ++g) {
    uint4 w[kGroup][kVecs];
    ring.read(g, g * kGroup, rows, w, g < bulk_groups ? &prologue_bars[g] : nullptr);
    if (!kFull) issue(g + kStages - 1);  // into the stage group g - 1 used: this thread has read its pieces of it
    const float total = gemv_ring::dot_group<kVecs, kGroup>(w, x);
    const int64_t row = g * kGroup + warp_sum_transposed_index<kGroup>(lane);
    if (lane % (kWarpSize / kGroup) == 0 && row < rows) dots[warp * dots_stride + row] = total;
    if constexpr (kFull) {
      asm volatile("" ::: "memory");  // this group's shared loads stay before the copies that reuse its stage
      issue(g + kStages);              // into the stage this group came from: its pieces are multiplied
    }
  }
  cp_async_wait<0>();
  stamp(a.trace, kTraceRowsDone);
  __syncthreads();
  write_row_sums<kBlock>(dots, dots_stride, rows, a.y + row0);
  stamp(a.trace, kTraceEnd);
  if constexpr (kPair) cluster_wait_before_exit();
}

// The start of the lean kernels (v18, v20, v21, v22): `before_wait` of the first `in_flight` ring groups issued
// (issue(g, stage g)), the norm weight loaded, the PDL wait, the other first groups issued, then this thread's
// piece of the normed input in x. kPaced (v22): before the wait, a thread issues a group only once fewer than
// `window` of its groups are in flight (it waits for the oldest), so that at most window groups a CTA are queued
// ahead of the norm's loads when the wait releases (bench/queue_latency: a dependent load waits for the bytes
// queued ahead of it, and the SM's own queue is the larger part).
// v24: lanes of warp 0 prefetch into L2 one line of each page the CTA touches after the PDL wait (the residual, the
// delta copies or the norm partials, its output rows y_rows), so that the SM's address translations for them are
// warm when the norm's loads go out. Only a hint: nothing is read back.
__device__ __forceinline__ void touch_chain_pages(const NormGemvArgs& a, const bf16* y_rows) {
  const int lane = int(threadIdx.x);
  if (lane >= kWarpSize) return;
  const void* page = nullptr;
  if (lane == 0)
    page = a.residual;
  else if (lane == 1)
    page = y_rows;
  else if (lane == 2)
    page = a.residual_delta == nullptr ? static_cast<const void*>(a.norm_partials) : nullptr;
  else if (a.residual_delta != nullptr && lane - 3 < a.delta_copies)
    page = a.residual_delta + int64_t(lane - 3) * a.k;
  if (page != nullptr) prefetch_l2_line(page);
}

// kLoadsFirst (v23): the first groups not issued before the wait go out after the norm's loads are sent, so that
// those loads are not queued behind them (at most kMaxDeltaCopiesL2First delta copies, kPartialsPerLane x 32
// partials: gemv_norm_v23_takes); the same bits. kTouchPages (v24): touch_chain_pages(a, y_rows) before the wait.
// kHandoff (v25): handoff_wait in place of the PDL wait; returns its result for handoff_finish (0 otherwise).
template <int kK, bool kPaced = false, bool kLoadsFirst = false, bool kTouchPages = false, bool kHandoff = false,
          class Issue>
__device__ __forceinline__ uint32_t lean_prologue(const NormGemvArgs& a, int before_wait, int in_flight,
                                                  Issue&& issue, float* warp_sq, float (&x)[1][8], int window = 0,
                                                  const bf16* y_rows = nullptr) {
  gemv_ring::issue_first_groups<kPaced>(before_wait, window, issue);
  uint4 norm_w[1];
  gemv_ring::load_norm_weight<1>(a.norm_weight, kK, norm_w);
  if constexpr (kTouchPages) touch_chain_pages(a, y_rows);
  uint32_t passed_before = 0;
  if constexpr (kHandoff) {
    // The previous launch's count (the MLP's delta and what came before it), or the PDL wait without a hand-off.
    passed_before = handoff_wait(a.handoff, a.handoff_producers, a.handoff_poll_ns);
  } else {
    pdl_wait();  // the residual, its partials or delta come from earlier kernels
  }
  stamp(a.trace, kTraceWaited);
  if constexpr (kLoadsFirst) {
    const auto issue_rest = [&] {
      for (int g = before_wait; g < in_flight; ++g) issue(g, g);
    };
    if (a.residual_delta != nullptr)
      gemv_ring::normed_with_delta_loads_first<1, kMaxDeltaCopiesL2First, kThreads>(
          a.residual, a.residual_delta, a.delta_copies, norm_w, a.eps, kK, warp_sq, x, issue_rest);
    else
      gemv_ring::normed_from_partials_loads_first<1, kThreads>(a.residual, a.norm_partials, a.partial_count, norm_w,
                                                               a.eps, kK, x, issue_rest);
  } else {
    for (int g = before_wait; g < in_flight; ++g) issue(g, g);
    normed_input<1, kThreads>(a.residual, a.residual_delta, a.delta_copies, a.norm_partials, a.partial_count, norm_w,
                              a.eps, kK, warp_sq, x);
  }
  stamp(a.trace, kTraceNormed);
  return passed_before;
}

// v18 (norm_gemv_lean_kernel): v12's work with its ring's bookkeeping cut, as norm_mlp v13 cut v10's (ITERATIONS.md
// session 17: the MLP's ring spent ~3 instructions of bounds checks, 64-bit addresses and branches for each one of
// arithmetic, and was close to the SMs' issue rate). The hidden size is a template parameter (a row is one 16-byte
// piece a thread), a group's 8 copies come from one pointer at constant offsets, the stage index is carried, and
// the bounds are handled only in the CTA's last group. The same rows, norm, dot products and sums as v12.
// v20 (kGroup 4, kRingStages 6): the same ring bytes in smaller groups, so one more sixth of it is in flight while
// a group is multiplied (160 KB instead of 128).
// v22 (kPaced, v20's geometry): the groups before the wait paced, NormGemvArgs::prewait_window in flight.
// v23 (kLate, v22's): the CTAs from NormGemvArgs::late_cta_from on (gemv_ring::resident_late) issue
// late_prewait_groups before the wait, the rest after the norm's loads (lean_prologue's kLoadsFirst, for every CTA).
// v24 (kTouchPages, v22's): the pages after the wait touched before it (touch_chain_pages).
// v25 (kHandoff, v22's): the previous launch's count of CTAs in place of the PDL wait (handoff_wait).
// v26 (kRamped, v22's): the rows split by gemv_rows_begin_ramped (NormGemvArgs::row_ramp_permille and
// row_ramp_first_cta).
template <int kK, int kGroup = 8, int kRingStages = kStages, bool kPaced = false, bool kLate = false,
          bool kTouchPages = false, bool kHandoff = false, bool kRamped = false>
__global__ void __launch_bounds__(kThreads, 1) norm_gemv_lean_kernel(NormGemvArgs a, int prewait_groups) {
  constexpr int kInFlight = kRingStages - 1;
  static_assert(kK / 8 == kThreads, "one 16-byte piece of a row a thread");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float warp_sq[kWarps];
  pdl_launch_dependents();
  stamp(a.trace, kTraceStart);
  const int64_t ctas = gridDim.x;
  const int64_t ramp = kRamped ? a.row_ramp_permille : 0;  // 0: the even split, c * n / ctas (v18-v25)
  const int64_t ramp_from = kRamped ? a.row_ramp_first_cta : 0;
  const int64_t row0 = gemv_rows_begin_ramped(blockIdx.x, ctas, a.n, ramp, ramp_from);
  const int rows = int(gemv_rows_begin_ramped(blockIdx.x + 1, ctas, a.n, ramp, ramp_from) - row0);
  const int dots_stride = int(gemv_rows_max_ramped(ctas, a.n, ramp, ramp_from));
  const int groups = (rows + kGroup - 1) / kGroup;
  uint4* const ring = reinterpret_cast<uint4*>(smem_raw) + threadIdx.x;  // this thread's piece of stage 0, row 0
  float* dots = reinterpret_cast<float*>(smem_raw + size_t(kRingStages) * kGroup * kThreads * 16);  // (kWarps, stride)
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const uint64_t policy = make_evict_first_policy();
  const bf16* const w_rows = a.w + row0 * kK + threadIdx.x * 8;  // this thread's piece of the CTA's first row
  // Group g into stage `stage`; past the last group an empty cp.async group keeps the count.
  const auto issue = [&](int g, int stage) {
    if (g < groups) {
      gemv_ring::copy_rows<kGroup, kK>(ring + stage * (kGroup * kThreads), w_rows + int64_t(g) * kGroup * kK,
                                       min(kGroup, rows - g * kGroup), policy);
    }
    cp_async_commit();
  };
  float x[1][8];
  const bool late = kLate && gemv_ring::resident_late(a.late_cta_from);
  [[maybe_unused]] const uint32_t passed_before = lean_prologue<kK, kPaced, kLate, kTouchPages, kHandoff>(
      a, min(late ? int(a.late_prewait_groups) : prewait_groups, kInFlight), kInFlight, issue, warp_sq, x,
      a.prewait_window > 0 ? int(a.prewait_window) : kDefaultPrewaitWindow, a.y + row0);
  for (int g = 0, stage = 0; g < groups; ++g, stage = stage == kRingStages - 1 ? 0 : stage + 1) {
    cp_async_wait<kInFlight - 1>();
    uint4 w[kGroup][1];
    gemv_ring::read_rows<kGroup>(ring + stage * (kGroup * kThreads), min(kGroup, rows - g * kGroup), w);
    // Into the stage group g - 1 used: this thread has read its pieces of it.
    issue(g + kInFlight, stage == 0 ? kRingStages - 1 : stage - 1);
    const float total = gemv_ring::dot_group<1, kGroup>(w, x);
    const int row = g * kGroup + warp_sum_transposed_index<kGroup>(lane);
    if (lane % (kWarpSize / kGroup) == 0 && row < rows) dots[warp * dots_stride + row] = total;
  }
  cp_async_wait<0>();
  stamp(a.trace, kTraceRowsDone);
  __syncthreads();
  write_row_sums<kThreads>(dots, dots_stride, rows, a.y + row0);
  stamp(a.trace, kTraceEnd);
  if constexpr (kHandoff) handoff_finish(a.handoff, passed_before, a.handoff_signal);
}
// v21 (norm_gemv_claimed_kernel): v18's ring whose CTAs take part of their groups of 8 rows from a shared queue.
// Session 19's trace: a CTA resident just before the MLP's end has its two ring groups still in flight at the PDL
// release and ends its 47 rows ~2 us after one resident for 13-16 us; the attention waits for the last. Here CTA c
// owns `static_groups` groups (c * static_groups ...), and the groups past ctas * static_groups go to whoever
// asks first: thread 0 claims one (an atomic on claims[0]) kClaimAhead iterations before the ring issues it, so a
// CTA that runs ahead takes more. Each row's dot product is v18's (the same pieces a thread, the same warp sums in
// the same order): the output is v18's bit for bit. The last CTA to finish (claims[1]) zeroes both counters.
constexpr int kClaimAhead = kStages;     // a claimed group's index is shared (a barrier) before the ring issues it
constexpr int kMaxClaimedGroups = 16;    // a CTA's groups at most: its dots' rows are (kWarps, 16 x 8)

template <int kK>
__global__ void __launch_bounds__(kThreads, 1) norm_gemv_claimed_kernel(NormGemvArgs a, int static_groups) {
  constexpr int kGroup = 8, kInFlight = kStages - 1, kDotsStride = kMaxClaimedGroups * kGroup;
  static_assert(kK / 8 == kThreads, "one 16-byte piece of a row a thread");
  static_assert(kClaimAhead > kInFlight, "a group is claimed before it is issued");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float warp_sq[kWarps];
  __shared__ int32_t claimed_group[kMaxClaimedGroups];  // the global group of local group j >= static_groups, or -1
  pdl_launch_dependents();
  stamp(a.trace, kTraceStart);
  const int32_t groups_total = int32_t((a.n + kGroup - 1) / kGroup);
  const int32_t pool_first = int32_t(gridDim.x) * static_groups;
  // The global group of local group j (-1: none). Static groups need no shared memory (issued before the wait).
  const auto group_of = [&](int j) -> int32_t {
    if (j < static_groups) {
      const int32_t g = int32_t(blockIdx.x) * static_groups + j;
      return g < groups_total ? g : -1;
    }
    return j < kMaxClaimedGroups ? claimed_group[j] : -1;
  };
  const auto rows_of = [&](int32_t g) {
    const int64_t left = a.n - int64_t(g) * kGroup;
    return int(left < kGroup ? left : kGroup);
  };
  uint4* const ring = reinterpret_cast<uint4*>(smem_raw) + threadIdx.x;  // this thread's piece of stage 0, row 0
  float* dots = reinterpret_cast<float*>(smem_raw + size_t(kStages) * kGroup * kThreads * 16);  // (kWarps, stride)
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const uint64_t policy = make_evict_first_policy();
  const bf16* const w_piece = a.w + threadIdx.x * 8;  // this thread's piece of row 0
  const auto issue = [&](int j, int stage) {
    const int32_t g = group_of(j);
    if (g >= 0) {
      gemv_ring::copy_rows<kGroup, kK>(ring + stage * (kGroup * kThreads), w_piece + int64_t(g) * kGroup * kK,
                                       rows_of(g), policy);
    }
    cp_async_commit();
  };
  float x[1][8];
  lean_prologue<kK>(a, min(a.prewait_groups > 0 ? int(a.prewait_groups) : kInFlight, kInFlight), kInFlight, issue,
                    warp_sq, x);
  bool claiming = true;  // (thread 0) until a claim comes back empty or the CTA holds kMaxClaimedGroups
  int local_groups = 0;
  for (int j = 0, stage = 0; group_of(j) >= 0; ++j, stage = stage == kStages - 1 ? 0 : stage + 1) {
    const int32_t g = group_of(j);
    const int rows = rows_of(g);
    // Thread 0 claims local group j + kClaimAhead now; its answer is stored after this group's arithmetic.
    const int ahead = j + kClaimAhead;
    int32_t claim = -1;
    const bool claims_now = threadIdx.x == 0 && ahead >= static_groups && ahead < kMaxClaimedGroups;
    if (claims_now && claiming) claim = pool_first + int32_t(atomicAdd(a.claims, 1u));
    cp_async_wait<kInFlight - 1>();
    uint4 w[kGroup][1];
    gemv_ring::read_rows<kGroup>(ring + stage * (kGroup * kThreads), rows, w);
    issue(j + kInFlight, stage == 0 ? kStages - 1 : stage - 1);  // into the stage group j - 1 used
    const float total = gemv_ring::dot_group<1, kGroup>(w, x);
    const int row = j * kGroup + warp_sum_transposed_index<kGroup>(lane);
    if (lane % (kWarpSize / kGroup) == 0 && row - j * kGroup < rows) dots[warp * kDotsStride + row] = total;
    if (claims_now) {
      if (claim >= groups_total) claim = -1;
      claiming = claiming && claim >= 0;
      claimed_group[ahead] = claim;
    }
    local_groups = j + 1;
    __syncthreads();  // the claimed group visible before the ring issues it (iteration ahead - kInFlight)
  }
  cp_async_wait<0>();
  stamp(a.trace, kTraceRowsDone);
  __syncthreads();
  for (int j = 0; j < local_groups; ++j) {  // the groups lie apart in y
    const int32_t g = group_of(j);
    write_row_sums<kThreads>(dots + j * kGroup, kDotsStride, rows_of(g), a.y + int64_t(g) * kGroup);
  }
  if (threadIdx.x == 0) {  // every claim of this CTA is made: the last CTA here resets the queue for the next launch
    if (atomicAdd(a.claims + 1, 1u) == gridDim.x - 1) {
      a.claims[0] = 0;
      a.claims[1] = 0;
    }
  }
  stamp(a.trace, kTraceEnd);
}

constexpr int kLeanK = 4096;

// The ring, the warp sums (kBlock / 32, rows per CTA: the most gemv_rows_begin_ramped gives at ramp_permille) and,
// for v17 (pair), h' as bf16 (hidden).
template <int kVecs, int kGroup, int kBlock = kThreads, bool kPair = false, int kRingStages = kStages>
size_t smem_for(const NormGemvArgs& a, int64_t ramp_permille = 0, int64_t ramp_first_cta = 0) {
  const int64_t ctas = device_sm_count();
  return gemv_ring::Ring<kVecs, kGroup, kRingStages, kRingStages - 1, kBlock>::kBytes +
         size_t(kBlock / kWarpSize * gemv_rows_max_ramped(ctas, a.n, ramp_permille, ramp_first_cta)) * sizeof(float) +
         (kPair ? size_t(a.k) * 2 : 0);
}

size_t ring_smem_for(const NormGemvArgs& a) { return a.k / 8 <= kThreads ? smem_for<1, 8>(a) : smem_for<2, 4>(a); }

bool ring_supports(const NormGemvArgs& a) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.m == 1 && a.n >= 1 && a.k >= 8 && a.k % 8 == 0 && a.k / 8 <= 2 * kThreads && aligned(a.residual) &&
         aligned(a.norm_weight) && aligned(a.w) && aligned(a.residual_delta) && a.delta_copies >= 1 &&
         (a.residual_delta != nullptr || (a.partial_count >= 1 && a.partial_count <= kMaxNormPartials)) &&
         ring_smem_for(a) <= size_t(device_optin_smem_bytes());
}

template <int kVecs, int kGroup, bool kFull, bool kTma, int kBlock = kThreads, bool kL2First = false>
void launch_ring(const NormGemvArgs& a, cudaStream_t stream) {
  const auto kernel = norm_gemv_ring_kernel<kVecs, kGroup, kFull, kTma, kBlock, kL2First>;
  const size_t smem = smem_for<kVecs, kGroup, kBlock>(a);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // Every group the ring holds in flight is issued before the PDL wait: the CTA becomes resident only as the
  // kernel before it (the MLP, a whole SM a CTA) leaves its SM, so these copies fill that kernel's tail.
  // v13 (kFull): the same two groups before the wait, the third after the norm; v14: all three before (TMA).
  // v16 (kL2First): none, its first rows go to L2 instead.
  launch(kernel, dim3(unsigned(device_sm_count())), dim3(kBlock), smem, stream, a,
         kL2First ? 0 : kTma ? kStages : kStages - 1);
}

template <bool kFull, bool kTma = false, bool kL2First = false>
void launch_ring_or_v10(const NormGemvArgs& a, cudaStream_t stream) {
  if (!ring_supports(a)) return launch_gemv_norm_v10(a, stream);
  if (a.k / 8 <= kThreads)
    launch_ring<1, 8, kFull, kTma, kThreads, kL2First>(a, stream);
  else
    launch_ring<2, 4, kFull, kTma, kThreads, kL2First>(a, stream);
  CUDA_CHECK_LAUNCH();
}

// v17: v12's kernel with the pair's norm, in clusters of two CTAs (one per SM, as v12). Taken where the device
// has clusters, the ring takes the shape with one piece of a row a thread (k / 8 <= 512), the SM count is even and
// every pair can be resident at once (cudaOccupancyMaxActiveClusters: a second wave of pairs would wait for the
// first to finish).
constexpr auto kPairKernel = norm_gemv_ring_kernel<1, 8, false, false, kThreads, false, true>;

// Also allows the kernel the shared memory these args need (launch_pair relies on it).
bool pair_takes(const NormGemvArgs& a) {
  if (device_compute_major() < 9 || !ring_supports(a) || a.k / 8 > kThreads || device_sm_count() % 2 != 0)
    return false;
  const size_t smem = smem_for<1, 8, kThreads, true>(a);
  if (smem > size_t(device_optin_smem_bytes())) return false;
  CUDA_CHECK(cudaFuncSetAttribute(kPairKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int clusters =
      max_active_clusters(kPairKernel, dim3(unsigned(device_sm_count())), dim3(kThreads), smem, 2u);
  return int64_t(clusters) * 2 >= device_sm_count();
}

// PRECOND: pair_takes(a) (which set the kernel's shared-memory attribute).
void launch_pair(const NormGemvArgs& a, cudaStream_t stream) {
  // v12's two groups before the PDL wait.
  launch_clustered(kPairKernel, dim3(unsigned(device_sm_count())), dim3(kThreads), smem_for<1, 8, kThreads, true>(a),
                   stream, 2u, a, kStages - 1);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gemv_norm_v12_supports(const NormGemvArgs& a) { return ring_supports(a) || gemv_norm_v10_supports(a); }

void launch_gemv_norm_v12(const NormGemvArgs& a, cudaStream_t stream) { launch_ring_or_v10<false>(a, stream); }

// v13_gemv_norm_ring_full: v12 with all three stages of the ring in flight (192 KB a CTA; the third group issued
// once the norm's loads are done).
bool gemv_norm_v13_supports(const NormGemvArgs& a) { return gemv_norm_v12_supports(a); }

void launch_gemv_norm_v13(const NormGemvArgs& a, cudaStream_t stream) { launch_ring_or_v10<true>(a, stream); }

// v14_gemv_norm_ring_tma: v13 whose groups before the PDL wait are TMA bulk copies (sm_90; elsewhere v10).
bool gemv_norm_v14_supports(const NormGemvArgs& a) {
  return (device_compute_major() >= 9 && ring_supports(a)) || gemv_norm_v10_supports(a);
}

void launch_gemv_norm_v14(const NormGemvArgs& a, cudaStream_t stream) {
  if (device_compute_major() < 9) return launch_gemv_norm_v10(a, stream);
  launch_ring_or_v10<true, true>(a, stream);
}

// v15_gemv_norm_ring_256t (diagnostic): v12 with 256 threads a CTA (the 8 warps of qkv_attention_o v8, whose QKV
// rows streamed at half v12's rate, ITERATIONS.md session 10): each thread copies and multiplies twice the pieces,
// the same 64 KB stages. Shapes past hidden 4096 (or where the ring does not fit): v10.
bool gemv_norm_v15_supports(const NormGemvArgs& a) { return gemv_norm_v12_supports(a); }

void launch_gemv_norm_v15(const NormGemvArgs& a, cudaStream_t stream) {
  if (!ring_supports(a) || a.k / 8 > 2 * 256 || smem_for<2, 8, 256>(a) > size_t(device_optin_smem_bytes()))
    return launch_gemv_norm_v10(a, stream);
  launch_ring<2, 8, false, false, 256>(a, stream);
  CUDA_CHECK_LAUNCH();
}

// v16_gemv_norm_ring_l2_first: v13 whose CTAs pull their first l2_first_bytes of rows into L2 before the PDL wait
// instead of copying them into the ring, and send the norm's loads out before the ring's first copies (sm_90: bulk
// L2 prefetches; at most kMaxDeltaCopiesL2First delta copies, 8 x 32 partials). Elsewhere v12.
bool gemv_norm_v16_takes(const NormGemvArgs& a) {
  return device_compute_major() >= 9 && ring_supports(a) && a.l2_first_bytes >= 0 &&
         a.delta_copies <= kMaxDeltaCopiesL2First &&
         (a.residual_delta != nullptr || a.partial_count <= int64_t(gemv_ring::kPartialsPerLane) * kWarpSize);
}

bool gemv_norm_v16_supports(const NormGemvArgs& a) { return gemv_norm_v16_takes(a) || gemv_norm_v12_supports(a); }

void launch_gemv_norm_v16(const NormGemvArgs& a, cudaStream_t stream) {
  if (!gemv_norm_v16_takes(a)) return launch_gemv_norm_v12(a, stream);
  launch_ring_or_v10<true, false, true>(a, stream);
}

// v17_gemv_norm_ring_pair: v12 in clusters of two CTAs that split the norm's reads of h and the delta copies
// (sm_90; elsewhere, or where the pairs do not fit at once, v12).
bool gemv_norm_v17_supports(const NormGemvArgs& a) { return pair_takes(a) || gemv_norm_v12_supports(a); }

void launch_gemv_norm_v17(const NormGemvArgs& a, cudaStream_t stream) {
  if (!pair_takes(a)) return launch_gemv_norm_v12(a, stream);
  launch_pair(a, stream);
}


// v18_gemv_norm_ring_lean: v12's work in norm_gemv_lean_kernel where the row is 4096 wide (Qwen3-8B's hidden) and
// the ring takes the shape; elsewhere v12.
bool gemv_norm_v18_supports(const NormGemvArgs& a) { return gemv_norm_v12_supports(a); }

template <int kGroup, int kRingStages, bool kPaced = false, bool kLate = false, bool kTouchPages = false,
          bool kHandoff = false, bool kRamped = false>
void launch_lean(const NormGemvArgs& a, int prewait_groups, cudaStream_t stream) {
  const auto kernel =
      norm_gemv_lean_kernel<kLeanK, kGroup, kRingStages, kPaced, kLate, kTouchPages, kHandoff, kRamped>;
  const size_t smem = smem_for<1, kGroup, kThreads, false, kRingStages>(a, kRamped ? a.row_ramp_permille : 0,
                                                                       kRamped ? a.row_ramp_first_cta : 0);
  if (smem > size_t(device_optin_smem_bytes())) return launch_gemv_norm_v12(a, stream);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch(kernel, dim3(unsigned(device_sm_count())), dim3(kThreads), smem, stream, a, prewait_groups);
  CUDA_CHECK_LAUNCH();
}

void launch_gemv_norm_v18(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.k != kLeanK || !ring_supports(a)) return launch_gemv_norm_v12(a, stream);
  launch_lean<8, kStages>(a, kStages - 1, stream);  // v12's two groups (128 KB) before the PDL wait
}

// v20_gemv_norm_ring_deep: v18 with groups of 4 rows in 6 stages (the same 192 KB): 160 KB in flight while a group
// is multiplied instead of 128; the same 128 KB (4 groups) before the PDL wait. Elsewhere v12.
bool gemv_norm_v20_supports(const NormGemvArgs& a) { return gemv_norm_v12_supports(a); }

void launch_gemv_norm_v20(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.k != kLeanK || !ring_supports(a)) return launch_gemv_norm_v12(a, stream);
  launch_lean<4, 6>(a, a.prewait_groups > 0 ? a.prewait_groups : 4, stream);
}

// v22_gemv_norm_ring_paced: v20 (groups of 4 rows, 6 stages) whose groups before the PDL wait (prewait_groups, 0:
// all 5 the ring keeps in flight, 160 KB) go out prewait_window at a time (0: 1, 32 KB): a thread issues the next
// once its oldest has landed. Elsewhere v12. Why: v18 issues its 128 KB at once as each CTA becomes resident, in
// the MLP's last microseconds; a dependent load (the norm's, the MLP's last reductions and the next launch's
// release) waits behind such a burst (bench/queue_latency). Traced (layer-timeline-20261201T1438Z-s20-norm-gemv-
// v22-p128.txt, 2 at a time): the normed input comes 0.5 us later but the rows are done 0.8 us sooner.
bool gemv_norm_v22_supports(const NormGemvArgs& a) { return gemv_norm_v12_supports(a) && a.prewait_window >= 0; }

void launch_gemv_norm_v22(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.k != kLeanK || !ring_supports(a)) return launch_gemv_norm_v12(a, stream);
  launch_lean<4, 6, true>(a, a.prewait_groups > 0 ? a.prewait_groups : 5, stream);
}

// v23_gemv_norm_ring_late: v22 whose CTAs from late_cta_from on (0: a quarter of the grid) issue late_prewait_groups
// (default 1) ring groups before the PDL wait, and the rest of the first 5 after the wait, once the norm's loads are
// sent (every CTA sends its loads before its copies). Why: traced at prompt 128 (mlp-trace-20261201T1642Z-s21-v25-
// p128, by CTA index), the CTAs become resident in index order as the MLP's leave; the last 48 start within ~1 us of
// the MLP's end, and pacing 5 groups one at a time takes them to their wait 1.7-3.6 us after it (the first third:
// 0.9), their normed input to 4.9-6.5 us (3.5), and the attention's release waits for the last of them.
// At most kMaxDeltaCopiesL2First delta copies and kPartialsPerLane x 32 partials; elsewhere v22.
bool gemv_norm_v23_takes(const NormGemvArgs& a) {
  return a.k == kLeanK && ring_supports(a) && a.prewait_window >= 0 && a.late_cta_from >= 0 &&
         a.late_prewait_groups >= 0 && a.delta_copies <= kMaxDeltaCopiesL2First &&
         (a.residual_delta != nullptr || a.partial_count <= int64_t(gemv_ring::kPartialsPerLane) * kWarpSize);
}

bool gemv_norm_v23_supports(const NormGemvArgs& a) { return gemv_norm_v22_supports(a); }

void launch_gemv_norm_v23(const NormGemvArgs& a, cudaStream_t stream) {
  if (!gemv_norm_v23_takes(a)) return launch_gemv_norm_v22(a, stream);
  launch_lean<4, 6, true, true>(a, a.prewait_groups > 0 ? a.prewait_groups : 5, stream);
}

// v24_gemv_norm_ring_touch_pages: v22 whose warp 0 prefetches into L2, before the PDL wait, one line of each page
// the CTA touches after it (the residual, the delta copies or norm partials, its output rows). Why: from the wait to
// the normed input took the CTAs with nothing in flight ~2.1 us at prompt 128 (mlp-trace-20261201T1846Z-s22-both-
// p128), for one L2 round trip of 40 KB and two barriers; in the attention launch (qkv_attention_o v16) the same
// hint took ~0.7 us off its chain (session 14). Elsewhere v22.
bool gemv_norm_v24_supports(const NormGemvArgs& a) { return gemv_norm_v22_supports(a); }

void launch_gemv_norm_v24(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.k != kLeanK || !ring_supports(a)) return launch_gemv_norm_v12(a, stream);
  launch_lean<4, 6, true, false, true>(a, a.prewait_groups > 0 ? a.prewait_groups : 5, stream);
}

// v25_gemv_norm_ring_handoff: v22 whose CTAs, where NormGemvArgs::handoff is set, wait for the previous launch's
// count of CTAs done (norm_mlp v19's handoff_signal) in place of the PDL wait and reset it, and, where
// handoff_signal is set, count themselves done for the next launch (qkv_attention_o v33); with neither, v22. Why:
// traced at prompt 128 the PDL wait returned 1.4-2.0 us after the MLP's last CTA ended (ITERATIONS.md sessions
// 16-19), while the QKV GEMV's CTAs sat resident with their rings full; a count is seen one L2 round trip after the
// last add. With a hand-off only where v22 runs its own kernel (v12's would neither reset nor signal). Measured (H100,
// ITERATIONS.md session 30): slower. Its first CTA passed the count 1.45 us after the MLP's last CTA ended, against
// 1.11 for the PDL wait (1.25 against 0.77 with 2 ring groups before the wait); with v19 0.993x / 0.991x of the
// default at prompts 128 / 1024.
bool gemv_norm_v25_supports(const NormGemvArgs& a) {
  if (!gemv_norm_v22_supports(a)) return false;
  if (a.handoff == nullptr && a.handoff_signal == nullptr) return true;
  return a.k == kLeanK && ring_supports(a) && (a.handoff == nullptr || a.handoff_producers > 0) &&
         a.handoff_poll_ns >= 0 && smem_for<1, 4, kThreads, false, 6>(a) <= size_t(device_optin_smem_bytes());
}

void launch_gemv_norm_v25(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.handoff == nullptr && a.handoff_signal == nullptr) return launch_gemv_norm_v22(a, stream);
  launch_lean<4, 6, true, false, false, true>(a, a.prewait_groups > 0 ? a.prewait_groups : 5, stream);
}

// v26_gemv_norm_ring_ramp: v22 (groups of 4 rows, 6 stages, paced before the PDL wait) whose CTAs take shares
// of the rows that fall linearly with the block index (gemv_rows_begin_ramped, NormGemvArgs::row_ramp_permille; 0:
// v22's rows). Why: traced at prompt 128 on an H100 (mlp-trace-20261206T1632Z-s30-h100-default-p128, ITERATIONS.md
// session 31), the CTAs become resident in index order in the MLP's last microseconds, their normed input comes
// 4.1 us (CTAs 0-11) to 8.6 us (120-131) after the MLP's last CTA ends, and each then takes ~8 us for its rows: the
// ends rise with the index, 11.0 to 17.2 us, and the attention's release waits for the last. Each row's dot product
// and sum are v22's (the same pieces a thread, warp sums in the same order): v22's output bit for bit. Elsewhere
// v12 (as v22). Measured (H100, ITERATIONS.md session 32): at 450 per mille 1.0014x-1.0034x of v22 over prompts
// 128-8192; the ends flatten, but the attention launch's CTAs, which take the SMs the first QKV CTAs leave, become
// resident later, so its release gains ~0.5 of the tail's 1.5 us.
bool gemv_norm_v26_supports(const NormGemvArgs& a) {
  return gemv_norm_v22_supports(a) && a.row_ramp_permille >= -1000 && a.row_ramp_permille <= 1000 &&
         a.row_ramp_first_cta >= 0;
}

void launch_gemv_norm_v26(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.k != kLeanK || !ring_supports(a)) return launch_gemv_norm_v12(a, stream);
  launch_lean<4, 6, true, false, false, false, true>(a, a.prewait_groups > 0 ? a.prewait_groups : 5, stream);
}

// v21_gemv_norm_ring_claimed: v18 with the groups past each CTA's first `claim_static_groups` (default 4: 528 of
// Qwen3-8B's 768 QKV groups) taken from a queue (NormGemvArgs::claims). Without claims, or where v18 would not run
// its kernel: v18.
bool gemv_norm_v21_supports(const NormGemvArgs& a) { return gemv_norm_v12_supports(a); }

void launch_gemv_norm_v21(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.claims == nullptr || a.k != kLeanK || !ring_supports(a)) return launch_gemv_norm_v18(a, stream);
  const auto kernel = norm_gemv_claimed_kernel<kLeanK>;
  const size_t smem = gemv_ring::Ring<1, 8, kStages>::kBytes + size_t(kWarps) * kMaxClaimedGroups * 8 * sizeof(float);
  if (smem > size_t(device_optin_smem_bytes())) return launch_gemv_norm_v18(a, stream);
  const int static_groups = max(kClaimAhead, a.claim_static_groups > 0 ? int(a.claim_static_groups) : 4);
  const int64_t ctas = device_sm_count(), groups = (a.n + 7) / 8;
  // (every group must find a CTA with room: ctas x kMaxClaimedGroups of them)
  if (static_groups > kMaxClaimedGroups || ctas * kMaxClaimedGroups < groups) return launch_gemv_norm_v18(a, stream);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch(kernel, dim3(unsigned(ctas)), dim3(kThreads), smem, stream, a, static_groups);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
