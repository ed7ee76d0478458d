// v1_sample_topk: v0 spent ~1.2 ms per row on Qwen3's default sampling (top-k 20, top-p 0.95): its radix-select
// histograms take one shared-memory atomic per element, and at the top byte nearly all 151936 logits hit the same
// few bins, so the atomics serialize. Here, when top-k is on (k <= 1024):
//  * the k-th largest key is found with the same radix select, but each warp first merges the lanes that hit the
//    same bin (__match_any_sync) and adds their count with one atomic;
//  * the candidates (key >= that threshold; ties included, as transformers keeps them) are gathered into shared
//    memory and ranked (by logit, ties to the lower id: deterministic); top-p, min-p and the draw then walk at
//    most 1024 sorted candidates.
// Without top-k (or with more than 1024 tied candidates) it falls back to v0's method.
#include "kernels/07_sampling/sample_common.cuh"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using namespace sampling;

constexpr int kMaxCandidates = 1024;

// The key of the k-th largest z, counting with one atomic per (warp, bin) instead of one per element.
__device__ uint32_t kth_largest_key(const RowView& row, int64_t vocab, float inv_t, uint32_t k, uint32_t* hist,
                                    uint32_t* s_prefix, uint32_t* s_remaining) {
  const int lane = threadIdx.x % kWarpSize;
  uint32_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) *s_remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0;
    __syncthreads();
    for (int64_t base = 0; base < vocab; base += kThreads) {  // uniform trip count: every lane reaches the ballot
      const int64_t i = base + threadIdx.x;
      uint32_t key = 0;
      bool match = false;
      if (i < vocab) {
        key = order_key(row.adjusted(i) * inv_t);
        match = (key & mask) == prefix;
      }
      const unsigned matching = __ballot_sync(0xffffffffu, match);
      if (match) {
        const uint32_t bin = (key >> shift) & 0xff;
        const unsigned peers = __match_any_sync(matching, bin);
        if (lane == __ffs(peers) - 1) atomicAdd(&hist[bin], uint32_t(__popc(peers)));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t remaining = *s_remaining, above = 0;
      int chosen = 0;
      for (int b = kBins - 1; b >= 0; --b) {
        if (hist[b] == 0) continue;
        chosen = b;
        if (above + hist[b] >= remaining) break;
        above += hist[b];
      }
      *s_remaining = remaining - above;
      *s_prefix = prefix | (uint32_t(chosen) << shift);
    }
    __syncthreads();
    prefix = *s_prefix;
    mask |= 0xffu << shift;
    __syncthreads();
  }
  return prefix;
}

// PRECOND: blockDim.x == kThreads; one block per row.
__global__ void __launch_bounds__(kThreads) sample_topk_kernel(SampleArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float s_val[32];
  __shared__ int64_t s_idx[32];
  __shared__ float hist_f[kBins];
  __shared__ uint32_t hist_u[kBins];
  __shared__ uint32_t s_prefix, s_remaining;
  __shared__ float s_target;
  __shared__ float cand_z[kMaxCandidates];
  __shared__ int32_t cand_id[kMaxCandidates];
  __shared__ int16_t sorted[kMaxCandidates];
  __shared__ int n_cand;
  const int64_t r = blockIdx.x;
  RowView row{a.logits + r * a.vocab, a.token_counts ? a.token_counts + r * a.vocab : nullptr,
              a.in_prompt ? a.in_prompt + r * a.vocab : nullptr, a.params[r]};
  const int64_t vocab = a.vocab;

  float best = -FLT_MAX;
  int64_t best_index = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float z = row.adjusted(i);
    if (z > best) best = z, best_index = i;
  }
  const int64_t argmax = block_argmax(best, best_index, s_val, s_idx);
  if (row.p.temperature <= 0.0f) {
    if (threadIdx.x == 0) a.out_tokens[r] = int32_t(argmax);
    return;
  }
  const float inv_t = 1.0f / row.p.temperature;
  const float z_max = row.adjusted(argmax) * inv_t;

  if (row.p.top_k > 0 && row.p.top_k <= kMaxCandidates && row.p.top_k < vocab) {
    const uint32_t threshold =
        kth_largest_key(row, vocab, inv_t, uint32_t(row.p.top_k), hist_u, &s_prefix, &s_remaining);
    if (threadIdx.x == 0) n_cand = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float z = row.adjusted(i) * inv_t;
      if (order_key(z) < threshold) continue;
      const int slot = atomicAdd(&n_cand, 1);
      if (slot < kMaxCandidates) {
        cand_z[slot] = z;
        cand_id[slot] = int32_t(i);
      }
    }
    __syncthreads();
    const int n = n_cand;
    if (n <= kMaxCandidates) {
      // Rank = how many candidates come first (larger z, or equal z and lower id): a stable, deterministic order.
      for (int j = threadIdx.x; j < n; j += kThreads) {
        int rank = 0;
        for (int i = 0; i < n; ++i)
          rank += cand_z[i] > cand_z[j] || (cand_z[i] == cand_z[j] && cand_id[i] < cand_id[j]);
        sorted[rank] = int16_t(j);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        // Softmax over the candidates (their max is z_max), then top-p's smallest prefix and min-p, then the draw.
        double total = 0;
        for (int i = 0; i < n; ++i) total += exp(double(cand_z[sorted[i]] - z_max));
        int keep = n;
        if (row.p.top_p < 1.0f) {
          double cumulative = 0;
          for (int i = 0; i < n; ++i) {
            cumulative += exp(double(cand_z[sorted[i]] - z_max)) / total;
            if (cumulative >= double(row.p.top_p)) {
              keep = i + 1;
              break;
            }
          }
        }
        if (row.p.min_p > 0.0f) {
          int kept_by_min_p = 1;
          while (kept_by_min_p < keep && exp(double(cand_z[sorted[kept_by_min_p]] - z_max)) >= double(row.p.min_p))
            ++kept_by_min_p;
          keep = kept_by_min_p;
        }
        double mass = 0;
        for (int i = 0; i < keep; ++i) mass += exp(double(cand_z[sorted[i]] - z_max));
        const double target = double(next_uniform(row.p.seed, a.step + r)) * mass;
        double cumulative = 0;
        int32_t chosen = cand_id[sorted[keep - 1]];
        for (int i = 0; i < keep; ++i) {
          cumulative += exp(double(cand_z[sorted[i]] - z_max));
          if (target < cumulative) {
            chosen = cand_id[sorted[i]];
            break;
          }
        }
        a.out_tokens[r] = chosen;
      }
      return;
    }
    // More than kMaxCandidates tied at the threshold: v0's method below.
  }
  const uint32_t threshold = threshold_by_radix(row, vocab, inv_t, z_max, hist_f, &s_prefix, &s_target, s_val);
  draw_by_threshold(row, vocab, inv_t, z_max, threshold, argmax, a.step + r, a.out_tokens + r);
}

}  // namespace

void launch_sample_v1(const SampleArgs& a, cudaStream_t stream) {
  launch(sample_topk_kernel, dim3(unsigned(a.rows)), dim3(kThreads), 0, stream, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
