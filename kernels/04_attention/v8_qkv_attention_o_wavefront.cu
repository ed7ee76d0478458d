// v8_qkv_attention_o_wavefront: the QKV projection (its RMSNorm folded in), the decode attention and the o
// projection (its residual add folded in) of one layer in one launch, batch 1, overlapped kv head by kv head.
//
// Why: the layer's time line (sessions 6-9, bench/layer_timeline.py) has two grid-wide dependencies between the
// MLP launches: the attention may start only when every QKV row is written (the QKV GEMV's last CTA, then a launch
// boundary), and the o rows only when every head is merged. At context 128 the span from the MLP's end to the next
// MLP's release is ~35 us for 18.5 us of bytes (50 MB of QKV rows, 33.5 MB of o rows), and HBM idles through the
// attention's ~9 us chain. But kv head g's attention needs only its own q, k and v rows, and the o projection splits
// over kv heads by columns, o = Σ_g W_o[:, columns of g] · attn_g. So each CTA here streams its share kv head by kv
// head: its QKV rows of head 0, of head 1, ..., then its o rows' columns of head 0, of head 1, .... Head g's
// splits attend as soon as every CTA has counted head g's rows in, and a CTA multiplies its o columns of head g as
// soon as that head is merged. Of the attention only the last head's chain stays between the QKV rows and the o
// rows, and the o columns of the other heads stream meanwhile.
//
// One CTA per SM, 256 threads, all resident at once (they wait on each other). CTA c:
//  - One ring (gemv_ring::Ring, 3 stages of 64 KB, two in flight) carries its whole stream: its QKV rows (a 1/CTAs
//    share of each kv head's (group + 2) * head_dim rows, head after head, kGroupRows a stage), then its o rows
//    (ceil(hidden / SMs) of them; the CTAs past hidden have none), one kv head's group * head_dim columns at a
//    time, as many heads a stage as fit. The first stages are issued before the PDL wait (weights), and the stream
//    never waits for an activation: only the multiplications do.
//  - The RMSNorm of the hidden state into registers (gemv_ring::normed_*), then the QKV rows a stage at a time; once
//    a kv head's rows are done, they are written to qkv_out and the CTA counts itself in for that head.
//  - At most one attention split (splits x kv_heads <= the CTAs with o rows): split s of kv head g, with
//    attention_warp::attend_keys (no K/V ring: each warp's first K/V chunks are loaded before it waits for head
//    g's count; its scratch is the ring stage just multiplied). By default it runs after the CTA's last QKV rows;
//    with kEarlySplits once the CTA's rows of head g + 1 are done. The last split of the head merges the head's q
//    heads into attention.out and marks it merged.
//  - Its o rows: wait for the heads' marks (by default all at once; with kEarlySplits a head at a time), read
//    their attention output, multiply the staged columns. Then the residual update as v2 makes it (the delta
//    folded in and zeroed) and the norm partial.
// Measured (H200, Qwen3-8B, ITERATIONS.md session 10): slower than v2 and the QKV GEMV v12 as two launches, 4.771
// vs 4.326 ms a step at context 128 (5.254 at 8192; 4.932 before the compact instance). A CTA that attends stops
// streaming, so the early splits ran the heads one after another (1.47x); and the QKV rows take ~17-22 us here
// against ~9 in v12 (traced), not because of the 256 threads (v12 with 256 streams them in ~9), the row order or
// the copy instructions (each tried). Nsight Compute points at instruction fetch: this kernel's loops are compiled
// scattered over tens of KB of code (v12's within 6 KB), and fetch is their top stall.
// The counters are zero between launches: the last CTA to finish resets them.
// PRECOND: tokens == 1; head_dim 64 or 128; q_heads / kv_heads <= 8; positions[0] < max_ctx; sm_90.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cfloat>

#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/04_attention/attention_warp.cuh"
#include "kernels/04_attention/qkv_attention.cuh"
#include "kernels/04_attention/qkv_attention_o_plan.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using namespace qkv_attention_o_plan;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kStages = 3;
[[maybe_unused]] constexpr int kInFlight = kStages - 1;  // (the unused ones: the sm_89 build's body is empty)
constexpr int kMaxGroup = 8;         // q heads per kv head (attention_warp's bound)
constexpr int kStagePieces = 4096;   // 64 KB a ring stage, in 16-byte pieces
constexpr int kMaxOPieces = 16;      // 16-byte pieces of one kv head's o columns a thread multiplies
[[maybe_unused]] constexpr int kLag = 1;  // a split of head g runs after its CTA's QKV rows of head g + kLag
// How far the wavefront reaches into the QKV rows, a bit mask (QkvAttentionOArgs::chain_steps; -1: kDefaultSteps):
// kHeadCounts: a CTA counts each kv head's rows in as soon as they are done (else all at the end of its rows);
// kEarlySplits: a split of head g runs after its CTA's rows of head g + kLag (else after all its rows).
// kBulkCopies (diagnostic): the ring's copies as TMA bulk copies issued by warp 0 (a row of w_qkv, or an o row's
// columns of one kv head, each), completing on an mbarrier a stage, instead of every thread's cp.async.
// kStageStamps (diagnostic, with a trace): the trace's slots 5-8 stamp when QKV stages 0, 2, 4 had landed and when
// stage 4 was multiplied, instead of their events.
// kContiguousRows (diagnostic; clears kHeadCounts and kEarlySplits): each CTA's QKV rows one contiguous block, as
// v12 splits them, counted in for every head at once when all are done.
[[maybe_unused]] constexpr int kHeadCounts = 1, kEarlySplits = 2, kBulkCopies = 4, kStageStamps = 8,
                               kContiguousRows = 16;
[[maybe_unused]] constexpr int kDefaultSteps = 0;
constexpr size_t kMaxSmem = 227 * 1024 - 1024;  // (1 KB for the kernel's static shared memory)

// QKV rows a ring stage holds: a row is kVecs 16-byte pieces a thread.
template <int kVecs>
constexpr int kGroupRows = kStagePieces / (kVecs * kThreads);

// What the host computes for the kernel.
struct Params {
  int max_splits, keys_per_split;
  int o_rows_per_cta, o_ctas;  // o rows a CTA; the CTAs with o rows (the norm partials the launch leaves)
  int heads_per_stage;         // kv heads' o columns a ring stage holds
  int qkv_rows_max;            // the most QKV rows a CTA owns (its dots buffer)
};

// Shared memory past the ring, byte offsets from the dynamic base.
struct Layout {
  size_t q, new_kv, partial, weights, x, dots, rows, bytes;
};

Layout layout_for(int head_dim, int q_heads, int qkv_rows_max) {
  Layout l{};
  size_t at = size_t(kStages) * kStagePieces * 16;
  const auto take = [&](size_t bytes) {
    const size_t offset = at;
    at = (at + bytes + 15) / 16 * 16;
    return offset;
  };
  l.q = take(size_t(kMaxGroup) * head_dim * 2);
  l.new_kv = take(size_t(2) * head_dim * 2);
  l.partial = take((size_t(kMaxGroup) * head_dim + 2 * kMaxGroup) * 4);
  l.weights = take(size_t(kMaxGroup) * (kMaxSplits + 1) * 4);
  l.x = take(size_t(q_heads) * head_dim * 2);
  l.dots = take(size_t(kWarps) * qkv_rows_max * 4);
  l.rows = take(size_t(qkv_rows_max) * 4);
  l.bytes = at;
  return l;
}

// Points of a CTA's work stamped into QkvAttentionOArgs::trace (profiling; CTAs with o rows only, as the trace
// buffer holds qkv_attention_o_partials() CTAs). The slots of v1-v7's events, with v8's meaning.
enum WavefrontTraceEvent {
  kTraceStart,      // the CTA began (resident)
  kTraceIssued,     // its first stages are issued
  kTraceWaited,     // past the PDL wait
  kTraceNormed,     // the normed input in registers
  kTraceQkvDone,    // its last QKV rows written and counted (0: without the QKV projection)
  kTraceAttended,   // its split written and counted (0: no split)
  kTraceFirstHead,  // the first kv head's attention output read (its o phase began)
  kTraceLastHead,   // the last kv head's attention output read
  kTraceORows,      // every o column multiplied
  kTraceEnd,        // its rows and norm partial written
};

// The shared memory attend_split works in.
struct SplitSmem {
  bf16* q;         // (kMaxGroup, head_dim)
  bf16* new_kv;    // (2, head_dim)
  float* partial;  // (kMaxGroup, head_dim), then (kMaxGroup) maxima and (kMaxGroup) sums
  float* weights;  // (kMaxGroup, kMaxSplits + 1): merge weights, then the total
  float* scratch;  // attention_warp::scratch_bytes(), used by nothing else during the call
};

// Split `split` of `splits` of kv head g: its attention (attention_warp::attend_keys) into the workspace, counted
// in; the last split of the head merges the head's q heads into out (as v2's merge computes them: a warp per q head
// turns the statistics into weights, a split per lane, then each output is one pass over the splits in order) and
// marks it merged. qkv_count (nullptr: qkv is given): the head's count of CTAs whose QKV rows are written, which
// must reach `ctas` before q, k and v are read; each warp waits for it after its first K/V chunk is in flight.
// PRECOND: every thread of the CTA calls it; the workspace as qkv_attention_o_plan lays it out (v8's counters).
template <int kHeadDim>
__device__ __forceinline__ void attend_split(const QkNormRopeCacheArgs& p, float scale, const uint32_t* qkv_count,
                                          uint32_t ctas, int g, int split, int splits, int32_t position,
                                          int max_splits, const SplitSmem sm, float* workspace, bf16* out) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int kv_heads = int(p.kv_heads), group = int(p.q_heads / p.kv_heads);
  uint32_t* splits_done = reinterpret_cast<uint32_t*>(workspace) + 1 + kv_heads;  // (kv_heads)
  uint32_t* heads_merged = splits_done + kv_heads;                                 // (kv_heads)
  float* split_stats = workspace + counter_words(kv_heads);                        // (q_heads, max_splits, 2)
  float* split_values = split_stats + stats_words(p.q_heads, max_splits);          // (q_heads, max_splits, D)
  float* stat_max = sm.partial + kMaxGroup * kHeadDim;
  float* stat_sum = stat_max + kMaxGroup;
  const qkv_attention::KeyRange range = qkv_attention::key_range(position, split, splits);
  const int64_t slot = p.slots ? p.slots[0] : 0;
  const int64_t row_stride = p.kv_heads * kHeadDim;
  const int64_t first_row =
      qkv_attention::split_first_row<kHeadDim>(slot, p.max_ctx, range.key0, position, row_stride, g);
  const attention_warp::Smem wsm{sm.q, sm.new_kv, sm.partial, stat_max, stat_sum, sm.scratch};
  attention_warp::attend_keys<kHeadDim, kThreads>(
      wsm, p.k_cache + first_row, p.v_cache + first_row, row_stride, range.n_keys, range.new_key, group, scale, [&] {
        if (qkv_count != nullptr) {
          if (lane == 0) spin_until_at_least(qkv_count, ctas);
          __syncwarp();
        }
        qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, 0, g, group, position, slot, range.new_key >= 0,
                                                              sm.q, sm.new_kv);
      });
  for (int o = threadIdx.x; o < group * kHeadDim; o += kThreads) {
    const int64_t head_split = (int64_t(g) * group + o / kHeadDim) * max_splits + split;
    split_values[head_split * kHeadDim + o % kHeadDim] = sm.partial[o];
    if (o % kHeadDim == 0)
      reinterpret_cast<float2*>(split_stats)[head_split] = make_float2(stat_max[o / kHeadDim], stat_sum[o / kHeadDim]);
  }
  __shared__ int last_split;
  __syncthreads();  // the split's values and statistics are written (then released with its count)
  if (threadIdx.x == 0) {
    last_split = atom_acq_rel_gpu_add(splits_done + g, 1) + 1 == uint32_t(splits);
  }
  __syncthreads();  // (the last split's thread 0 acquired every other split's writes; the barrier passes them on)
  if (!last_split) return;
  if (warp < group) {
    const int64_t h = int64_t(g) * group + warp;
    const float2 stat = lane < splits ? __ldcg(reinterpret_cast<const float2*>(split_stats) + h * max_splits + lane)
                                      : make_float2(-FLT_MAX, 0.0f);
    const float m = warp_max(stat.x);
    const float w = lane < splits ? expf(stat.x - m) : 0.0f;
    const float total = warp_sum(stat.y * w);
    sm.weights[warp * (kMaxSplits + 1) + lane] = w;
    if (lane == 0) sm.weights[warp * (kMaxSplits + 1) + kMaxSplits] = total;
  }
  __syncthreads();
  for (int o = threadIdx.x; o < group * kHeadDim; o += kThreads) {
    const float* w = sm.weights + (o / kHeadDim) * (kMaxSplits + 1);
    const float* values = split_values + (int64_t(g) * group + o / kHeadDim) * max_splits * kHeadDim;
    float value = 0.0f;
    for (int s = 0; s < splits; ++s) value += __ldcg(values + int64_t(s) * kHeadDim + o % kHeadDim) * w[s];
    out[int64_t(g) * group * kHeadDim + o] = __float2bfloat16_rn(value / w[kMaxSplits]);
  }
  __syncthreads();  // the head's output is written: released with its mark
  if (threadIdx.x == 0) red_release_gpu_add(heads_merged + g, 1u);
}

// kGeneral: the instance with the diagnostic modes (kBulkCopies, kStageStamps, kContiguousRows) and o slices of any
// width; the other assumes row_pieces divides the block and compiles the diagnostics out, so its loops carry less
// code (instruction fetch was their top stall, ITERATIONS.md session 10).
template <int kHeadDim, int kVecs, bool kGeneral>
__global__ void __launch_bounds__(kThreads, 1) wavefront_kernel(QkvAttentionOArgs a, Params pr, Layout l) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kGroup = kGroupRows<kVecs>;
  using Ring = gemv_ring::Ring<kVecs, kGroup, kStages, kInFlight, kThreads>;
  static_assert(Ring::kBytes == size_t(kStages) * kStagePieces * 16, "a stage is 64 KB");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float warp_sq[kWarps];
  const QkNormRopeCacheArgs& p = a.attention.prep;
  const int cta = blockIdx.x, ctas = gridDim.x;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int kv_heads = int(p.kv_heads), group = int(p.q_heads / p.kv_heads);
  const int64_t q_dim = p.q_heads * kHeadDim, hidden = a.hidden;
  const int head_cols = group * kHeadDim;  // o columns of one kv head
  uint64_t* trace = cta < pr.o_ctas ? a.trace : nullptr;
  const bool stage_stamps = kGeneral && a.chain_steps > 0 && (a.chain_steps & kStageStamps);
  const auto stamp = [&](int event, bool diagnostic = false) {
    if (trace != nullptr && threadIdx.x == 0 && (diagnostic || !stage_stamps || event < 5 || event > 8))
      trace[cta * kQkvAttentionOTraceEvents + event] = global_timer_ns();
  };
  stamp(kTraceStart);
  if (trace != nullptr && threadIdx.x == 0) trace[cta * kQkvAttentionOTraceEvents + kTraceAttended] = 0;
  // (An early split waits for a count the CTAs give only with kHeadCounts.)
  const int requested = a.chain_steps < 0 ? kDefaultSteps : a.chain_steps;
  const int steps = requested & kContiguousRows ? requested & ~(kHeadCounts | kEarlySplits)
                                                : requested | (requested & kEarlySplits ? kHeadCounts : 0);
  const bool contiguous = kGeneral && (steps & kContiguousRows);
  const bool bulk = kGeneral && (steps & kBulkCopies);
  __shared__ uint64_t stage_bars[kStages];  // kBulkCopies: stage s completes on stage_bars[s % kStages]
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) mbarrier_init(&stage_bars[i], 1);
    fence_mbarrier_init();
  }
  // Every CTA of the grid is resident once all have passed this point, so the next kernel can only take SM room
  // none of them needs: the waits below on other CTAs of this grid cannot starve.
  pdl_launch_dependents();

  uint32_t* departures = reinterpret_cast<uint32_t*>(a.workspace);  // CTAs done
  uint32_t* qkv_done = departures + 1;        // (kv_heads): CTAs whose QKV rows of the head are written
  uint32_t* splits_done = qkv_done + kv_heads;      // (kv_heads): splits written (attend_split)
  uint32_t* heads_merged = splits_done + kv_heads;  // (kv_heads): 1 once the head's output is in attention.out

  // The stream: QKV stages, then o stages.
  const bool with_qkv = a.w_qkv != nullptr;
  const int64_t head_rows = int64_t(group + 2) * kHeadDim;  // QKV rows of one kv head: its q heads, k, v
  const int64_t r0 = int64_t(cta) * head_rows / ctas;       // this CTA's first row of each head
  const int per_head = with_qkv ? int((int64_t(cta) + 1) * head_rows / ctas - r0) : 0;
  const int64_t all_rows = head_rows * kv_heads;  // kContiguousRows: this CTA's block of them
  const int64_t block0 = int64_t(cta) * all_rows / ctas;
  const int qkv_rows = !with_qkv ? 0 : contiguous ? int((int64_t(cta) + 1) * all_rows / ctas - block0)
                                                  : per_head * kv_heads;
  // The CTA's rows of its first `heads` kv heads (kContiguousRows: all of them or none).
  const auto rows_of = [&](int heads) { return contiguous ? (heads == kv_heads ? qkv_rows : 0) : heads * per_head; };
  const int qkv_stages = (qkv_rows + kGroup - 1) / kGroup;
  // This CTA's QKV row i (head i / per_head) as a row of w_qkv and of qkv, a table in shared memory: computed in
  // the copies' issue loop, its 64-bit divisions cost ~4% of the step (ITERATIONS.md session 10).
  int32_t* row_table = reinterpret_cast<int32_t*>(smem + l.rows);  // (qkv_rows)
  for (int i = threadIdx.x; i < qkv_rows; i += kThreads) {
    if (contiguous) {
      row_table[i] = int(block0) + i;
      continue;
    }
    const int g = i / per_head, r = int(r0) + i % per_head;
    row_table[i] = r < group * kHeadDim         ? g * group * kHeadDim + r
                   : r < (group + 1) * kHeadDim ? int(q_dim) + g * kHeadDim + (r - group * kHeadDim)
                                                : int(q_dim) + (kv_heads + g) * kHeadDim + (r - (group + 1) * kHeadDim);
  }
  __syncthreads();
  const auto qkv_row = [&](int i) { return int64_t(row_table[i]); };
  const int64_t o_row0 = int64_t(cta) * pr.o_rows_per_cta;
  const int64_t o_rows_left = hidden - o_row0;
  const int o_rows = o_rows_left <= 0 ? 0 : int(o_rows_left < pr.o_rows_per_cta ? o_rows_left : pr.o_rows_per_cta);
  const int row_pieces = head_cols / 8;           // 16-byte pieces of one o row's columns of one kv head
  const int slice_pieces = o_rows * row_pieces;   // of this CTA's rows
  const int slice_stride = pr.o_rows_per_cta * row_pieces;
  // This thread's o pieces j (piece threadIdx.x + j * kThreads of a head's slice: row piece / row_pieces, column
  // piece % row_pieces): their offsets from the head's first column of the CTA's first row. Where row_pieces
  // divides the block, every piece of a thread is in the same column (one x piece for all).
  const bool one_column = !kGeneral || kThreads % row_pieces == 0;
  const int my_column = int(threadIdx.x) % row_pieces;
  const auto o_piece_offset = [&](int j) {
    const int piece = int(threadIdx.x) + j * kThreads;
    const int row = one_column ? int(threadIdx.x) / row_pieces + j * (kThreads / row_pieces) : piece / row_pieces;
    const int col = one_column ? my_column : piece % row_pieces;
    return int64_t(row) * q_dim + col * 8;
  };
  const int o_stages = o_rows > 0 ? (kv_heads + pr.heads_per_stage - 1) / pr.heads_per_stage : 0;
  const int stages = qkv_stages + o_stages;
  const uint64_t policy = make_evict_first_policy();
  const Ring ring{reinterpret_cast<uint4*>(smem), hidden / 8, policy};
  // Stage s's copies of this thread's pieces, one cp.async group (also past the last stage: read() counts them).
  // The o pieces a thread copies are the ones it multiplies, so no barrier guards the ring here either.
  const auto issue = [&](int s) {
    if (bulk) {
      if (s >= stages || warp != 0) return;
      uint64_t* bar = &stage_bars[s % kStages];
      uint4* dst = ring.stage(s);
      if (s < qkv_stages) {
        const int first = s * kGroup, n = min(kGroup, qkv_rows - first);
        if (lane == 0) mbarrier_arrive_expect_tx(bar, uint32_t(n * hidden * 2));
        __syncwarp();
        for (int j = lane; j < n; j += kWarpSize)
          bulk_copy_g2s(dst + j * Ring::kRowVecs, a.w_qkv + qkv_row(first + j) * hidden, uint32_t(hidden * 2), bar,
                        policy);
        return;
      }
      const int h0 = (s - qkv_stages) * pr.heads_per_stage;
      const int heads = min(pr.heads_per_stage, kv_heads - h0);
      if (lane == 0) mbarrier_arrive_expect_tx(bar, uint32_t(heads * o_rows * head_cols * 2));
      __syncwarp();
      for (int i = lane; i < heads * o_rows; i += kWarpSize) {
        const int k = i / o_rows, row = i % o_rows;
        bulk_copy_g2s(dst + k * slice_stride + row * row_pieces,
                      a.w_o + (o_row0 + row) * q_dim + int64_t(h0 + k) * head_cols, uint32_t(head_cols * 2), bar,
                      policy);
      }
      return;
    }
    if (s < qkv_stages) {
      ring.issue(s, int64_t(s) * kGroup, qkv_rows,
                 [&](int64_t i) { return reinterpret_cast<const uint4*>(a.w_qkv + qkv_row(int(i)) * hidden); });
      return;
    }
    if (s < stages) {
      uint4* dst = ring.stage(s);
      const int h0 = (s - qkv_stages) * pr.heads_per_stage;
      for (int k = 0; k < pr.heads_per_stage && h0 + k < kv_heads; ++k) {
        const bf16* head_w_o = a.w_o + o_row0 * q_dim + int64_t(h0 + k) * head_cols;
#pragma unroll
        for (int j = 0; j < kMaxOPieces; ++j) {
          const int piece = int(threadIdx.x) + j * kThreads;
          if (piece >= slice_pieces) break;
          cp_async_16B_policy(dst + k * slice_stride + piece, head_w_o + o_piece_offset(j), policy);
        }
      }
    }
    cp_async_commit();
  };

  for (int s = 0; s < kInFlight; ++s) issue(s);
  uint4 norm_w[kVecs];
  if (with_qkv) gemv_ring::load_norm_weight<kVecs, kThreads>(a.qkv_norm_weight, hidden, norm_w);
  stamp(kTraceIssued);
  pdl_wait();  // the residual, its partials or delta, and the cache come from earlier kernels
  stamp(kTraceWaited);
  float x[kVecs][8] = {};
  if (with_qkv) {
    if (a.residual_delta != nullptr)
      gemv_ring::normed_with_delta<kVecs, kThreads>(a.residual, a.residual_delta, a.delta_copies, norm_w, p.eps,
                                                    hidden, warp_sq, x);
    else
      gemv_ring::normed_from_partials<kVecs, kThreads>(a.residual, a.qkv_norm_partials, a.qkv_partial_count,
                                                       norm_w, p.eps, hidden, x);
  }
  stamp(kTraceNormed);

  // This CTA's split, if the position needs it: task j of splits x kv_heads runs on CTA j * o_ctas / tasks.
  const int32_t position = p.positions[0];
  const int splits = min(pr.max_splits, (position + pr.keys_per_split) / pr.keys_per_split);
  const int tasks = splits * kv_heads;
  int task = (cta * tasks + pr.o_ctas - 1) / pr.o_ctas;  // the first j with j * o_ctas >= cta * tasks
  if (task >= tasks || task * pr.o_ctas / tasks != cta) task = -1;
  const int task_head = task >= 0 ? task / splits : 0, task_split = task >= 0 ? task % splits : 0;
  // It runs after the stage holding the CTA's last QKV row of head task_head + kLag with kEarlySplits, else after
  // its last QKV stage (-1: before the first stage).
  const int trigger_rows =
      steps & kEarlySplits ? min(qkv_rows, (min(task_head + kLag, kv_heads - 1) + 1) * per_head) : qkv_rows;
  const int trigger_stage = trigger_rows == 0 ? -1 : (trigger_rows - 1) / kGroup;

  const auto attend = [&](float* scratch) {
    attend_split<kHeadDim>(p, a.attention.scale, with_qkv ? qkv_done + task_head : nullptr, uint32_t(ctas),
                           task_head, task_split, splits, position, pr.max_splits,
                           {reinterpret_cast<bf16*>(smem + l.q), reinterpret_cast<bf16*>(smem + l.new_kv),
                            reinterpret_cast<float*>(smem + l.partial), reinterpret_cast<float*>(smem + l.weights),
                            scratch},
                           a.workspace, a.attention.out);
    stamp(kTraceAttended);
  };

  // The QKV rows: each stage's warp sums into dots; a kv head's rows, once all are in, are written and counted.
  float* dots = reinterpret_cast<float*>(smem + l.dots);  // (kWarps, qkv_rows_max)
  int heads_counted = 0;
  const auto count_heads = [&](int rows_done) {
    const int done = contiguous ? (rows_done == qkv_rows ? kv_heads : 0)
                     : per_head == 0 ? kv_heads
                                     : min(kv_heads, rows_done / per_head);
    if (done == heads_counted) return;
    __syncthreads();  // every warp's sums of those rows are in dots
    for (int i = rows_of(heads_counted) + int(threadIdx.x); i < rows_of(done); i += kThreads) {
      float y = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) y += dots[w * pr.qkv_rows_max + i];  // a fixed order
      a.qkv_out[qkv_row(i)] = __float2bfloat16_rn(y);
    }
    __syncthreads();  // the rows are written: released with the counts
    if (threadIdx.x == 0)
      for (int g = heads_counted; g < done; ++g) red_release_gpu_add(qkv_done + g, 1u);
    heads_counted = done;
    if (done == kv_heads) stamp(kTraceQkvDone);
  };
  if (with_qkv) count_heads(0);  // a CTA without QKV rows (more CTAs than a head's rows) counts itself in now

  const auto qkv_stage = [&](int s) {
    uint4 w[kGroup][kVecs];
    if (bulk) mbarrier_wait_parity(&stage_bars[s % kStages], uint32_t(s / kStages) & 1);
    ring.read(s, int64_t(s) * kGroup, qkv_rows, w);
    if (stage_stamps && s % 2 == 0 && s <= 4) stamp(6 + s / 2, true);
    if (bulk) __syncthreads();  // a bulk copy overwrites the whole stage: every thread has read it
    issue(s + kInFlight);  // into the stage s - 1 used: this thread has read its pieces of it
    const float total = gemv_ring::dot_group<kVecs, kGroup>(w, x);
    const int row = s * kGroup + warp_sum_transposed_index<kGroup>(lane);
    if (lane % (kWarpSize / kGroup) == 0 && row < qkv_rows) dots[warp * pr.qkv_rows_max + row] = total;
    if (stage_stamps && s == 4) stamp(5, true);
    // (Every count is in before the CTA's own split can wait for one: that split runs after this stage at latest.)
    if ((steps & kHeadCounts) || s == qkv_stages - 1) count_heads(min(qkv_rows, (s + 1) * kGroup));
  };
  // The stages up to the split's trigger, the split, the rest: the split is outside the loops, so the loops keep
  // their registers (a call inside one made ptxas keep the loop's state on the stack).
  const int stages_before = task >= 0 ? trigger_stage + 1 : qkv_stages;
  for (int s = 0; s < stages_before; ++s) qkv_stage(s);
  // Its scratch: the stage just multiplied (every thread has read its pieces), or before the first stage the one
  // not issued yet.
  if (task >= 0) attend(reinterpret_cast<float*>(ring.stage(trigger_stage >= 0 ? trigger_stage : kStages - 1)));
  for (int s = stages_before; s < qkv_stages; ++s) qkv_stage(s);

  float acc[kMaxOPieces] = {};  // this thread's o pieces, summed over the kv heads
  bf16* x_s = reinterpret_cast<bf16*>(smem + l.x);  // (q_dim): the attention output, the heads read so far
  // The heads' outputs into x_s: with kEarlySplits each head when the stage holding its columns comes up (the
  // heads are merged at different times); else all at the first o stage, one wait and one round trip to L2 (the
  // splits all run after the QKV rows, so the heads are merged at about the same time).
  const auto read_heads = [&](int first, int end) {
    if (threadIdx.x == 0)
      for (int g = first; g < end; ++g) spin_until_at_least(heads_merged + g, 1u);
    __syncthreads();
    const uint4* merged = reinterpret_cast<const uint4*>(a.attention.out);
    for (int i = first * row_pieces + int(threadIdx.x); i < end * row_pieces; i += kThreads)
      reinterpret_cast<uint4*>(x_s)[i] = __ldcg(merged + i);
    __syncthreads();
    if (first == 0) stamp(kTraceFirstHead);
    if (end == kv_heads) stamp(kTraceLastHead);
  };
  for (int s = qkv_stages; s < stages; ++s) {
    if (bulk) __syncthreads();  // a bulk copy overwrites the whole stage: every thread has read it
    issue(s + kInFlight);  // into the stage s - 1 used: its FMAs are done
    cp_async_wait<kInFlight>();
    if (bulk) mbarrier_wait_parity(&stage_bars[s % kStages], uint32_t(s / kStages) & 1);
    const uint4* staged = ring.stage(s);
    const int h0 = (s - qkv_stages) * pr.heads_per_stage;
    if (!(steps & kEarlySplits) && s == qkv_stages) read_heads(0, kv_heads);
    for (int k = 0; k < pr.heads_per_stage && h0 + k < kv_heads; ++k) {
      const int g = h0 + k;
      if (steps & kEarlySplits) read_heads(g, g + 1);
      const bf16* x_head = x_s + g * head_cols;
      float xf[8];
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(x_head)[my_column], xf);
#pragma unroll
      for (int j = 0; j < kMaxOPieces; ++j) {
        const int piece = int(threadIdx.x) + j * kThreads;
        if (piece >= slice_pieces) break;
        float wf[8];
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(staged[k * slice_stride + piece]), wf);
        if (!one_column) bf16x8_to_float(reinterpret_cast<const Bf16x8*>(x_head)[piece % row_pieces], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[j] += wf[e] * xf[e];
      }
    }
  }
  stamp(kTraceORows);
  cp_async_wait<0>();
  __syncthreads();  // every stage is read: stage 0 holds the pieces' sums now

  // Σ residual² over this CTA's rows for the next norm, 0 for a CTA within o_ctas without rows.
  float sq = 0.0f;
  if (o_rows > 0) {
    float* sums = reinterpret_cast<float*>(ring.stage(0));  // (o_rows, row_pieces)
#pragma unroll
    for (int j = 0; j < kMaxOPieces; ++j) {
      const int piece = int(threadIdx.x) + j * kThreads;
      if (piece < slice_pieces) sums[piece] = acc[j];
    }
    __syncthreads();
    // A warp per row: its sum, then the residual update as v2 makes it (the delta first, then the o projection).
    for (int i = warp; i < o_rows; i += kWarps) {
      float y = 0.0f;
      for (int c = lane; c < row_pieces; c += kWarpSize) y += sums[i * row_pieces + c];
      y = warp_sum(y);
      if (lane == 0) {
        // The delta zeroed for the next MLP launch: every CTA normed it before it counted its QKV rows in, and
        // this CTA has seen every head merged.
        const bf16 h = qkv_attention_o_plan::residual_with_delta(a.residual, a.residual_delta, a.delta_copies,
                                                                 hidden, o_row0 + i);
        const float updated = bf16_round(__bfloat162float(h) + bf16_round(y));
        a.residual[o_row0 + i] = __float2bfloat16_rn(updated);
        sq += updated * updated;
      }
    }
  }
  if (lane == 0) warp_sq[warp] = sq;
  __syncthreads();
  if (threadIdx.x == 0 && cta < pr.o_ctas) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += warp_sq[w];
    a.norm_partials[cta] = total;
  }
  stamp(kTraceEnd);
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(departures, 1u) + 1 == uint32_t(ctas)) {
    // Every CTA is past its last wait: ready for the next launch.
    for (int g = 0; g < kv_heads; ++g) qkv_done[g] = splits_done[g] = heads_merged[g] = 0;
    *departures = 0;
  }
#endif
}

struct Plan {
  Params params;
  Layout layout;
  int ctas, vecs;
};

// false where v8 does not take the args.
bool plan_for(const QkvAttentionOArgs& a, Plan& plan) {
  const QkNormRopeCacheArgs& p = a.attention.prep;
  if (p.tokens != 1 || (p.head_dim != 64 && p.head_dim != 128)) return false;
  if (p.kv_heads < 1 || p.q_heads % p.kv_heads != 0 || p.q_heads / p.kv_heads > kMaxGroup) return false;
  if (a.hidden < 8 || a.hidden % 8 != 0 || a.workspace == nullptr || a.w_o == nullptr || a.residual == nullptr ||
      a.attention.out == nullptr || a.norm_partials == nullptr || a.delta_copies < 1)
    return false;
  if (a.attention.max_position < 0 || a.attention.max_position >= p.max_ctx) return false;
  if (a.keys_per_split < 0 || a.keys_per_split > kMaxKeysPerSplit) return false;
  if (device_compute_major() < 9) return false;
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned(a.w_o) || !aligned(a.attention.out)) return false;
  if (a.w_qkv != nullptr) {
    if (a.qkv_norm_weight == nullptr || a.qkv_out == nullptr || a.qkv_out != p.qkv || !aligned(a.w_qkv) ||
        !aligned(a.qkv_norm_weight) || !aligned(a.residual) || !aligned(a.residual_delta))
      return false;
    if (a.residual_delta == nullptr &&
        (a.qkv_norm_partials == nullptr || a.qkv_partial_count < 1 || a.qkv_partial_count > kMaxNormPartials))
      return false;
  }
  const int64_t hidden_pieces = a.hidden / 8;
  plan.vecs = hidden_pieces <= kThreads ? 1 : hidden_pieces <= 2 * kThreads ? 2 : hidden_pieces <= 4 * kThreads ? 4 : 0;
  if (plan.vecs == 0) return false;
  plan.ctas = device_sm_count();
  const Grid grid = grid_for(a.hidden, p.kv_heads);
  Params& pr = plan.params;
  pr.max_splits = max_splits_for(grid, p.kv_heads);
  pr.keys_per_split = a.keys_per_split > 0 ? a.keys_per_split : kDefaultKeysPerSplit;
  pr.o_rows_per_cta = grid.rows_per_cta;
  pr.o_ctas = grid.ctas;
  const int64_t row_pieces = p.q_heads / p.kv_heads * p.head_dim / 8;
  const int64_t slice_pieces = int64_t(pr.o_rows_per_cta) * row_pieces;
  pr.heads_per_stage = int(std::min<int64_t>(p.kv_heads, kStagePieces / slice_pieces));
  const int64_t head_rows = (p.q_heads / p.kv_heads + 2) * p.head_dim;
  // (kContiguousRows: a block of ceil(all rows / CTAs))
  pr.qkv_rows_max = int(std::max((head_rows + plan.ctas - 1) / plan.ctas * p.kv_heads,
                                 (head_rows * p.kv_heads + plan.ctas - 1) / plan.ctas));
  // All CTAs resident at once, a split at least per kv head, each thread's o pieces within kMaxOPieces.
  if (grid.ctas > plan.ctas || pr.max_splits < 1 || grid.ctas > kMaxNormPartials || pr.heads_per_stage < 1 ||
      (slice_pieces + kThreads - 1) / kThreads > kMaxOPieces)
    return false;
  if (attention_warp::scratch_bytes(kWarps, int(p.q_heads / p.kv_heads), int(p.head_dim)) > size_t(kStagePieces) * 16)
    return false;
  plan.layout = layout_for(int(p.head_dim), int(p.q_heads), pr.qkv_rows_max);
  return plan.layout.bytes <= kMaxSmem && plan.layout.bytes <= size_t(device_optin_smem_bytes()) - 1024;
}

template <int kHeadDim, int kVecs, bool kGeneral>
void launch_plan(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  constexpr auto kernel = wavefront_kernel<kHeadDim, kVecs, kGeneral>;
  static std::atomic<bool> configured{false};  // set once to the most any shape asks for
  if (!configured.load()) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxSmem)));
    configured.store(true);
  }
  launch(kernel, dim3(unsigned(plan.ctas)), dim3(kThreads), plan.layout.bytes, stream, a, plan.params, plan.layout);
}

template <int kHeadDim, bool kGeneral>
void launch_head_dim(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  if (plan.vecs == 1)
    launch_plan<kHeadDim, 1, kGeneral>(a, plan, stream);
  else if (plan.vecs == 2)
    launch_plan<kHeadDim, 2, kGeneral>(a, plan, stream);
  else
    launch_plan<kHeadDim, 4, kGeneral>(a, plan, stream);
}

template <bool kGeneral>
void launch_general(const QkvAttentionOArgs& a, const Plan& plan, cudaStream_t stream) {
  if (a.attention.prep.head_dim == 128)
    launch_head_dim<128, kGeneral>(a, plan, stream);
  else
    launch_head_dim<64, kGeneral>(a, plan, stream);
}

}  // namespace

bool qkv_attention_o_v8_supports(const QkvAttentionOArgs& a) {
  Plan plan;
  return plan_for(a, plan);
}

void launch_qkv_attention_o_v8(const QkvAttentionOArgs& a, cudaStream_t stream) {
  Plan plan;
  if (!plan_for(a, plan)) throw std::invalid_argument("v8_qkv_attention_o_wavefront: unsupported args");
  const int64_t row_pieces = a.attention.prep.q_heads / a.attention.prep.kv_heads * a.attention.prep.head_dim / 8;
  const bool diagnostics = a.chain_steps > 0 && (a.chain_steps & (kBulkCopies | kStageStamps | kContiguousRows));
  if (diagnostics || kThreads % row_pieces != 0)
    launch_general<true>(a, plan, stream);
  else
    launch_general<false>(a, plan, stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
