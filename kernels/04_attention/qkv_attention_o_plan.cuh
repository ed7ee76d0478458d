// What every qkv_attention_o version shares on the host and in its kernel: the grid of CTAs that own rows of w_o,
// how many key splits a kv head may take, and the workspace layout (v1_qkv_attention_o.cu's v1-v7 and
// v8_qkv_attention_o_wavefront.cu).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/reduce.cuh"

namespace qwen3::kernels::qkv_attention_o_plan {

constexpr int kMaxSplits = kWarpSize;     // splits per kv head are weighed one per lane
constexpr int kDefaultKeysPerSplit = 64;  // one K tile and one V tile per split before more CTAs share the keys
constexpr int kMaxKeysPerSplit = 2048;

// The CTAs that own o rows: one per SM, ceil(hidden / SMs) rows each (at least kv_heads CTAs, one per kv head's
// first split). Their count is the number of norm partials a launch leaves (qkv_attention_o_partials).
struct Grid {
  int ctas, rows_per_cta;
};

inline Grid grid_for(int64_t hidden, int64_t kv_heads) {
  const int64_t sms = device_sm_count();
  const int64_t rows = (hidden + sms - 1) / sms;
  return {int(std::max<int64_t>(kv_heads, (hidden + rows - 1) / rows)), int(rows)};
}

// Workspace, in 4-byte words: counters padded to 16 bytes (v1: splits done; v2: heads merged; both: CTAs done
// reading, then v2's splits done per kv head; v8: CTAs done, then per kv head its QKV rows done, its splits done
// and its heads merged); the split statistics, (q_heads, max_splits) pairs (max, sum), padded to 16 bytes; the
// split outputs, (q_heads, max_splits, head_dim) floats, unnormalized.
__host__ __device__ inline int64_t counter_words(int64_t kv_heads) { return (2 + 3 * kv_heads + 3) / 4 * 4; }
__host__ __device__ inline int64_t stats_words(int64_t q_heads, int64_t max_splits) {
  return (q_heads * max_splits * 2 + 3) / 4 * 4;
}

// v35's tagged words (kernels/common/tagged_words.cuh), after the split outputs, 8 bytes each: per (q head, split)
// head_dim + 2 (the unnormalized output, then max and sum); then the merged attention output, a bf16 pair a word;
// then the launch count the tags come from (one 4-byte word, padded to 16 bytes).
__host__ __device__ inline int64_t tagged_split_words(int64_t q_heads, int64_t max_splits, int64_t head_dim) {
  return q_heads * max_splits * (head_dim + 2);
}
__host__ __device__ inline int64_t tagged_head_words(int64_t q_heads, int64_t head_dim) {
  return q_heads * head_dim / 2;
}

inline int max_splits_for(const Grid& g, int64_t kv_heads) {
  return int(std::min<int64_t>(kMaxSplits, g.ctas / kv_heads));
}

// Residual row `row` with the MLP's delta folded in as transformers rounds it, bf16(h + bf16(Σ copies)), the
// delta_copies copies (each `hidden` floats) summed in order and then zeroed for the next MLP launch.
// residual_delta nullptr: the row as it is. PRECOND: no other thread reads or writes this row's delta meanwhile.
__device__ __forceinline__ bf16 residual_with_delta(const bf16* residual, float* residual_delta, int delta_copies,
                                                    int64_t hidden, int64_t row) {
  bf16 h = residual[row];
  if (residual_delta != nullptr) {
    float delta = 0.0f;
    for (int j = 0; j < delta_copies; ++j) delta += residual_delta[j * hidden + row];
    h = __float2bfloat16_rn(__bfloat162float(h) + bf16_round(delta));
    for (int j = 0; j < delta_copies; ++j) residual_delta[j * hidden + row] = 0.0f;
  }
  return h;
}

}  // namespace qwen3::kernels::qkv_attention_o_plan
