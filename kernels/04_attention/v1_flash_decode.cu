// v1_flash_decode: split-KV attention for decode (flash-decoding). v0 runs q_heads warps, each walking every key
// with one load in flight; at decode that leaves the GPU nearly idle. Here:
//  * The keys of each sequence are cut into chunks; one CTA per (chunk, kv head, token), so even 8 kv heads at
//    batch 1 give hundreds of CTAs.
//  * The group of q heads that share a kv head (GQA, 4 for Qwen3-8B) is packed into that CTA: each K and V row is
//    read from memory once for the whole group.
//  * Inside a CTA three phases with no dependent chain per key: scores for all keys of the chunk (16-byte K loads,
//    several keys per warp at once) into shared memory, an exact softmax over the chunk, then P·V with 16-byte V
//    loads. Each CTA writes (max, sum, unnormalized output) and a second kernel merges the chunks.
#include <algorithm>
#include <cfloat>
#include <stdexcept>

#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/common/dtype.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/04_attention/flash_decode.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using namespace flash_decode;

// Merges the chunks of one (token, q head): rescale each chunk by exp(max_s - max), divide by the total sum.
// PRECOND: blockDim.x == head_dim.
__global__ void merge_kernel(AttentionArgs a, int chunk, int splits, const float* __restrict__ partials) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t token = blockIdx.x / a.q_heads, head = blockIdx.x % a.q_heads;
  const int d = threadIdx.x;
  const int valid = (a.positions[token] + chunk) / chunk;  // chunks holding keys [0, position]
  const float* base = partials + (token * a.q_heads + head) * splits * (a.head_dim + 2);
  float m = -FLT_MAX;
  for (int s = 0; s < valid; ++s) m = fmaxf(m, base[s * (a.head_dim + 2) + a.head_dim]);
  float total = 0.0f, out = 0.0f;
  for (int s = 0; s < valid; ++s) {
    const float* p = base + s * (a.head_dim + 2);
    const float w = expf(p[a.head_dim] - m);
    total += p[a.head_dim + 1] * w;
    out += p[d] * w;
  }
  a.out[(token * a.q_heads + head) * a.head_dim + d] = __float2bfloat16_rn(out / total);
}

}  // namespace

int64_t attention_workspace_floats(int64_t tokens, int64_t q_heads, int64_t head_dim, int64_t max_ctx) {
  return flash_decode::workspace_floats(tokens, q_heads, head_dim, max_ctx);
}

int64_t attention_workspace_counter_bytes(int64_t q_heads) {
  return flash_decode::kMaxTokens * q_heads * int64_t(sizeof(int));
}

bool attention_v1_supports(const AttentionArgs& a) { return flash_decode::supports(a); }

void launch_split_then_merge(const AttentionArgs& a, int64_t target_ctas, cudaStream_t stream) {
  const SplitPlan plan = plan_splits(a.max_position, a.tokens, a.kv_heads, target_ctas);
  launch_splits<false>(a, plan, nullptr, stream);
  CUDA_CHECK_LAUNCH();
  launch(merge_kernel, dim3(unsigned(a.tokens * a.q_heads)), dim3(unsigned(a.head_dim)), 0, stream, a, plan.chunk,
         plan.splits, partials_base(a));
  CUDA_CHECK_LAUNCH();
}

void launch_attention_v1(const AttentionArgs& a, cudaStream_t stream) {
  launch_split_then_merge(a, flash_decode::kTargetCtas, stream);
}

}  // namespace qwen3::kernels
