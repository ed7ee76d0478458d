// v0_qkv_attention_composite: the baseline the fused versions are measured against: v1_qk_norm_rope_cache (q to
// prep.q_out, k and v to the cache), then v3_flash_decode_wide (split-KV kernel + merge kernel), as the decode
// step ran them before the fusion. Three kernels; q and the split-KV partials make a round trip through memory.
#include "kernels/kernels.h"

namespace qwen3::kernels {

void launch_qk_norm_rope_cache_v1(const QkNormRopeCacheArgs&, cudaStream_t);  // 03_rope/v1_qk_norm_rope_cache.cu
bool qk_norm_rope_cache_v1_supports(const QkNormRopeCacheArgs&);
void launch_attention_v3(const AttentionArgs&, cudaStream_t);  // 04_attention/v3_flash_decode_wide.cu
bool attention_v3_supports(const AttentionArgs&);

namespace {
AttentionArgs attention_args(const QkvAttentionArgs& a) {
  const QkNormRopeCacheArgs& p = a.prep;
  return {p.q_out,     p.k_cache,  p.v_cache, a.out,      p.positions,    p.slots,  p.tokens, p.q_heads,
          p.kv_heads, p.head_dim, p.max_ctx, a.max_position, a.scale, a.workspace};
}
}  // namespace

bool qkv_attention_v0_supports(const QkvAttentionArgs& a) {
  return a.prep.q_out != nullptr && qk_norm_rope_cache_v1_supports(a.prep) && attention_v3_supports(attention_args(a));
}

void launch_qkv_attention_v0(const QkvAttentionArgs& a, cudaStream_t stream) {
  launch_qk_norm_rope_cache_v1(a.prep, stream);
  launch_attention_v3(attention_args(a), stream);
}

}  // namespace qwen3::kernels
