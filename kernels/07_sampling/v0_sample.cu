// v0_sample: one 1024-thread block per row chooses the next token on the device, so a decode step needs no copy of
// the logits to the host (and a CUDA graph can include sampling).
//  * Penalties (repetition, presence, frequency) are applied on the fly from per-row token counts.
//  * Greedy: argmax, ties to the lowest id (torch.argmax semantics).
//  * Otherwise z = logit / temperature, and the kept set is {z >= threshold}, with the threshold the largest of:
//    top-k: the k-th largest z (radix select on the order-preserving integer image of z: 4 byte passes with a
//           256-bin histogram instead of a sort); top-p: the value where the mass, counted from the top within the
//           top-k set, first reaches top_p (the same radix select weighted by exp(z - max)); min-p: max + ln(min_p).
//    Ties at a threshold are kept, as transformers' warpers keep them.
//  * The draw: u in [0, 1) from a counter-based hash of (seed, step), scaled by the kept mass, located by a block
//    prefix sum over contiguous index chunks.
#include <cfloat>
#include <cstdint>

#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/07_sampling/sample_common.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using namespace sampling;

// PRECOND: blockDim.x == kThreads; one block per row.
__global__ void __launch_bounds__(kThreads) sample_kernel(SampleArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float s_val[32];
  __shared__ int64_t s_idx[32];
  __shared__ float hist[kBins];
  __shared__ uint32_t s_prefix;
  __shared__ float s_target;
  const int64_t r = blockIdx.x;
  RowView row{a.logits + r * a.vocab, a.token_counts ? a.token_counts + r * a.vocab : nullptr,
              a.in_prompt ? a.in_prompt + r * a.vocab : nullptr, a.params[r]};
  const int64_t vocab = a.vocab;

  // Max of the adjusted logits (and its index, the greedy answer).
  float best = -FLT_MAX;
  int64_t best_index = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float z = row.adjusted(i);
    if (z > best) best = z, best_index = i;  // i increases, so ties keep the lowest index
  }
  const int64_t argmax = block_argmax(best, best_index, s_val, s_idx);
  if (row.p.temperature <= 0.0f) {
    if (threadIdx.x == 0) a.out_tokens[r] = int32_t(argmax);
    return;
  }
  const float inv_t = 1.0f / row.p.temperature;
  const float z_max = row.adjusted(argmax) * inv_t;

  const uint32_t threshold = threshold_by_radix(row, vocab, inv_t, z_max, hist, &s_prefix, &s_target, s_val);
  draw_by_threshold(row, vocab, inv_t, z_max, threshold, argmax, a.step + r, a.out_tokens + r);
}

}  // namespace

// v0 and v1 do not advance the slot (SampleArgs::next_ids): the engine launches its advance kernel after them.
bool sample_v0_supports(const SampleArgs& a) { return a.next_ids == nullptr; }

void launch_sample_v0(const SampleArgs& a, cudaStream_t stream) {
  launch(sample_kernel, dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
