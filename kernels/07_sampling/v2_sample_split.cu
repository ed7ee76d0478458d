// v2_sample_split: v0's sampler with its argmax spread over the GPU. v0 gives a row one 1024-thread block, and
// its greedy answer is a walk over 151936 bf16 logits in 2-byte loads from that one SM: ~25 us a decode step
// (the eager profiles of sessions 1-18) against ~1-2 us of L2 reads, 0.6% of Qwen3-8B's batch-1 step.
// Here a row's ids are cut into chunks of 8192 (one 16-byte load of 8 logits a thread):
//  * every block takes the argmax of its chunk (penalties applied as in v0, ties to the lowest id) and leaves
//    (value, id) in the workspace, then counts itself in the row's counter;
//  * the row's last block to count merges the partials (ties to the lowest id again, so the answer is v0's),
//    resets the counter, and writes the greedy token, or, for a row that samples, runs v0's top-k / top-p /
//    min-p threshold and draw over the whole row with its 1024 threads (the same code, so the same token as v0);
//  * optionally (SampleArgs::next_ids) that block also makes the token the row's next decode input, which the
//    engine's advance kernel did in its own launch.
// Measured (H200, random Qwen3-8B, batch 1, prompt 128, session 19): the step 17 us shorter than with v0
// (3.8684 against 3.8852 ms); leaving the sampler out altogether saves only ~5 us more. The advance folded in:
// 1.3 us (3.9145 against 3.9158 ms), where skipping the advance launch saves 7 us: its work stays on the chain.
// The workspace: per row a uint32 counter, zero before the first launch (every launch leaves it zero), then the
// row's (splits, 2) partials.
#include <cfloat>
#include <cstdint>
#include <stdexcept>

#include "kernels/07_sampling/sample_common.cuh"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using namespace sampling;

constexpr int kIdsPerThread = 8;                                    // one 16-byte load of bf16 logits
constexpr int64_t kIdsPerBlock = int64_t(kThreads) * kIdsPerThread;  // 8192

int64_t splits_for(int64_t vocab) { return (vocab + kIdsPerBlock - 1) / kIdsPerBlock; }

// This thread's best (value, id) over ids [first, first + 8) of the row, ids increasing (ties keep the lowest).
// Ids past the row are skipped; a thread with none keeps (-FLT_MAX, `none`).
__device__ __forceinline__ void chunk_best(const RowView& row, int64_t vocab, int64_t first, float& best,
                                           int64_t& best_id) {
  const bool vector = row.neutral() && first + kIdsPerThread <= vocab &&
                      reinterpret_cast<uintptr_t>(row.logits + first) % 16 == 0;
  if (vector) {  // z is the logit (v0 reads the same float: a zero penalty subtracts 0, a factor of 1 is skipped)
    const uint4 piece = __ldcg(reinterpret_cast<const uint4*>(row.logits + first));
    const bf16* z = reinterpret_cast<const bf16*>(&piece);
#pragma unroll
    for (int j = 0; j < kIdsPerThread; ++j) {
      const float v = __bfloat162float(z[j]);
      if (v > best) best = v, best_id = first + j;
    }
    return;
  }
  for (int64_t i = first; i < min(first + kIdsPerThread, vocab); ++i) {
    const float v = row.adjusted(i);
    if (v > best) best = v, best_id = i;
  }
}

// PRECOND: blockDim.x == kThreads; grid (splits_for(vocab), rows); a.workspace holds sample_workspace_floats()
// floats whose counters are zero.
__global__ void __launch_bounds__(kThreads) sample_split_kernel(SampleArgs a) {
  pdl_launch_dependents();
  pdl_wait();  // the logits come from the lm_head GEMV
  __shared__ float s_val[32];
  __shared__ int64_t s_idx[32];
  __shared__ float hist[kBins];
  __shared__ uint32_t s_prefix;
  __shared__ float s_target;
  __shared__ bool s_last;
  const int64_t r = blockIdx.y, splits = gridDim.x, vocab = a.vocab;
  const int64_t none = vocab;  // the id of "no logit seen": larger than every real id, so ties never pick it
  RowView row{a.logits + r * vocab, a.token_counts ? a.token_counts + r * vocab : nullptr,
              a.in_prompt ? a.in_prompt + r * vocab : nullptr, a.params[r]};
  // The row's slice of the workspace: its counter, then (splits, 2) partials (value, id as float bits). A row's
  // slice is the same whatever the launch's row count, so launches of different row counts can share one
  // workspace (the engine's decode step, prefill argmax and first-token sampling do).
  uint32_t* const counter = reinterpret_cast<uint32_t*>(a.workspace + r * (2 * splits + 1));
  float* const partials = a.workspace + r * (2 * splits + 1) + 1;

  float best = -FLT_MAX;
  int64_t best_id = none;
  chunk_best(row, vocab, blockIdx.x * kIdsPerBlock + int64_t(threadIdx.x) * kIdsPerThread, best, best_id);
  const int64_t chunk_argmax = block_argmax(best, best_id, s_val, s_idx);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = chunk_argmax < vocab ? row.adjusted(chunk_argmax) : -FLT_MAX;
    partials[2 * blockIdx.x + 1] = __int_as_float(int32_t(chunk_argmax));
    __threadfence();  // the partial is visible before the count that announces it
    s_last = atomicAdd(counter, 1u) == uint32_t(splits - 1);
  }
  __syncthreads();
  if (!s_last) return;

  // The row's last block: every other block's partial is written (their fences came before their counts).
  __threadfence();
  best = -FLT_MAX;
  best_id = none;
  for (int64_t s = threadIdx.x; s < splits; s += kThreads) {
    const float v = __ldcg(partials + 2 * s);
    const int64_t id = __float_as_int(__ldcg(partials + 2 * s + 1));
    if (v > best || (v == best && id < best_id)) best = v, best_id = id;
  }
  int64_t argmax = block_argmax(best, best_id, s_val, s_idx);
  if (argmax >= vocab) argmax = 0;  // no logit above -FLT_MAX (v0 answers id 0 too)
  if (threadIdx.x == 0) *counter = 0;  // for the next launch (no block of this launch counts any more)
  if (row.p.temperature <= 0.0f) {
    if (threadIdx.x == 0) a.out_tokens[r] = int32_t(argmax);
  } else {
    const float inv_t = 1.0f / row.p.temperature;
    const float z_max = row.adjusted(argmax) * inv_t;
    const uint32_t threshold = threshold_by_radix(row, vocab, inv_t, z_max, hist, &s_prefix, &s_target, s_val);
    draw_by_threshold(row, vocab, inv_t, z_max, threshold, argmax, a.step + r, a.out_tokens + r);
  }
  if (a.next_ids == nullptr) return;
  __syncthreads();  // the token is written and every read of the row's counts is done
  if (threadIdx.x == 0) {  // the engine's advance kernel, folded in: one launch less at the end of a step
    const int32_t token = a.out_tokens[r];
    a.next_ids[r] = token;
    if (a.positions != nullptr) a.positions[r] += 1;
    if (has_penalties(row.p) && a.counts != nullptr) a.counts[r * vocab + token] += 1;
  }
}

}  // namespace

int64_t sample_workspace_floats(int64_t rows, int64_t vocab) { return rows * (2 * splits_for(vocab) + 1); }

bool sample_v2_supports(const SampleArgs& a) {
  return a.workspace != nullptr && (a.next_ids != nullptr || (a.positions == nullptr && a.counts == nullptr)) &&
         a.rows >= 1 && a.rows <= 65535 && a.vocab >= 1 && a.vocab <= INT32_MAX;
}

void launch_sample_v2(const SampleArgs& a, cudaStream_t stream) {
  if (!sample_v2_supports(a)) throw std::invalid_argument("sample v2: needs a workspace (see supports)");
  launch(sample_split_kernel, dim3(unsigned(splits_for(a.vocab)), unsigned(a.rows)), dim3(kThreads), 0, stream, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
