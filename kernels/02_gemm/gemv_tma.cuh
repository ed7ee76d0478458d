// The persistent, TMA-fed decode GEMV core (sm_90) shared by v9_gemv_tma, v9_gemv_residual_tma,
// v9_gemv_norm_tma and v5_gate_up_swiglu_norm_tma.
//
// Why: in the PDL chain of a decode step every GEMV of v4..v8 ramps up and drains on its own (~3-4 us each):
// its 500-3000 CTAs become resident only as the previous kernel's CTAs leave, each warp has a few 16-byte
// loads in registers before the PDL wait, and the tail of the grid runs on a fraction of the SMs.
// Design:
//  * One CTA per SM (grid = SM count). CTA b owns the rows [b*n/G, (b+1)*n/G) (gate|up: those gate rows and
//    the same up rows): its weights are one contiguous span (two for gate|up), balanced to a row.
//  * The span streams through a shared-memory ring of slots, each a whole number of rows, filled by 1D bulk
//    copies (cp.async.bulk, L2 evict-first) that one elected thread issues; a "full" mbarrier per slot counts
//    the bytes in. The ring is filled BEFORE pdl_wait(): weights are never written, so while the previous
//    kernel drains, this kernel's CTA (resident next to it: ring <= 96 KB, CTA <= 110 KB of shared memory,
//    256 threads x <= 128 registers, so two fit an SM) already has up to ~12 MB of weights in flight.
//  * After the wait the activations go to shared memory (a copy, or the RMSNorm prologue); then all 8 warps
//    consume each stage: its rows are cut into row groups of kRows (rows that share each activation load)
//    and k into `slices` interleaved 512-byte column slices, one warp per (group, slice) task, so every warp
//    works on every stage whatever k is. A warp's partial dot products are summed over its lanes by a
//    transposing butterfly and stored in shared memory; after one __syncthreads (which also frees the slot:
//    the producer refills it right then) the op's epilogue adds the slices in a fixed order. Every sum has a
//    fixed order: results are bitwise reproducible run to run.
//  * 8 warps (256 threads): the weights arrive without any thread's help, so warps only have to keep up with
//    ~34 GB/s per SM of shared-memory math, and 8 warps leave 128 registers per thread with two CTAs per SM
//    (batch 8 holds 32 accumulators + 32 widened weights). 12 warps would cap registers at 80.
//  * No empty barriers: the per-stage __syncthreads that publishes the partial sums already proves that
//    every warp is done reading the slot (all its shared loads were consumed by then).
// Stage size (make_plan): ~16 KB at batch 1-2 (six slots in flight, fine-grained refills), up to ~32 KB from
// batch 3 (four k=4096 rows per stage, so each activation load from shared memory feeds four rows: at batch 8
// one row per load would read 8 bytes of activations per weight byte, more than the SM's 128 B/clk allow),
// shrunk while the activations (m * k * 2 bytes) leave too little room for three slots.
// Known limits: at k = 12288 a stage holds one row, so batches > 2 read the activations once per row, and
// from batch 3 x no longer fits next to a two-slot ring within the co-resident budget (one CTA per SM then).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/02_gemm/gemv_fused.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels::gemv_tma {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
static_assert(kThreads == gemv_fused::kThreads, "norm_prologue assumes the fused GEMVs' block size");
constexpr int kMinBlocksPerSm = 2;  // this kernel's CTA and the next one's, side by side (registers <= 128)

constexpr size_t kRingBytes = 96 * 1024;  // the most weights one CTA keeps in flight
// Dynamic shared memory per CTA so that two CTAs fit the 228 KB of an SM: 2 x (110 KB + static <= 1.3 KB +
// the 1 KB the system reserves per block) <= 228 KB.
constexpr size_t kCoResidentSmem = 110 * 1024;
constexpr size_t kStaticSmemReserve = 2048;           // static shared memory (+ the 1 KB the system reserves)
constexpr int kMaxStages = 16;                        // mbarriers reserved (more slots would not be used)
constexpr int kMaxRowsPerStage = 128;                 // bounds the partial sums of tiny-k shapes
constexpr size_t kStageTargetSmallBatch = 16 * 1024;  // batch 1-2
constexpr size_t kStageTargetLargeBatch = 32 * 1024;  // batch 3-8

// How one launch cuts the work; computed on the host (make_plan), passed by value. "Items" are weight rows,
// or (gate row, up row) pairs for gate|up; "virtual rows" (vrows) are the rows in a slot: items, or 2 x
// pairs.
struct Plan {
  int items_per_stage = 0;  // R
  int stages = 0;           // ring slots; 0: the shape does not fit
  int slices = 1;           // column slices per row group
  int part_floats = 0;      // floats of one partial-sum buffer (two alternate)
  uint32_t stage_bytes = 0;
  uint32_t ring_offset = 0, part_offset = 0, extra_offset = 0, bar_offset = 0;
  uint32_t smem_bytes = 0;
};

// ---- host ----------------------------------------------------------------------------------------------
struct DeviceInfo {
  int sms = 0;          // the grid of every launch
  int cc_major = 0;     // sm_90 needed
  size_t max_smem = 0;  // opt-in dynamic shared memory per block, less the static reserve
};

// The current device at first use (the engine and the tests use one device per process).
inline const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    int device = 0, sms = 0, major = 0, optin = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess) {
      d.sms = sms;
      d.cc_major = major;
      d.max_smem = size_t(optin) > kStaticSmemReserve ? size_t(optin) - kStaticSmemReserve : 0;
    } else {
      (void)cudaGetLastError();  // no device: every supports() says no
    }
    return d;
  }();
  return info;
}

inline int grid_size() {
  return device_info().sms;
}
inline bool device_supported() {
  return device_info().cc_major >= 9 && device_info().sms > 0;
}

inline size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

// Stages (slots) a CTA with `items` items of R per stage goes through.
__host__ __device__ constexpr int64_t stages_for(int64_t items, int64_t per_stage) {
  return (items + per_stage - 1) / per_stage;
}

// Chooses rows per stage and ring depth. tokens: batch (1..8); rows_per_task: kRows; rows_per_item: 1, or 2
// for gate|up; items_per_cta: the most items a CTA owns (ceil(n / grid)); x_bytes: activations in shared
// memory; extra_bytes: op scratch. Preference: the largest stage (up to the batch's target) that gives 3 ring
// slots within the co-resident budget, else 2; else the same with the whole opt-in shared memory (one CTA per
// SM: no PDL overlap, but a pipelined ring beats co-residency with a single slot); else a single slot. stages
// == 0: does not fit at all (the activations alone are too large).
inline Plan make_plan(int tokens, int rows_per_task, int64_t k, int64_t items_per_cta, int rows_per_item,
                      size_t x_bytes, size_t extra_bytes) {
  const size_t item_bytes = size_t(k) * 2 * size_t(rows_per_item);
  const size_t target = tokens <= 2 ? kStageTargetSmallBatch : kStageTargetLargeBatch;
  const int64_t cap =
      std::max<int64_t>(1, std::min<int64_t>(kMaxRowsPerStage / rows_per_item, items_per_cta));
  const int64_t largest = std::clamp<int64_t>(int64_t(target / item_bytes), 1, cap);
  const int64_t chunks = k / 8;

  auto plan_for = [&](int64_t r, size_t budget) {
    Plan p;
    const int64_t vrows = r * rows_per_item;
    const int64_t groups = (vrows + rows_per_task - 1) / rows_per_task;
    p.items_per_stage = int(r);
    p.slices = int(std::max<int64_t>(1, std::min<int64_t>(kWarps / groups, chunks / kWarpSize)));
    p.part_floats = int(groups * p.slices * rows_per_task * tokens);
    p.stage_bytes = uint32_t(size_t(vrows) * size_t(k) * 2);
    p.ring_offset = uint32_t(align_up(x_bytes, 128));
    const size_t fixed = size_t(p.ring_offset) + 2 * size_t(p.part_floats) * 4 + align_up(extra_bytes, 16) +
                         size_t(kMaxStages) * 8;
    if (fixed >= budget) return p;  // stages = 0
    const size_t ring = std::min(kRingBytes, budget - fixed);
    const int64_t slots =
        std::min<int64_t>({int64_t(ring / p.stage_bytes), stages_for(items_per_cta, r), int64_t(kMaxStages)});
    if (slots < 1) return p;
    p.stages = int(slots);
    p.part_offset = p.ring_offset + uint32_t(align_up(size_t(p.stages) * p.stage_bytes, 16));
    p.extra_offset = p.part_offset + uint32_t(2 * size_t(p.part_floats) * 4);
    p.bar_offset = p.extra_offset + uint32_t(align_up(extra_bytes, 16));
    p.smem_bytes = p.bar_offset + uint32_t(kMaxStages * 8);
    return p;
  };

  struct Attempt {
    size_t budget;
    int64_t wanted;  // ring slots (fewer if the CTA has fewer stages)
  };
  const size_t whole = std::max(device_info().max_smem, kCoResidentSmem);
  const Attempt attempts[] = {{kCoResidentSmem, 3}, {kCoResidentSmem, 2}, {whole, 3},
                              {whole, 2},           {kCoResidentSmem, 1}, {whole, 1}};
  for (const Attempt& attempt : attempts) {
    for (int64_t r = largest; r >= 1; --r) {
      const int64_t vrows = r * rows_per_item;
      if (vrows > rows_per_task && vrows % rows_per_task != 0) continue;  // keep row groups full
      const Plan p = plan_for(r, attempt.budget);
      if (p.stages >= std::min(attempt.wanted, stages_for(items_per_cta, r))) return p;
    }
  }
  return Plan{};
}

// Once per kernel instantiation: allow the opt-in shared memory, and ask for the largest shared-memory
// carveout so that consecutive kernels of this family share the SM's L1/shared split (a different split would
// need the SM to drain before the next kernel's CTA could start there, defeating the overlap).
inline void configure_kernel(const void* kernel) {
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  if (attributes.sharedSizeBytes > kStaticSmemReserve)
    throw CudaError("gemv_tma: a kernel's static shared memory exceeds kStaticSmemReserve");
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(device_info().max_smem)));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
}

// ---- device --------------------------------------------------------------------------------------------
// The rows [begin, begin + count) CTA blockIdx.x owns out of n (balanced to one row).
struct CtaRange {
  int64_t begin;
  int count;
};
__device__ __forceinline__ CtaRange cta_range(int64_t n) {
  const int64_t g = gridDim.x, b = blockIdx.x;
  const int64_t begin = b * n / g, end = (b + 1) * n / g;
  return {begin, int(end - begin)};
}

constexpr int pow2_ceil(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}
constexpr int log2_exact(int v) {
  int l = 0;
  while ((1 << l) < v) ++l;
  return l;
}

// One step of warp_transpose_sum: kHeld values still held, exchanged with the lane kOffset away (compile-time
// recursion, so that every index is a constant and v stays in registers).
template <int kHeld, int kOffset, int kP>
__device__ __forceinline__ void transpose_sum_step(float (&v)[kP], int lane) {
  if constexpr (kOffset >= 1) {
    if constexpr (kHeld > 1) {
      // Selected with bit masks: written as `upper ? v[i] : v[i + half]` the compiler turns the select into
      // an indexed access and moves v to local memory.
      const uint32_t upper = (lane & kOffset) != 0 ? 0xffffffffu : 0u;
#pragma unroll
      for (int i = 0; i < kHeld / 2; ++i) {
        const uint32_t lo = __float_as_uint(v[i]), hi = __float_as_uint(v[i + kHeld / 2]);
        const float send = __uint_as_float((lo & upper) | (hi & ~upper));
        const float keep = __uint_as_float((hi & upper) | (lo & ~upper));
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
      }
      transpose_sum_step<kHeld / 2, kOffset / 2>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], kOffset);
      transpose_sum_step<1, kOffset / 2>(v, lane);
    }
  }
}

// Sums each of kValues per-lane values over the warp with kP - 1 + (5 - log2 kP) shuffles (kP: kValues
// rounded up to a power of two) instead of 5 per value: each step swaps half of the values still held with
// the partner lane and keeps the other half, summed. Lane l ends with the total of value l >> (5 - log2 kP)
// in v[0]. Returns that index in one lane per value (the writer), -1 elsewhere. The order of additions is
// fixed.
template <int kValues, int kP = pow2_ceil(kValues)>
__device__ __forceinline__ int warp_transpose_sum(float (&v)[kP]) {
  static_assert(kP <= kWarpSize, "at most 32 values per warp");
  const int lane = threadIdx.x % kWarpSize;
  transpose_sum_step<kP, kWarpSize / 2>(v, lane);
  constexpr int kLog = log2_exact(kP);
  const int index = lane >> (5 - kLog);
  const bool writer = (lane & ((kWarpSize >> kLog) - 1)) == 0 && index < kValues;
  return writer ? index : -1;
}

// acc[t][r] += x[t] · w[r] over the chunks c = first, first + step, ... < chunks of kLive rows, kLive <=
// kRows. w: the task's first row in the slot, rows `chunks` vectors apart; x: (kTokens, chunks) vectors. Each
// weight and activation vector is widened once. Lanes read consecutive 16-byte vectors: no bank conflicts.
template <int kTokens, int kRows, int kLive>
__device__ __forceinline__ void dot_rows(const uint4* w, const uint4* x, int chunks, int first, int step,
                                         float (&acc)[kTokens][kRows]) {
#pragma unroll 2
  for (int c = first; c < chunks; c += step) {
    float wf[kLive][8];
#pragma unroll
    for (int r = 0; r < kLive; ++r) {
      const uint4 wv = w[r * chunks + c];
      bf16x8_to_float(reinterpret_cast<const Bf16x8&>(wv), wf[r]);
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float xf[8];
      const uint4 xv = x[t * chunks + c];
      bf16x8_to_float(reinterpret_cast<const Bf16x8&>(xv), xf);
#pragma unroll
      for (int r = 0; r < kLive; ++r)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[t][r] += wf[r][e] * xf[e];
    }
  }
}

// The pipeline of one CTA: kRowsPerItem 1 (rows of w) or 2 (gate rows of w and the up rows `second` rows
// further). Usage, every thread of the CTA: construct, start() (before pdl_wait), fill x(), __syncthreads (or
// a prologue that ends with one), run(epilogue). PRECOND: blockDim.x == kThreads; items > 0; the plan made by
// make_plan for this shape and kernel; w 16-byte aligned, k % 8 == 0.
template <int kTokens, int kRows, int kRowsPerItem>
class Pipeline {
 public:
  static constexpr int kValues = kTokens * kRows;  // partial sums per task

  __device__ Pipeline(const Plan& plan, unsigned char* smem, const bf16* w, int64_t k, int64_t item_begin,
                      int items, int64_t second)
      : plan_(plan),
        smem_(smem),
        w_(w),
        k_(k),
        item_begin_(item_begin),
        second_(second),
        items_(items),
        stages_(int(stages_for(items, plan.items_per_stage))) {}

  __device__ bf16* x() const { return reinterpret_cast<bf16*>(smem_); }  // (kTokens, k)
  template <class T>
  __device__ T* extra() const {
    return reinterpret_cast<T*>(smem_ + plan_.extra_offset);
  }

  // Initializes the slots' barriers and fills the ring. Reads only weights: call it before pdl_wait().
  __device__ void start() {
    if (threadIdx.x == 0) {
      for (int s = 0; s < plan_.stages; ++s) mbarrier_init(bar(s), 1);
      fence_mbarrier_init();
    }
    __syncthreads();
    producer_ = threadIdx.x < kWarpSize && elect_one_sync();
    if (producer_) {
      policy_ = make_evict_first_policy();
      const int first = min(plan_.stages, stages_);
      for (int s = 0; s < first; ++s) issue(s);
    }
  }

  // For each stage: wait for its bytes, compute, free the slot (and refill it), then
  // epilogue(item0, items, sum) with item0 the CTA-local index of the stage's first item and sum(vrow, t) the
  // complete dot product of virtual row vrow (items: rows; gate|up: gate rows [0, items), up rows [items, 2
  // items)) with activation row t. Every thread calls the epilogue; it must not synchronize.
  template <class Epilogue>
  __device__ void run(Epilogue&& epilogue) {
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const int chunks = int(k_ / 8);
    const uint4* x_vecs = reinterpret_cast<const uint4*>(x());
    float* parts = reinterpret_cast<float*>(smem_ + plan_.part_offset);
    const int slices = plan_.slices;
    for (int s = 0; s < stages_; ++s) {
      const int slot = s % plan_.stages;
      // Slot `slot` completes one phase per use: use u = s / stages waits for phase parity u & 1. The refill
      // of a slot is issued only after every thread passed this wait (the __syncthreads below), so no waiter
      // can see the barrier two phases ahead.
      mbarrier_wait_parity(bar(slot), uint32_t(s / plan_.stages) & 1u);
      const int item0 = s * plan_.items_per_stage;
      const int items = min(plan_.items_per_stage, items_ - item0);
      const int vrows = items * kRowsPerItem;
      const int tasks = (vrows + kRows - 1) / kRows * slices;
      const uint4* slot_vecs =
          reinterpret_cast<const uint4*>(smem_ + plan_.ring_offset) + size_t(slot) * (plan_.stage_bytes / 16);
      float* part = parts + (s & 1) * plan_.part_floats;  // two buffers: stage s+1 writes while s is summed
      for (int task = warp; task < tasks; task += kWarps) {
        const int group = task / slices, slice = task - group * slices;
        const int row0 = group * kRows, live = min(kRows, vrows - row0);
        float acc[kTokens][kRows];
#pragma unroll
        for (int t = 0; t < kTokens; ++t)
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;
        const uint4* w = slot_vecs + size_t(row0) * chunks;
        const int first = slice * kWarpSize + lane, step = kWarpSize * slices;
        // live < kRows: the last row group of a stage, or stages of fewer rows than kRows.
        if (live == kRows) {
          dot_rows<kTokens, kRows, kRows>(w, x_vecs, chunks, first, step, acc);
        } else if constexpr (kRows > 1) {
          if (live == 1) {
            dot_rows<kTokens, kRows, 1>(w, x_vecs, chunks, first, step, acc);
          } else if constexpr (kRows > 2) {
            if (live == 2)
              dot_rows<kTokens, kRows, 2>(w, x_vecs, chunks, first, step, acc);
            else
              dot_rows<kTokens, kRows, 3>(w, x_vecs, chunks, first, step, acc);
          }
        }
        float v[pow2_ceil(kValues)];
#pragma unroll
        for (int i = kValues; i < pow2_ceil(kValues); ++i) v[i] = 0.0f;
#pragma unroll
        for (int t = 0; t < kTokens; ++t)
#pragma unroll
          for (int r = 0; r < kRows; ++r) v[t * kRows + r] = acc[t][r];
        const int index = warp_transpose_sum<kValues>(v);
        if (index >= 0) part[task * kValues + index] = v[0];
      }
      __syncthreads();  // partials complete; every warp is done reading the slot
      if (producer_ && s + plan_.stages < stages_) issue(s + plan_.stages);
      epilogue(item0, items, [&](int vrow, int t) {
        const int group = vrow / kRows, r = vrow - group * kRows;
        float sum = 0.0f;
        for (int j = 0; j < slices; ++j) sum += part[(group * slices + j) * kValues + t * kRows + r];
        return sum;
      });
    }
  }

 private:
  __device__ uint64_t* bar(int slot) const {
    return reinterpret_cast<uint64_t*>(smem_ + plan_.bar_offset) + slot;
  }

  // Producer only: stage s's rows into slot s % stages, completing its barrier's next phase.
  __device__ void issue(int s) {
    const int slot = s % plan_.stages;
    const int item0 = s * plan_.items_per_stage;
    const int items = min(plan_.items_per_stage, items_ - item0);
    const uint32_t bytes = uint32_t(items) * uint32_t(k_) * 2u;
    unsigned char* dst = smem_ + plan_.ring_offset + size_t(slot) * plan_.stage_bytes;
    const bf16* src = w_ + (item_begin_ + item0) * k_;
    mbarrier_arrive_expect_tx(bar(slot), bytes * uint32_t(kRowsPerItem));
    bulk_copy_g2s(dst, src, bytes, bar(slot), policy_);
    if constexpr (kRowsPerItem == 2)
      bulk_copy_g2s(dst + bytes, src + second_ * k_, bytes, bar(slot), policy_);
  }

  Plan plan_;
  unsigned char* smem_;
  const bf16* w_;
  int64_t k_, item_begin_, second_;
  int items_, stages_;
  bool producer_ = false;
  uint64_t policy_ = 0;
};

}  // namespace qwen3::kernels::gemv_tma
