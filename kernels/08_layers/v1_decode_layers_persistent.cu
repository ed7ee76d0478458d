// v1_decode_layers_persistent: every layer of a batch-1 decode step in one persistent kernel (sm_90).
//
// Why: with one kernel per GEMV the step pays a grid-wide wait at each of the five boundaries of a layer (the next
// kernel's griddepcontrol.wait releases only when the whole previous grid has drained): ~3-5 us each, during which
// HBM streams little (profiles/decode-step-qwen3-8b.md, session 3). Weights never depend on activations, so here
// the weight stream never stops: one CTA per SM, and in each CTA a producer thread walks the CTA's share of every
// weight matrix of every layer in order (qkv, o, gate|up, down, next layer ...) with TMA bulk copies into a ring
// of 48 KB shared-memory stages. It waits only for a free slot, never for an activation. Eight consumer warps wait
// for the activations a phase needs (global counters the producing CTAs bump when their rows are written), then
// multiply the stages as they arrive. A wait for the attention or for the last CTA of the previous GEMV costs the
// consumers time, and the memory system only what the ring cannot cover (2 x 48 KB per SM ~ 12.7 MB ~ 2.8 us of
// HBM time; deeper rings measured no faster, bench/results/decode-layers-trace-*).
//
// What it measured (H200, ITERATIONS.md session 4, profiles/decode-step-qwen3-8b.md): the GEMV phases stream at
// 77-100% of the read peak, but the layer's chain of dependent steps (attention, the four counter waits) runs
// while every global round trip takes microseconds, and the whole step is slower than the five-launch chain it
// replaces. Kept as the baseline of the persistent design; the engine runs it only when asked (--decode-layers).
//
// Phases of a layer, each CTA doing its contiguous share of rows (n * cta / grid ... n * (cta + 1) / grid):
//   qkv     qkv = W_qkv · rmsnorm(h)                     every CTA normalizes h itself (8 KB from L2)
//   attn    QK-norm, RoPE, cache store, split-KV attention, kv_heads x splits CTAs; the last split of a kv head
//           merges the head's partials (flash-decoding) into attn
//   o       h = bf16(h + bf16(W_o · attn))               h's rows owned by the CTA that owns them in `down` too
//   gate_up act = bf16(bf16(silu(g)) * u), g|u = W_gu · rmsnorm(h)   a stage holds R gate rows then R up rows
//   down    h = bf16(h + bf16(W_down · act))
// A phase starts when its input's counter has reached the number of CTAs that produce it (the grid, or kv_heads
// for attn). Every scratch buffer is rewritten only after everyone who reads it has signalled a later phase, so no
// buffer is double-buffered (the argument is spelled out at each wait below).
//
// Memory-model contract: a producing CTA's consumers pass a named barrier, then thread 0 issues __threadfence()
// and an atomicAdd; a waiting CTA's thread 0 spins with ld.acquire.gpu and releases the others with a named
// barrier. Everything another CTA wrote in this launch is read with ld.global.cg (L2), never through L1, which is
// not coherent across SMs. The last CTA to finish zeroes the counters, so the next launch starts from zero.
//
// PRECOND (supports()): sm_90; batch 1; head_dim 64 or 128; q_heads / kv_heads <= 8; kv_heads <= SMs; hidden,
// q_dim, inter multiples of 8 and at most 24576; a stage holds at least one row (hidden <= 12288 for a gate|up
// row pair, q_dim and inter <= 24576); at most 256 keys per attention split (max_position + 1 <= 256 x
// min(16, SMs / kv_heads): 4096 positions for Qwen3-8B on 132 SMs); one CTA of this kernel fits per SM. The grid
// is one CTA per SM and needs every CTA resident at once (spin waits): nothing else may occupy the GPU's SMs for
// good while it runs (the engine's stream runs one kernel at a time), and one launch at a time may use a sync
// buffer. A counter that never completes (a bug) traps after ~2^24 polls instead of hanging; the sync words are
// then left nonzero, and the context is lost anyway.
#include <cuda_bf16.h>

#include <algorithm>
#include <mutex>

#include "kernels/03_rope/qk_norm_rope.cuh"
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

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * kWarpSize;
// + the producer warp. Nine warps: three share one scheduler's register file, so a thread gets at most 168
// registers (setmaxnreg with a producer warpgroup did not make ptxas allocate more to the consumers).
constexpr int kThreads = kConsumers + kWarpSize;
constexpr int kStageBytes = 48 * 1024;
constexpr int kMaxStages = 4;
constexpr int kDefaultStages = 2;
constexpr int kMaxStageRows = 8;  // rows one stage holds (a gate|up stage: half gate, half up)
constexpr int kMaxVecs = 12;      // 16-byte vectors of the input one consumer thread holds: K <= 12 * 8 * 256
constexpr int64_t kMaxK = int64_t(kMaxVecs) * 8 * kConsumers;
constexpr int kMaxGroup = 8;
constexpr int kMaxSplits = 16;
constexpr int kKeysPerPass = kConsumerWarps * kWarpSize;  // one key per consumer lane
constexpr uint32_t kConsumerBarrier = 1;

// Counters per layer: one per phase (attn counts merged kv heads) and one per kv head (its splits done).
enum Phase : int { kQkv = 0, kAttn = 1, kO = 2, kGateUp = 3, kDown = 4, kPhases = 5 };
// Layout of the sync words: [layer][phase], then [layer][kv head], then the exit counter.
__host__ __device__ constexpr int64_t sync_words(int64_t num_layers, int64_t kv_heads) {
  return num_layers * (kPhases + kv_heads) + 1;
}

// Trace points (DecodeLayersArgs::trace), per CTA and layer.
enum DecodeLayersTraceEvent : int {
  kTraceLayerStart = 0,   // consumers begin the layer (before waiting for the previous layer's down phase)
  kTraceQkvStart,         // qkv input ready (after the wait and the norm)
  kTraceQkvDone,          // this CTA's qkv rows written
  kTraceAttnDone,         // this CTA's attention split done (== kTraceQkvDone on CTAs without attention)
  kTraceOStart,           // attn complete (every kv head merged)
  kTraceODone,
  kTraceGateUpStart,
  kTraceGateUpDone,
  kTraceDownStart,
  kTraceDownDone,
  kTraceProduceQkv,       // the producer issues the first stage of each GEMV phase
  kTraceProduceO,
  kTraceProduceGateUp,
  kTraceProduceDown,
  kTraceQkvStarved,       // ns thread 0 waited for stages to arrive in each GEMV phase (not a time stamp)
  kTraceOStarved,
  kTraceGateUpStarved,
  kTraceDownStarved,
  kTraceAttnInput,        // attention CTAs: qkv complete and this head's q/k/v in shared memory
  kTraceAttnRoped,        // q and k normed and roped, the new k/v stored
  kTraceAttnKeys,         // scores and P·V of the CTA's keys done (before the merges)
};

__device__ __forceinline__ void trace_value(const DecodeLayersArgs& a, int64_t layer, int event, uint64_t value) {
  if (a.trace) a.trace[(int64_t(blockIdx.x) * a.num_layers + layer) * kDecodeLayersTraceEvents + event] = value;
}

__device__ __forceinline__ void trace_point(const DecodeLayersArgs& a, int64_t layer, int event) {
  if (a.trace) trace_value(a, layer, event, global_timer_ns());
}

__device__ __forceinline__ void consumer_sync() { named_barrier_sync(kConsumerBarrier, kConsumers); }

// Consumers: returns once *counter >= target (thread 0 spins, the others wait at the named barrier).
[[maybe_unused]] __device__ __forceinline__ void wait_counter(const uint32_t* counter, uint32_t target) {
  if (threadIdx.x == 0) spin_until_at_least(counter, target);
  consumer_sync();
}

// Consumers: after this CTA's rows of a phase are written, count the CTA in.
[[maybe_unused]] __device__ __forceinline__ void signal_counter(uint32_t* counter) {
  consumer_sync();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
  }
}

__device__ __forceinline__ uint4 load_cg_16B(const void* p) {
  return __ldcg(reinterpret_cast<const uint4*>(p));
}

// sum + Σ w[e] * x[e] over 8 bf16 weights and 8 fp32 inputs.
__device__ __forceinline__ float dot8_acc(const uint4& w, const float (&x)[8], float sum) {
  const auto* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(wp[i]);
    sum = fmaf(a.x, x[2 * i], sum);
    sum = fmaf(a.y, x[2 * i + 1], sum);
  }
  return sum;
}

// One GEMV phase as both roles see it: which weight rows this CTA streams and how they are cut into stages.
struct PhasePlan {
  const bf16* w;       // (rows_total [+ rows_total for the up half], k)
  int64_t k;
  int64_t row_begin, row_end;  // this CTA's rows (row pairs for gate|up)
  int rows_per_stage;          // rows (pairs) per stage
  bool pairs;                  // gate|up: each stage also holds the same rows of the second half
  int64_t rows_total;          // offset of the second half in rows
};

__device__ __forceinline__ PhasePlan plan_phase(const DecodeLayersArgs& a, const DecodeLayerWeights& L, int phase) {
  const int64_t q_dim = a.q_heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim;
  PhasePlan p{};
  int64_t n = 0;
  switch (phase) {
    case kQkv: p.w = L.wqkv, p.k = a.hidden, n = q_dim + 2 * kv_dim; break;
    case kO: p.w = L.wo, p.k = q_dim, n = a.hidden; break;
    case kGateUp: p.w = L.w_gate_up, p.k = a.hidden, n = a.inter, p.pairs = true; break;
    default: p.w = L.w_down, p.k = a.inter, n = a.hidden; break;
  }
  const int64_t grid = gridDim.x, cta = blockIdx.x;
  p.row_begin = n * cta / grid;
  p.row_end = n * (cta + 1) / grid;
  p.rows_total = n;
  const int64_t row_bytes = p.k * int64_t(sizeof(bf16)) * (p.pairs ? 2 : 1);
  const int cap = p.pairs ? kMaxStageRows / 2 : kMaxStageRows;
  p.rows_per_stage = int(std::min<int64_t>(cap, kStageBytes / row_bytes));
  return p;
}

// The producer (one thread): every stage of every GEMV phase of every layer, in the order the consumers take
// them. It waits for nothing but a free slot.
[[maybe_unused]] __device__ __forceinline__ void produce(const DecodeLayersArgs& a, unsigned char* ring, uint64_t* full, uint64_t* empty,
                        int stages) {
  const uint64_t policy = make_evict_first_policy();
  uint32_t stage = 0;
  for (int64_t l = 0; l < a.num_layers; ++l) {
    const DecodeLayerWeights L = a.layers[l];
    for (int phase = kQkv; phase <= kDown; ++phase) {
      if (phase == kAttn) continue;
      const PhasePlan p = plan_phase(a, L, phase);
      for (int64_t r = p.row_begin; r < p.row_end; r += p.rows_per_stage, ++stage) {
        const int64_t rows = std::min<int64_t>(p.rows_per_stage, p.row_end - r);
        if (r == p.row_begin)
          trace_point(a, l, phase == kQkv ? kTraceProduceQkv : phase == kO ? kTraceProduceO
                                                          : phase == kGateUp ? kTraceProduceGateUp : kTraceProduceDown);
        const uint32_t slot = stage % uint32_t(stages), use = stage / uint32_t(stages);
        if (use > 0) mbarrier_wait_parity(&empty[slot], (use - 1) & 1);
        const uint32_t bytes = uint32_t(rows * p.k * int64_t(sizeof(bf16)));
        unsigned char* dst = ring + size_t(slot) * kStageBytes;
        mbarrier_arrive_expect_tx(&full[slot], p.pairs ? 2 * bytes : bytes);
        bulk_copy_g2s(dst, p.w + r * p.k, bytes, &full[slot], policy);
        if (p.pairs) bulk_copy_g2s(dst + bytes, p.w + (p.rows_total + r) * p.k, bytes, &full[slot], policy);
      }
    }
  }
}

// Shared memory besides the ring (consumers only).
struct Scratch {
  float norm[kConsumerWarps];
  int last_split;  // this CTA merges its kv head (attention)
  int last_out;    // this CTA zeroes the counters (exit)
};

// Consumers: this thread's part of the phase input, x[j] = input vector (threadIdx.x + 256 j) of 8 bf16.
// For the norm phases, x = bf16(w * bf16(h * inv_rms)) as rmsnorm rounds; every CTA sums h² in the same order.
[[maybe_unused]] __device__ __forceinline__ void load_input(const bf16* src, int64_t k, const bf16* norm_weight, float eps, Scratch& s,
                           uint4 (&x)[kMaxVecs]) {
  const int t = threadIdx.x;
  const int64_t vecs = k / 8;
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int64_t v = t + int64_t(j) * kConsumers;
    x[j] = make_uint4(0, 0, 0, 0);
    if (v < vecs) {
      x[j] = load_cg_16B(src + v * 8);
      if (norm_weight) {
        const auto* p = reinterpret_cast<const __nv_bfloat162*>(&x[j]);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __bfloat1622float2(p[i]);
          sum_sq = fmaf(f.x, f.x, fmaf(f.y, f.y, sum_sq));
        }
      }
    }
  }
  if (!norm_weight) return;
  sum_sq = warp_sum(sum_sq);
  if (t % kWarpSize == 0) s.norm[t / kWarpSize] = sum_sq;
  consumer_sync();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kConsumerWarps; ++w) total += s.norm[w];
  const float inv_rms = 1.0f / sqrtf(total / float(k) + eps);
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int64_t v = t + int64_t(j) * kConsumers;
    if (v >= vecs) continue;
    float h[8], w[8], o[8];
    bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x[j]), h);
    bf16x8_to_float(reinterpret_cast<const Bf16x8*>(norm_weight)[v], w);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = w[e] * bf16_round(h[e] * inv_rms);
    const Bf16x8 packed = float_to_bf16x8(o);
    x[j] = reinterpret_cast<const uint4&>(packed);
  }
  // s.norm is rewritten only in the next norm phase, after several consumer_sync()s.
}

// Consumers: where a stage's row sums go. A gate|up stage holds `rows` gate rows, then the same rows of the up half,
// stored local_rows further on.
__device__ __forceinline__ int partial_index(int i, int rows, int local, int local_rows) {
  return i < rows ? local + i : local_rows + local + (i - rows);
}

// Consumers: waits until the stage-th stage of the kernel has landed; returns its ring slot. With tracing on, adds
// the time waited to starved_ns.
__device__ __forceinline__ uint32_t wait_for_stage(uint64_t* full, int stages, uint32_t stage, bool tracing,
                                                   uint64_t& starved_ns) {
  const uint32_t slot = stage % uint32_t(stages), use = stage / uint32_t(stages);
  const uint64_t wait_from = tracing ? global_timer_ns() : 0;
  mbarrier_wait_parity(&full[slot], use & 1);
  if (tracing) starved_ns += global_timer_ns() - wait_from;
  return slot;
}

// Consumers: the stages of one GEMV phase for the shapes that fill a stage exactly (Qwen3-8B: kRows x 4096 with
// kVecs = 2, or 2 x 12288 with kVecs = 6): every thread holds kVecs input vectors, all of a stage's loads are
// issued before the first product and each (row, vector) product is its own FMA chain, so a warp keeps
// kRows * kVecs independent chains in flight; the warp sums of all rows go through the butterfly level by level.
// (With one CTA of 8 consumer warps per SM there are two warps per scheduler: the latency of a dependent chain is
// not hidden by other warps, only by independent work within the warp.)
template <int kRows, int kVecs>
__device__ __forceinline__ void consume_stages_exact(const PhasePlan& p, const uint4 (&x)[kMaxVecs],
                                                     unsigned char* ring, uint64_t* full, uint64_t* empty, int stages,
                                                     uint32_t& stage, float* partials, int partial_cap, bool tracing,
                                                     uint64_t& starved_ns) {
  const int t = threadIdx.x, warp = t / kWarpSize, lane = t % kWarpSize;
  const int local_rows = int(p.row_end - p.row_begin);
  float* warp_partials = partials + warp * partial_cap;
  float xf[kVecs][8];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x[j]), xf[j]);
  for (int64_t r = p.row_begin; r < p.row_end; r += p.rows_per_stage, ++stage) {
    const int rows = int(std::min<int64_t>(p.rows_per_stage, p.row_end - r));
    const int stage_rows = p.pairs ? 2 * rows : rows;
    const uint32_t slot = wait_for_stage(full, stages, stage, tracing, starved_ns);
    const uint4* base = reinterpret_cast<const uint4*>(ring + size_t(slot) * kStageBytes);
    const int row_vecs = int(p.k / 8);
    uint4 w[kRows][kVecs];
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int j = 0; j < kVecs; ++j)
        w[i][j] = i < stage_rows ? base[i * row_vecs + t + j * kConsumers] : make_uint4(0, 0, 0, 0);
    float sums[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float acc[kVecs];
#pragma unroll
      for (int j = 0; j < kVecs; ++j) acc[j] = dot8_acc(w[i][j], xf[j], 0.0f);
      sums[i] = acc[0];
#pragma unroll
      for (int j = 1; j < kVecs; ++j) sums[i] += acc[j];
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[slot]);  // this warp is done reading the slot
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
#pragma unroll
      for (int i = 0; i < kRows; ++i) sums[i] += __shfl_xor_sync(0xffffffffu, sums[i], offset);
    const int local = int(r - p.row_begin);
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        if (i < stage_rows) warp_partials[partial_index(i, rows, local, local_rows)] = sums[i];
  }
}

// Consumers: the same for any shape the op supports (up to kMaxStageRows rows and kMaxVecs vectors per thread),
// one load and one chain at a time: slower, used where no exact shape fits (small test models).
[[maybe_unused]] __device__ __forceinline__ void consume_stages_generic(const PhasePlan& p, const uint4 (&x)[kMaxVecs],
                                                       unsigned char* ring, uint64_t* full, uint64_t* empty,
                                                       int stages, uint32_t& stage, float* partials, int partial_cap,
                                                       bool tracing, uint64_t& starved_ns) {
  const int t = threadIdx.x, warp = t / kWarpSize, lane = t % kWarpSize;
  const int64_t vecs = p.k / 8;
  const int local_rows = int(p.row_end - p.row_begin);
  float* warp_partials = partials + warp * partial_cap;
  for (int64_t r = p.row_begin; r < p.row_end; r += p.rows_per_stage, ++stage) {
    const int rows = int(std::min<int64_t>(p.rows_per_stage, p.row_end - r));
    const int stage_rows = p.pairs ? 2 * rows : rows;
    const uint32_t slot = wait_for_stage(full, stages, stage, tracing, starved_ns);
    const unsigned char* base = ring + size_t(slot) * kStageBytes;
    float sums[kMaxStageRows];
#pragma unroll
    for (int i = 0; i < kMaxStageRows; ++i) sums[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxVecs; ++j) {
      const int64_t v = t + int64_t(j) * kConsumers;
      if (v >= vecs) break;
      float xf[8];
      bf16x8_to_float(reinterpret_cast<const Bf16x8&>(x[j]), xf);
#pragma unroll
      for (int i = 0; i < kMaxStageRows; ++i) {
        if (i >= stage_rows) break;
        const uint4 w = *reinterpret_cast<const uint4*>(base + (int64_t(i) * p.k + v * 8) * int64_t(sizeof(bf16)));
        sums[i] = dot8_acc(w, xf, sums[i]);
      }
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[slot]);  // this warp is done reading the slot
    const int local = int(r - p.row_begin);
#pragma unroll
    for (int i = 0; i < kMaxStageRows; ++i) {
      if (i >= stage_rows) break;
      const float v = warp_sum(sums[i]);
      if (lane == 0) warp_partials[partial_index(i, rows, local, local_rows)] = v;
    }
  }
}

// Consumers: one GEMV phase. For each stage of this CTA's rows: wait for its bytes, dot every row with x, release
// the slot, and leave each warp's row sums in `partials` (warps, rows of the phase). No CTA-wide barrier per stage:
// the warps run through the stages independently and meet once, at the end of the phase, where the rows are summed
// over the warps and handed to epilogue(row, sum, second-half sum for gate|up).
template <class Epilogue>
__device__ __forceinline__ void consume(const PhasePlan& p, const uint4 (&x)[kMaxVecs], unsigned char* ring,
                                        uint64_t* full, uint64_t* empty, int stages, uint32_t& stage,
                                        float* partials, int partial_cap, bool tracing, uint64_t& starved_ns,
                                        Epilogue&& epilogue) {
  const int64_t vecs = p.k / 8;
  const int stage_rows = p.pairs ? 2 * p.rows_per_stage : p.rows_per_stage;
  if (vecs == 2 * kConsumers && stage_rows == 6)
    consume_stages_exact<6, 2>(p, x, ring, full, empty, stages, stage, partials, partial_cap, tracing, starved_ns);
  else if (vecs == 6 * kConsumers && stage_rows == 2)
    consume_stages_exact<2, 6>(p, x, ring, full, empty, stages, stage, partials, partial_cap, tracing, starved_ns);
  else
    consume_stages_generic(p, x, ring, full, empty, stages, stage, partials, partial_cap, tracing, starved_ns);
  const int t = threadIdx.x;
  const int local_rows = int(p.row_end - p.row_begin);
  consumer_sync();
  for (int i = t; i < local_rows; i += kConsumers) {
    float first = 0.0f, second = 0.0f;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) {
      first += partials[w * partial_cap + i];
      if (p.pairs) second += partials[w * partial_cap + local_rows + i];
    }
    epilogue(p.row_begin + i, first, second);
  }
  // `partials` is written again in the next GEMV phase, after the signal_counter() barrier that follows this one.
}

// Consumers of CTA (kv head g, split): QK-norm and RoPE of the group's q heads and of k, the cache store (by the
// split that owns the new position), attention over the split's keys with one key per lane, the partial written to
// the workspace; the kv head's last split merges all partials into attn.
// kGroup: a compile-time bound of q heads per kv head (registers scale with it); the runtime group is <= kGroup.
template <int kHeadDim, int kGroup>
__device__ __forceinline__ void attention(const DecodeLayersArgs& a, int64_t l, const DecodeLayerWeights& L, int splits,
                          unsigned char* attn_smem, Scratch& s) {
  constexpr int kPerLane = kHeadDim / 32;  // dims per lane in P·V (contiguous)
  constexpr int kRopePerLane = kHeadDim / 64;
  const int t = threadIdx.x, warp = t / kWarpSize, lane = t % kWarpSize;
  const int group = int(a.q_heads / a.kv_heads);
  const int g = int(blockIdx.x) / splits, split = int(blockIdx.x) % splits;
  const int64_t q_dim = a.q_heads * kHeadDim, kv_dim = a.kv_heads * kHeadDim;
  const int32_t pos = a.positions[0];
  const int64_t slot = a.slots ? a.slots[0] : 0;
  // The fused attention's split of the keys (the same ranges as v1-v12 of qkv_attention).
  const qkv_attention::KeyRange range = qkv_attention::key_range(pos, split, splits);
  const int64_t key_begin = range.key0, key_end = range.key0 + range.n_keys;
  const bool owner = range.new_key >= 0;
  // PRECOND max_position >= positions[0] keeps a split within the V staging; a position past the host's bound
  // would overrun shared memory, so it stops the kernel instead.
  if (key_end - key_begin > kKeysPerPass) __trap();
  bf16* k_cache = a.k_cache + l * a.layer_cache_elems;
  bf16* v_cache = a.v_cache + l * a.layer_cache_elems;
  const int64_t row_stride = a.kv_heads * kHeadDim;  // elements between positions
  const int64_t cache_base = slot * a.max_ctx * row_stride + int64_t(g) * kHeadDim;

  // Shared layout: the group's q heads (fp32, roped), the heads' raw qkv values, the per-warp partials.
  float* q_s = reinterpret_cast<float*>(attn_smem);                                   // (group, head_dim)
  bf16* raw = reinterpret_cast<bf16*>(q_s + kMaxGroup * kHeadDim);                   // (group + 2, head_dim)
  bf16* norms = raw + (kMaxGroup + 2) * kHeadDim;                           // q_norm, k_norm
  bf16* k_new = norms + 2 * kHeadDim;                                        // the new key, normed and roped
  float* inv_freq = reinterpret_cast<float*>(k_new + kHeadDim);              // (head_dim / 2)
  float* part = inv_freq + kHeadDim / 2;                                     // (warps, group, head_dim + 2)
  constexpr int kPartStride = kHeadDim + 2;
  bf16* v_stage = reinterpret_cast<bf16*>(part + kConsumerWarps * group * kPartStride);  // (keys, head_dim)

  // Loads that do not depend on this layer's qkv go out before the wait for it: every global round trip on this
  // chain costs microseconds while the weight stream keeps the memory system's queues full. First the cached V
  // rows of this CTA's keys (at most kKeysPerPass: make_plan sizes the split), copied into shared memory with
  // cp.async, so P·V below reads shared memory instead of paying a round trip per block of keys (measured: ~1 us
  // each; prefetching them into L1 did not help, and holding them in registers spilled).
  constexpr int kKeyVecs = kHeadDim / 8;
  for (int64_t i = t; i < (key_end - key_begin) * kKeyVecs; i += kConsumers) {
    const int64_t key = key_begin + i / kKeyVecs;
    const int c = int(i % kKeyVecs);
    if (key != pos) cp_async_16B(v_stage + (key - key_begin) * kHeadDim + c * 8, v_cache + cache_base + key * row_stride + c * 8);
  }
  cp_async_commit();
  // Then the norm weights and RoPE frequencies (nothing writes them).
  for (int i = t; i < kHeadDim; i += kConsumers) {
    norms[i] = L.q_norm[i];
    norms[kHeadDim + i] = L.k_norm[i];
    if (i < kHeadDim / 2) inv_freq[i] = a.inv_freq[i];
  }
  // qkv was written by every CTA in this layer's qkv phase (counter reached the grid below).
  wait_counter(a.sync + l * kPhases + kQkv, gridDim.x);
  for (int i = t; i < (group + 2) * kHeadDim / 8; i += kConsumers) {
    const int head = i / (kHeadDim / 8), v = i % (kHeadDim / 8);
    const int64_t src = head < group ? int64_t(g * group + head) * kHeadDim
                                     : q_dim + (head - group) * kv_dim + int64_t(g) * kHeadDim;
    reinterpret_cast<uint4*>(raw)[i] = load_cg_16B(a.qkv + src + v * 8);
  }
  consumer_sync();
  if (t == 0) trace_point(a, l, kTraceAttnInput);
  for (int item = warp; item < group + 2; item += kConsumerWarps) {
    if (item <= group) {
      float lo[kRopePerLane], hi[kRopePerLane];
      qk_norm_rope_warp<kRopePerLane>(raw + item * kHeadDim, item < group ? norms : norms + kHeadDim, a.eps, pos,
                                      inv_freq, a.attention_factor, lo, hi);
#pragma unroll
      for (int e = 0; e < kRopePerLane; ++e) {
        const int d = lane * kRopePerLane + e;
        if (item < group) {
          q_s[item * kHeadDim + d] = lo[e];
          q_s[item * kHeadDim + kHeadDim / 2 + d] = hi[e];
        } else {
          k_new[d] = __float2bfloat16_rn(lo[e]);
          k_new[kHeadDim / 2 + d] = __float2bfloat16_rn(hi[e]);
          if (owner) {
            k_cache[cache_base + pos * row_stride + d] = k_new[d];
            k_cache[cache_base + pos * row_stride + kHeadDim / 2 + d] = k_new[kHeadDim / 2 + d];
          }
        }
      }
    } else if (owner) {
      for (int d = lane; d < kHeadDim; d += kWarpSize) v_cache[cache_base + pos * row_stride + d] = raw[item * kHeadDim + d];
    }
  }
  cp_async_wait<0>();
  consumer_sync();  // q_s, k_new and every thread's V copies complete
  if (t == 0) trace_point(a, l, kTraceAttnRoped);

  float m[kGroup], lsum[kGroup], acc[kGroup][kPerLane];
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    m[h] = -INFINITY;
    lsum[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) acc[h][e] = 0.0f;
  }
  // One pass of at most 32 keys per warp (the plan keeps a CTA's keys within kKeysPerPass), one key per lane: a
  // lane's K row is one round trip (all its loads in flight at once), V comes from shared memory.
  using VLanes = std::conditional_t<kPerLane == 4, uint2, uint32_t>;  // kPerLane bf16
  for (int64_t first = key_begin + int64_t(warp) * kWarpSize; first < key_end; first += kKeysPerPass) {
    const int64_t key = first + lane;
    const bool valid = key < key_end;
    float score[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) score[h] = 0.0f;
    if (valid) {
      const uint4* krow = key == pos ? reinterpret_cast<const uint4*>(k_new)  // the new key: shared memory
                                     : reinterpret_cast<const uint4*>(k_cache + cache_base + key * row_stride);
      uint4 kv[kKeyVecs];
#pragma unroll
      for (int c = 0; c < kKeyVecs; ++c) kv[c] = krow[c];
#pragma unroll
      for (int c0 = 0; c0 < kKeyVecs; c0 += 4) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
        float kf[8];
        bf16x8_to_float(reinterpret_cast<const Bf16x8&>(kv[c0 + c]), kf);
#pragma unroll
        for (int h = 0; h < kGroup; ++h) {
          if (h >= group) break;
          const float4* q4 = reinterpret_cast<const float4*>(q_s + h * kHeadDim + (c0 + c) * 8);
          const float4 qa = q4[0], qb = q4[1];
          score[h] = fmaf(qa.x, kf[0], score[h]);
          score[h] = fmaf(qa.y, kf[1], score[h]);
          score[h] = fmaf(qa.z, kf[2], score[h]);
          score[h] = fmaf(qa.w, kf[3], score[h]);
          score[h] = fmaf(qb.x, kf[4], score[h]);
          score[h] = fmaf(qb.y, kf[5], score[h]);
          score[h] = fmaf(qb.z, kf[6], score[h]);
          score[h] = fmaf(qb.w, kf[7], score[h]);
        }
        }
      }
    }
    float p[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      if (h >= group) break;
      const float sc = valid ? score[h] * a.scale : -INFINITY;
      const float m_new = fmaxf(m[h], warp_max(sc));  // finite: lane 0's key is valid
      const float correction = expf(m[h] - m_new);
      p[h] = expf(sc - m_new);
      lsum[h] = lsum[h] * correction + warp_sum(p[h]);
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) acc[h][e] *= correction;
      m[h] = m_new;
    }
    // P·V: lane owns dims [lane * kPerLane, +kPerLane) of every head; V rows kBlock keys at a time, all loads of a
    // block issued before the first is used.
    const int keys = int(std::min<int64_t>(kWarpSize, key_end - first));
    constexpr int kBlock = 4;
#pragma unroll 1
    for (int j0 = 0; j0 < keys; j0 += kBlock) {
      VLanes vv[kBlock];
#pragma unroll
      for (int jj = 0; jj < kBlock; ++jj)
        if (j0 + jj < keys) {
          const int64_t key_j = first + j0 + jj;  // the new key's v comes from shared memory
          const bf16* src = key_j == pos ? raw + (group + 1) * kHeadDim : v_stage + (key_j - key_begin) * kHeadDim;
          vv[jj] = *reinterpret_cast<const VLanes*>(src + lane * kPerLane);
        }
#pragma unroll
      for (int jj = 0; jj < kBlock; ++jj) {
        if (j0 + jj >= keys) break;
        float vf[kPerLane];
        const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&vv[jj]);
#pragma unroll
        for (int e = 0; e < kPerLane / 2; ++e) {
          const float2 f = __bfloat1622float2(pairs[e]);
          vf[2 * e] = f.x, vf[2 * e + 1] = f.y;
        }
#pragma unroll
        for (int h = 0; h < kGroup; ++h) {
          if (h >= group) break;
          const float pj = __shfl_sync(0xffffffffu, p[h], j0 + jj);
#pragma unroll
          for (int e = 0; e < kPerLane; ++e) acc[h][e] = fmaf(pj, vf[e], acc[h][e]);
        }
      }
    }
  }
  if (t == 0) trace_point(a, l, kTraceAttnKeys);  // warp 0's keys (the others' end at the next barrier)
  // Merge the warps: partial per warp in shared memory, then this CTA's partial to the workspace.
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    if (h >= group) break;
    float* dst = part + (warp * group + h) * kPartStride;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) dst[lane * kPerLane + e] = acc[h][e];
    if (lane == 0) dst[kHeadDim] = m[h], dst[kHeadDim + 1] = lsum[h];
  }
  consumer_sync();
  // This CTA's partial of (head h, dim d): the warps' partials rescaled to their common maximum.
  const auto combine_warps = [&](int h, int d, float& o, float& m_max, float& total) {
    m_max = -INFINITY;
    for (int w = 0; w < kConsumerWarps; ++w) m_max = fmaxf(m_max, part[(w * group + h) * kPartStride + kHeadDim]);
    o = 0.0f, total = 0.0f;
    for (int w = 0; w < kConsumerWarps; ++w) {
      const float* src = part + (w * group + h) * kPartStride;
      if (src[kHeadDim] == -INFINITY) continue;
      const float f = expf(src[kHeadDim] - m_max);
      o += f * src[d];
      total += f * src[kHeadDim + 1];
    }
  };
  if (splits == 1) {
    // The CTA holds the whole head: no workspace round trip.
    for (int i = t; i < group * kHeadDim; i += kConsumers) {
      float o, m_max, total;
      combine_warps(i / kHeadDim, i % kHeadDim, o, m_max, total);
      a.attn[int64_t(g * group) * kHeadDim + i] = __float2bfloat16_rn(o / total);
    }
    signal_counter(a.sync + l * kPhases + kAttn);
    return;
  }
  // Workspace: (kv head, kMaxGroup heads, kMaxSplits splits, head_dim + 2), flash_decode.cuh's partial layout
  // (a head's splits side by side), so the merge below is merge_split_partials.
  float* head_ws = a.workspace + int64_t(g) * kMaxGroup * kMaxSplits * kPartStride;
  for (int i = t; i < group * kHeadDim; i += kConsumers) {
    const int h = i / kHeadDim, d = i % kHeadDim;
    float o, m_max, total;
    combine_warps(h, d, o, m_max, total);
    float* ws = head_ws + (int64_t(h) * kMaxSplits + split) * kPartStride;
    ws[d] = o;
    if (d == 0) ws[kHeadDim] = m_max, ws[kHeadDim + 1] = total;
  }
  consumer_sync();
  if (t == 0) {
    __threadfence();
    const uint32_t done = atomicAdd(a.sync + a.num_layers * kPhases + l * a.kv_heads + g, 1u);
    s.last_split = done == uint32_t(splits - 1);
    if (s.last_split) __threadfence();
  }
  consumer_sync();
  if (!s.last_split) return;
  // Splits without keys left max -inf, sum 0 and output 0: weight 0 in the merge.
  for (int i = t; i < group * kHeadDim; i += kConsumers) {
    const int h = i / kHeadDim, d = i % kHeadDim;
    a.attn[int64_t(g * group + h) * kHeadDim + d] = __float2bfloat16_rn(
        flash_decode::merge_split_partials<kHeadDim>(head_ws + int64_t(h) * kMaxSplits * kPartStride, splits, d));
  }
  signal_counter(a.sync + l * kPhases + kAttn);
}

// The attention's shared memory: q heads (fp32), raw q/k/v heads (bf16), the q/k norm weights and the new k
// (bf16), RoPE frequencies (fp32), per-warp partials of `group` heads, then the V rows of the CTA's keys (bf16).
__host__ __device__ constexpr int64_t attention_smem_bytes(int64_t head_dim, int64_t group) {
  return int64_t(kMaxGroup) * head_dim * 4 + (kMaxGroup + 2) * head_dim * 2 + 3 * head_dim * 2 + head_dim / 2 * 4 +
         int64_t(kConsumerWarps) * group * (head_dim + 2) * 4 + int64_t(kKeysPerPass) * head_dim * 2;
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 1)
    decode_layers_kernel(const DecodeLayersArgs a, int stages, int splits, int partial_cap) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem;
  unsigned char* attn_smem = ring + size_t(stages) * kStageBytes;
  auto* full = reinterpret_cast<uint64_t*>(attn_smem + attention_smem_bytes(kHeadDim, a.q_heads / a.kv_heads));
  uint64_t* empty = full + kMaxStages;
  auto* scratch = reinterpret_cast<Scratch*>(empty + kMaxStages);
  auto* partials = reinterpret_cast<float*>(scratch + 1);  // (consumer warps, partial_cap)
  const int warp = threadIdx.x / kWarpSize;
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) {
      mbarrier_init(&full[i], 1);
      mbarrier_init(&empty[i], kConsumerWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == kConsumerWarps) {
    // Weights are never written by another kernel: the producer may start before the PDL wait.
    if (elect_one_sync()) produce(a, ring, full, empty, stages);
    return;
  }
  pdl_wait();  // h (the embedding) and positions come from earlier kernels
  Scratch& s = *scratch;
  const uint32_t grid = gridDim.x;
  uint32_t* sync = a.sync;
  uint32_t stage = 0;
  uint4 x[kMaxVecs];
  // The epilogues capture pointers by value: capturing `a` by reference would copy the kernel's parameters to the
  // stack.
  bf16* const h = a.h;
  bf16* const qkv = a.qkv;
  bf16* const act = a.act;
  for (int64_t l = 0; l < a.num_layers; ++l) {
    const DecodeLayerWeights L = a.layers[l];
    uint32_t* counters = sync + l * kPhases;
    const bool tracer = threadIdx.x == 0 && a.trace;
    uint64_t starved = 0;
    if (tracer) trace_point(a, l, kTraceLayerStart);
    // The phases as a rolled loop with one call site of the stage loop: four inlined copies (one per GEMV phase)
    // would each start cold in the instruction cache, fetched from an L2 the weight stream keeps busy.
#pragma unroll 1
    for (int phase = kQkv; phase <= kDown; ++phase) {
      if (phase == kAttn) {
        if (int(blockIdx.x) < a.kv_heads * splits) {
          const int64_t group = a.q_heads / a.kv_heads;
          if (group <= 1)
            attention<kHeadDim, 1>(a, l, L, splits, attn_smem, s);
          else if (group <= 2)
            attention<kHeadDim, 2>(a, l, L, splits, attn_smem, s);
          else if (group <= 4)
            attention<kHeadDim, 4>(a, l, L, splits, attn_smem, s);
          else
            attention<kHeadDim, 8>(a, l, L, splits, attn_smem, s);
        }
        if (tracer) trace_point(a, l, kTraceAttnDone);
        continue;
      }
      // Wait for the phase's input:
      //   qkv     h from the previous layer's down phase (every CTA), or the embedding for layer 0. qkv is
      //           rewritten here only after the previous layer's attention read it (its o phase waited for the
      //           merged heads, its down phase for o).
      //   o       attn: every kv head merged. h's rows of this CTA are written by this CTA only (o and down split
      //           the rows the same way).
      //   gate|up h after every CTA's o rows.
      //   down    act: every CTA's gate|up rows. h is rewritten by down only after every CTA has read it for
      //           gate|up (that counter).
      if (phase == kO) {
        wait_counter(counters + kAttn, uint32_t(a.kv_heads));
      } else if (phase != kQkv) {
        wait_counter(counters + phase - 1, grid);
      } else if (l > 0) {
        wait_counter(counters - kPhases + kDown, grid);
      }
      const bool normed = phase == kQkv || phase == kGateUp;
      load_input(phase == kO ? a.attn : phase == kDown ? act : h,
                 phase == kO ? a.q_heads * kHeadDim : phase == kDown ? a.inter : a.hidden,
                 normed ? (phase == kQkv ? L.input_norm : L.post_norm) : nullptr, a.eps, s, x);
      if (tracer)
        trace_point(a, l, phase == kQkv ? kTraceQkvStart : phase == kO ? kTraceOStart
                                                         : phase == kGateUp ? kTraceGateUpStart : kTraceDownStart);
      consume(plan_phase(a, L, phase), x, ring, full, empty, stages, stage, partials, partial_cap, tracer, starved,
              [=](int64_t row, float first, float second) {
                if (phase == kQkv) {
                  qkv[row] = __float2bfloat16_rn(first);
                } else if (phase == kGateUp) {
                  const float gate = bf16_round(first), up = bf16_round(second);
                  act[row] = __float2bfloat16_rn(bf16_round(gate / (1.0f + expf(-gate))) * up);
                } else {  // o, down: the residual add
                  h[row] = __float2bfloat16_rn(__bfloat162float(__ldcg(h + row)) + bf16_round(first));
                }
              });
      signal_counter(counters + phase);
      if (tracer) {
        trace_point(a, l, phase == kQkv ? kTraceQkvDone : phase == kO ? kTraceODone
                                                        : phase == kGateUp ? kTraceGateUpDone : kTraceDownDone);
        trace_value(a, l, phase == kQkv ? kTraceQkvStarved : phase == kO ? kTraceOStarved
                                                           : phase == kGateUp ? kTraceGateUpStarved : kTraceDownStarved,
                    starved);
        starved = 0;
      }
    }
  }
  // The last CTA out zeroes every counter: all others have passed their last wait before counting out.
  uint32_t* exit_counter = sync + a.num_layers * (kPhases + a.kv_heads);
  if (threadIdx.x == 0) {
    __threadfence();
    s.last_out = atomicAdd(exit_counter, 1u) == grid - 1;
  }
  consumer_sync();
  if (s.last_out) {
    __threadfence();
    const int64_t words = sync_words(a.num_layers, a.kv_heads);
    for (int64_t i = threadIdx.x; i < words; i += kConsumers) sync[i] = 0;
  }
#endif
}

// Static shared memory the kernel's helpers declare, kept free of the dynamic plan.
constexpr int kStaticSmemSlack = 2048;

struct Plan {
  int splits, stages;
  int partial_cap;  // rows of one GEMV phase a CTA owns at most (gate|up: both halves)
  size_t smem;
};

bool shape_ok(const DecodeLayersArgs& a) {
  const int64_t q_dim = a.q_heads * a.head_dim;
  if (a.head_dim != 64 && a.head_dim != 128) return false;
  if (a.kv_heads < 1 || a.q_heads % a.kv_heads || a.q_heads / a.kv_heads > kMaxGroup) return false;
  if (a.hidden % 8 || q_dim % 8 || a.inter % 8) return false;
  if (a.hidden > kMaxK || q_dim > kMaxK || a.inter > kMaxK) return false;
  // A stage holds at least one row (one gate|up row pair).
  const int64_t b = sizeof(bf16);
  if (2 * a.hidden * b > kStageBytes || q_dim * b > kStageBytes || a.inter * b > kStageBytes) return false;
  return a.max_position >= 0 && a.max_position < a.max_ctx;
}

Plan make_plan(const DecodeLayersArgs& a, int sm_count) {
  Plan p{};
  const int64_t keys = a.max_position + 1;
  const int64_t keys_per_split = a.split_keys > 0 ? std::min<int64_t>(a.split_keys, kKeysPerPass) : kKeysPerPass;
  const int64_t by_keys = (keys + keys_per_split - 1) / keys_per_split;
  p.splits = int(std::clamp<int64_t>(by_keys, 1, std::min<int64_t>(kMaxSplits, sm_count / a.kv_heads)));
  const auto per_cta = [&](int64_t n) { return (n + sm_count - 1) / sm_count; };
  const int64_t qkv_rows = (a.q_heads + 2 * a.kv_heads) * a.head_dim;
  p.partial_cap = int(std::max({per_cta(qkv_rows), per_cta(a.hidden), 2 * per_cta(a.inter)}));
  const size_t fixed = size_t(attention_smem_bytes(a.head_dim, a.q_heads / a.kv_heads)) +
                       2 * kMaxStages * sizeof(uint64_t) + sizeof(Scratch) +
                       size_t(kConsumerWarps) * size_t(p.partial_cap) * sizeof(float);
  const int optin = device_optin_smem_bytes() - kStaticSmemSlack;
  p.stages = int(std::min<int64_t>(kMaxStages, (int64_t(optin) - int64_t(fixed)) / kStageBytes));
  // Two stages unless asked otherwise (and as many as fit next to the attention's V staging): on the H200 at
  // context 128, 2 x 48 KB in flight per SM ran the stack as fast as or faster than 3 or 4
  // (bench/results/decode-layers-trace-*).
  p.stages = std::min(p.stages, a.ring_stages > 0 ? int(a.ring_stages) : kDefaultStages);
  p.smem = size_t(p.stages) * kStageBytes + fixed;
  return p;
}

// The kernel for kHeadDim, allowed all the opt-in shared memory (set once, never lowered: each launch asks for what
// its plan needs).
template <int kHeadDim>
auto* kernel_for() {
  static std::once_flag once;
  std::call_once(once, [] {
    CUDA_CHECK(cudaFuncSetAttribute(decode_layers_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    device_optin_smem_bytes()));
  });
  return decode_layers_kernel<kHeadDim>;
}

template <int kHeadDim>
void launch_with(const DecodeLayersArgs& a, cudaStream_t stream) {
  const int sm_count = device_sm_count();
  const Plan plan = make_plan(a, sm_count);
  launch(kernel_for<kHeadDim>(), dim3(unsigned(sm_count)), dim3(kThreads), plan.smem, stream, a, plan.stages,
         plan.splits, plan.partial_cap);
}

}  // namespace

int64_t decode_layers_workspace_floats(int64_t kv_heads, int64_t head_dim) {
  // (kv heads, kMaxGroup heads, kMaxSplits splits) partials of head_dim + 2 (the output, the maximum, the sum).
  return kv_heads * kMaxSplits * kMaxGroup * (head_dim + 2);
}

int64_t decode_layers_sync_words(int64_t num_layers, int64_t kv_heads) { return sync_words(num_layers, kv_heads); }

bool decode_layers_v1_supports(const DecodeLayersArgs& a) {
  if (device_compute_major() < 9 || !shape_ok(a)) return false;
  if (a.kv_heads > device_sm_count()) return false;
  // The attention stages a CTA's V rows in shared memory: at most kKeysPerPass keys per split.
  const int64_t max_splits = std::min<int64_t>(kMaxSplits, device_sm_count() / a.kv_heads);
  if (a.max_position + 1 > max_splits * kKeysPerPass) return false;
  const Plan plan = make_plan(a, device_sm_count());
  if (plan.stages < 2) return false;
  // Every CTA must be resident at once: one per SM.
  int per_sm = 0;
  const auto kernel = a.head_dim == 128 ? kernel_for<128>() : kernel_for<64>();
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, plan.smem));
  return per_sm >= 1;
}

void launch_decode_layers_v1(const DecodeLayersArgs& a, cudaStream_t stream) {
  if (a.head_dim == 128)
    launch_with<128>(a, stream);
  else
    launch_with<64>(a, stream);
}

}  // namespace qwen3::kernels
