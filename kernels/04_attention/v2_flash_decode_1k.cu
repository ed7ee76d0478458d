// v2_flash_decode_1k: v1_flash_decode in one kernel. v1 ends with a merge kernel (one more launch and one more
// drain of the GPU per layer, 36 per token); here each CTA counts itself done on an atomic counter per
// (token, kv head) and the last one merges all chunks of its GQA group, then resets the counter for the next launch.
#include "kernels/04_attention/flash_decode.cuh"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {

bool attention_v2_supports(const AttentionArgs& a) { return flash_decode::supports(a); }

// Every launch leaves the counters zero; clearing them first (one memset node) keeps a launch correct even on a
// workspace something else wrote (the kernel tests poison it), at the cost of the launch this version saves.
void launch_attention_v2(const AttentionArgs& a, cudaStream_t stream) {
  const flash_decode::SplitPlan plan = flash_decode::plan_splits(a.max_position, a.tokens, a.kv_heads);
  CUDA_CHECK(cudaMemsetAsync(flash_decode::counters_base(a), 0, size_t(a.tokens * a.kv_heads) * sizeof(int), stream));
  flash_decode::launch_splits<true>(a, plan, flash_decode::counters_base(a), stream);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
