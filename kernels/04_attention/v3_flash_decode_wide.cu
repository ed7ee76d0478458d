// v3_flash_decode_wide: v1 (split kernel + merge kernel) with 4x more, shorter chunks: ~8 CTAs per SM instead of
// ~2. At 8K context v1 ran 256 CTAs of 4 warps with a few keys in flight each, and the attention of a decode step
// cost ~5x its KV bytes at full bandwidth. (v2's in-kernel merge was slower than v1's merge kernel under PDL.)
#include "kernels/04_attention/flash_decode.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {

void launch_split_then_merge(const AttentionArgs& a, int64_t target_ctas, cudaStream_t stream);  // v1_flash_decode.cu

bool attention_v3_supports(const AttentionArgs& a) { return flash_decode::supports(a); }

void launch_attention_v3(const AttentionArgs& a, cudaStream_t stream) {
  launch_split_then_merge(a, flash_decode::kTargetCtasWide, stream);
}

}  // namespace qwen3::kernels
