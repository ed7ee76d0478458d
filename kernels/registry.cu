// The version lists of registry.h. Adding a version: write kernels/<op>/vN_<name>.cu with a launch function (and a
// supports() if it does not take every shape), declare both below, append one row. Oldest first.
#include "kernels/registry.h"

namespace qwen3::kernels {

void launch_embedding_v0(const EmbeddingArgs&, cudaStream_t);
void launch_embedding_v1(const EmbeddingArgs&, cudaStream_t);
void launch_gemv_residual_v7(const GemvResidualArgs&, cudaStream_t);
bool gemv_residual_v7_supports(const GemvResidualArgs&);
void launch_gemv_norm_v8(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v8_supports(const NormGemvArgs&);
void launch_gate_up_swiglu_norm_v4(const NormGateUpSwigluArgs&, cudaStream_t);
bool gate_up_swiglu_norm_v4_supports(const NormGateUpSwigluArgs&);
void launch_rmsnorm_v0(const RmsnormArgs&, cudaStream_t);
void launch_rmsnorm_v1(const RmsnormArgs&, cudaStream_t);
bool rmsnorm_v1_supports(const RmsnormArgs&);
void launch_add_rmsnorm_v0(const AddRmsnormArgs&, cudaStream_t);
void launch_add_rmsnorm_v1(const AddRmsnormArgs&, cudaStream_t);
bool add_rmsnorm_v1_supports(const AddRmsnormArgs&);
void launch_add_delta_rmsnorm_v0(const AddDeltaRmsnormArgs&, cudaStream_t);
bool add_delta_rmsnorm_v0_supports(const AddDeltaRmsnormArgs&);
void launch_gemm_v0(const GemmArgs&, cudaStream_t);
void launch_gemm_v1(const GemmArgs&, cudaStream_t);
bool gemm_v1_supports(const GemmArgs&);
void launch_gemm_v2(const GemmArgs&, cudaStream_t);
bool gemm_v2_supports(const GemmArgs&);
void launch_gemm_v3(const GemmArgs&, cudaStream_t);
bool gemm_v3_supports(const GemmArgs&);
void launch_rope_v0(const RopeArgs&, cudaStream_t);
void launch_qk_norm_rope_cache_v1(const QkNormRopeCacheArgs&, cudaStream_t);
bool qk_norm_rope_cache_v1_supports(const QkNormRopeCacheArgs&);
void launch_kv_write_v0(const KvWriteArgs&, cudaStream_t);
void launch_attention_v0(const AttentionArgs&, cudaStream_t);
bool attention_v0_supports(const AttentionArgs&);
void launch_attention_v1(const AttentionArgs&, cudaStream_t);
bool attention_v1_supports(const AttentionArgs&);
void launch_silu_mul_v0(const SiluMulArgs&, cudaStream_t);
bool silu_mul_v0_supports(const SiluMulArgs&);
void launch_add_v0(const AddArgs&, cudaStream_t);
bool add_v0_supports(const AddArgs&);
void launch_sample_v0(const SampleArgs&, cudaStream_t);
void launch_sample_v1(const SampleArgs&, cudaStream_t);
void launch_sample_v2(const SampleArgs&, cudaStream_t);
bool sample_v2_supports(const SampleArgs&);
bool sample_v0_supports(const SampleArgs&);
void launch_gemm_v4(const GemmArgs&, cudaStream_t);
bool gemm_v4_supports(const GemmArgs&);
void launch_gate_up_swiglu_v1(const GateUpSwigluArgs&, cudaStream_t);
bool gate_up_swiglu_v1_supports(const GateUpSwigluArgs&);
void launch_attention_v2(const AttentionArgs&, cudaStream_t);
bool attention_v2_supports(const AttentionArgs&);
void launch_attention_v3(const AttentionArgs&, cudaStream_t);
bool attention_v3_supports(const AttentionArgs&);
void launch_decode_layers_v1(const DecodeLayersArgs&, cudaStream_t);
bool decode_layers_v1_supports(const DecodeLayersArgs&);
void launch_qkv_attention_v0(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v0_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v1(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v1_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v2(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v2_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v3(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v3_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v4(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v4_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v5(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v5_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v6(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v6_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v7(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v7_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v8(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v8_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v9(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v9_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v10(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v10_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v11(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v11_supports(const QkvAttentionArgs&);
void launch_qkv_attention_v12(const QkvAttentionArgs&, cudaStream_t);
bool qkv_attention_v12_supports(const QkvAttentionArgs&);
void launch_qkv_attention_o_v1(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v1_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v2(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v2_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v3(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v3_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v4(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v4_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v5(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v5_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v6(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v6_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v7(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v7_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v8(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v8_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v9(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v9_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v10(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v10_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v11(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v11_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v12(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v12_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v13(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v13_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v14(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v14_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v15(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v15_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v16(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v16_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v17(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v17_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v18(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v18_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v19(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v19_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v20(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v20_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v21(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v21_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v22(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v22_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v23(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v23_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v24(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v24_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v25(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v25_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v26(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v26_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v27(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v27_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v28(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v28_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v29(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v29_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v30(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v30_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v31(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v31_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v32(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v32_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v33(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v33_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v34(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v34_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v35(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v35_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v36(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v36_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v40(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v40_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v41(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v41_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v42(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v42_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v43(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v43_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v44(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v44_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v45(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v45_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v46(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v46_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v37(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v37_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v38(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v38_supports(const QkvAttentionOArgs&);
void launch_qkv_attention_o_v39(const QkvAttentionOArgs&, cudaStream_t);
bool qkv_attention_o_v39_supports(const QkvAttentionOArgs&);
void launch_gemm_v5(const GemmArgs&, cudaStream_t);
bool gemm_v5_supports(const GemmArgs&);
void launch_gate_up_swiglu_v2(const GateUpSwigluArgs&, cudaStream_t);
bool gate_up_swiglu_v2_supports(const GateUpSwigluArgs&);
void launch_gemm_v6(const GemmArgs&, cudaStream_t);
bool gemm_v6_supports(const GemmArgs&);
void launch_gate_up_swiglu_v3(const GateUpSwigluArgs&, cudaStream_t);
bool gate_up_swiglu_v3_supports(const GateUpSwigluArgs&);
void launch_gate_up_swiglu_v4(const GateUpSwigluArgs&, cudaStream_t);
bool gate_up_swiglu_v4_supports(const GateUpSwigluArgs&);
void launch_gemm_v9(const GemmArgs&, cudaStream_t);
bool gemm_v9_supports(const GemmArgs&);
void launch_gemm_v10(const GemmArgs&, cudaStream_t);
bool gemm_v10_supports(const GemmArgs&);
void launch_gemm_v11(const GemmArgs&, cudaStream_t);
bool gemm_v11_supports(const GemmArgs&);
void launch_gemm_v12(const GemmArgs&, cudaStream_t);
bool gemm_v12_supports(const GemmArgs&);
void launch_gemv_residual_v9(const GemvResidualArgs&, cudaStream_t);
bool gemv_residual_v9_supports(const GemvResidualArgs&);
void launch_gemv_norm_v9(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v9_supports(const NormGemvArgs&);
void launch_gemv_norm_v10(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v10_supports(const NormGemvArgs&);
void launch_gemv_norm_v11(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v11_supports(const NormGemvArgs&);
void launch_gemv_norm_v12(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v12_supports(const NormGemvArgs&);
void launch_gemv_norm_v13(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v13_supports(const NormGemvArgs&);
void launch_gemv_norm_v14(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v14_supports(const NormGemvArgs&);
void launch_gemv_norm_v15(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v15_supports(const NormGemvArgs&);
void launch_gemv_norm_v16(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v16_supports(const NormGemvArgs&);
void launch_gemv_norm_v17(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v17_supports(const NormGemvArgs&);
void launch_gemv_norm_v19(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v19_supports(const NormGemvArgs&);
void launch_gemv_norm_v18(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v18_supports(const NormGemvArgs&);
void launch_gemv_norm_v20(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v20_supports(const NormGemvArgs&);
void launch_gemv_norm_v21(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v21_supports(const NormGemvArgs&);
void launch_gemv_norm_v22(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v22_supports(const NormGemvArgs&);
void launch_gemv_norm_v23(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v23_supports(const NormGemvArgs&);
void launch_gemv_norm_v24(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v24_supports(const NormGemvArgs&);
void launch_gemv_norm_v25(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v25_supports(const NormGemvArgs&);
void launch_gemv_norm_v26(const NormGemvArgs&, cudaStream_t);
bool gemv_norm_v26_supports(const NormGemvArgs&);
void launch_gemv_residual_v10(const GemvResidualArgs&, cudaStream_t);
bool gemv_residual_v10_supports(const GemvResidualArgs&);
void launch_gate_up_swiglu_norm_v6(const NormGateUpSwigluArgs&, cudaStream_t);
bool gate_up_swiglu_norm_v6_supports(const NormGateUpSwigluArgs&);
void launch_gate_up_swiglu_norm_v5(const NormGateUpSwigluArgs&, cudaStream_t);
bool gate_up_swiglu_norm_v5_supports(const NormGateUpSwigluArgs&);
void launch_mlp_split_down_v1(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v1_supports(const NormMlpArgs&);
void launch_mlp_split_down_v2(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v2_supports(const NormMlpArgs&);
void launch_mlp_qkv_next_v3(const NormMlpArgs&, cudaStream_t);
bool mlp_qkv_next_v3_supports(const NormMlpArgs&);
void launch_mlp_split_down_v4(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v4_supports(const NormMlpArgs&);
void launch_mlp_split_down_v5(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v5_supports(const NormMlpArgs&);
void launch_mlp_split_down_v6(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v6_supports(const NormMlpArgs&);
void launch_mlp_with_o_v7(const NormMlpArgs&, cudaStream_t);
bool mlp_with_o_v7_supports(const NormMlpArgs&);
void launch_mlp_split_down_v8(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v8_supports(const NormMlpArgs&);
void launch_mlp_split_down_v9(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v9_supports(const NormMlpArgs&);
void launch_mlp_split_down_v10(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v10_supports(const NormMlpArgs&);
void launch_mlp_split_down_v11(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v11_supports(const NormMlpArgs&);
void launch_mlp_split_down_v12(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v12_supports(const NormMlpArgs&);
void launch_mlp_split_down_v13(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v13_supports(const NormMlpArgs&);
void launch_mlp_split_down_v14(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v14_supports(const NormMlpArgs&);
void launch_mlp_split_down_v15(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v15_supports(const NormMlpArgs&);
void launch_mlp_split_down_v16(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v16_supports(const NormMlpArgs&);
void launch_mlp_split_down_v17(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v17_supports(const NormMlpArgs&);
void launch_mlp_split_down_v18(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v18_supports(const NormMlpArgs&);
void launch_mlp_split_down_v19(const NormMlpArgs&, cudaStream_t);
bool mlp_split_down_v19_supports(const NormMlpArgs&);
void launch_transpose_v0(const TransposeArgs&, cudaStream_t);
bool transpose_v0_supports(const TransposeArgs&);

const std::vector<KernelVersion<EmbeddingArgs>>& embedding_versions() {
  static const std::vector<KernelVersion<EmbeddingArgs>> v{
      {"v0_embedding", "one block per token, 16-byte row copy", launch_embedding_v0, nullptr},
      {"v1_embedding_stats", "v0 + the row's sum of squares for layer 0's norm GEMV", launch_embedding_v1, nullptr},
  };
  return v;
}

const std::vector<KernelVersion<RmsnormArgs>>& rmsnorm_versions() {
  static const std::vector<KernelVersion<RmsnormArgs>> v{
      {"v0_rmsnorm", "block per row, scalar, reads the row twice", launch_rmsnorm_v0, nullptr},
      {"v1_rmsnorm_vec", "row kept in registers, 16-byte vectors: one read of the row", launch_rmsnorm_v1,
       rmsnorm_v1_supports},
  };
  return v;
}

const std::vector<KernelVersion<AddRmsnormArgs>>& add_rmsnorm_versions() {
  static const std::vector<KernelVersion<AddRmsnormArgs>> v{
      {"v0_add_rmsnorm", "residual add and norm in one block, scalar", launch_add_rmsnorm_v0, nullptr},
      {"v1_add_rmsnorm_vec", "16-byte vectors, row in registers", launch_add_rmsnorm_v1, add_rmsnorm_v1_supports},
  };
  return v;
}

const std::vector<KernelVersion<AddDeltaRmsnormArgs>>& add_delta_rmsnorm_versions() {
  static const std::vector<KernelVersion<AddDeltaRmsnormArgs>> v{
      {"v0_add_delta_rmsnorm", "the fp32 delta copies summed into the bf16 residual and zeroed, then the norm; "
                               "16-byte vectors, the row in registers (v1_rmsnorm_vec.cu)",
       launch_add_delta_rmsnorm_v0, add_delta_rmsnorm_v0_supports},
  };
  return v;
}

const std::vector<KernelVersion<GemmArgs>>& gemm_versions() {
  static const std::vector<KernelVersion<GemmArgs>> v{
      {"v0_gemm_naive", "thread per output, scalar uncoalesced loads", launch_gemm_v0, nullptr},
      {"v1_gemv_warp", "decode: warp per row, coalesced 16-byte loads, shuffle reduce", launch_gemm_v1,
       gemm_v1_supports},
      {"v2_gemv_stream", "decode: 4 loads in flight per lane, evict-first, rows per warp scale with batch",
       launch_gemm_v2, gemm_v2_supports},
      {"v3_gemm_mma", "prefill: mma.sync bf16 tensor cores, ldmatrix, 4-stage cp.async, 128x128x32 tiles",
       launch_gemm_v3, gemm_v3_supports},
      {"v4_gemv_pdl", "decode: double-buffered weight loads, first group issued before the PDL wait",
       launch_gemm_v4, gemm_v4_supports},
      {"v5_gemv_batch", "decode: v4 with each loaded vector widened once (batch 4-8 were issue bound)",
       launch_gemm_v5, gemm_v5_supports},
      {"v6_gemv_l2_prefetch", "decode: v5 + bulk L2 prefetch of the weights before the PDL wait",
       launch_gemm_v6, gemm_v6_supports},
      {"v9_gemv_tma", "decode, sm_90: CTA per SM, TMA bulk-copy ring of its rows filled before the PDL wait",
       launch_gemm_v9, gemm_v9_supports},
      {"v10_gemv_mma", "decode batch 2-8 on tensor cores: mma.sync m16n8k16 fed by 16-byte loads (weights as A, "
                       "the batch as B), split-K over 8 warps",
       launch_gemm_v10, gemm_v10_supports},
      {"v11_gemv_mma_deep", "v10 whose one-tile CTAs (o, qkv, down at Qwen3-8B's shapes) keep four 32-k steps a load "
                            "group in flight instead of two (v10_gemv_mma.cu)",
       launch_gemm_v11, gemm_v11_supports},
      {"v12_gemv_ring_tokens", "decode batch 1-2 at k 4096: CTA per SM, its rows through norm_mlp v14's cp.async ring "
                               "(6 x 4 rows, all issued before the PDL wait), each piece converted once for both "
                               "tokens; other shapes v2 (v12_gemv_ring_tokens.cu)",
       launch_gemm_v12, gemm_v12_supports},
  };
  return v;
}

const std::vector<KernelVersion<RopeArgs>>& rope_versions() {
  static const std::vector<KernelVersion<RopeArgs>> v{
      {"v0_rope", "block per token, thread per rotation pair, in place", launch_rope_v0, nullptr},
  };
  return v;
}

const std::vector<KernelVersion<QkNormRopeCacheArgs>>& qk_norm_rope_cache_versions() {
  static const std::vector<KernelVersion<QkNormRopeCacheArgs>> v{
      {"v1_qk_norm_rope_cache", "QK-norm + RoPE + KV-cache store in one pass, warp per head (v0 = the unfused "
                                "rmsnorm, rope, kv_write sequence)",
       launch_qk_norm_rope_cache_v1, qk_norm_rope_cache_v1_supports},
  };
  return v;
}

const std::vector<KernelVersion<KvWriteArgs>>& kv_write_versions() {
  static const std::vector<KernelVersion<KvWriteArgs>> v{
      {"v0_kv_write", "block per token copies k and v rows into the cache", launch_kv_write_v0, nullptr},
  };
  return v;
}

const std::vector<KernelVersion<AttentionArgs>>& attention_versions() {
  static const std::vector<KernelVersion<AttentionArgs>> v{
      {"v0_attention", "warp per (token, head), online softmax, one key at a time", launch_attention_v0,
       attention_v0_supports},
      {"v1_flash_decode", "split-KV with the GQA group in one CTA, 3-phase chunks + merge kernel",
       launch_attention_v1, attention_v1_supports, 2},
      {"v2_flash_decode_1k", "v1 in one kernel: the last CTA of each (token, kv head) merges the chunks",
       launch_attention_v2, attention_v2_supports},
      {"v3_flash_decode_wide", "v1 with ~8 CTAs per SM (4x shorter chunks) for long contexts",
       launch_attention_v3, attention_v3_supports, 2},
  };
  return v;
}

const std::vector<KernelVersion<QkvAttentionArgs>>& qkv_attention_versions() {
  static const std::vector<KernelVersion<QkvAttentionArgs>> v{
      {"v0_qkv_attention_composite", "v1_qk_norm_rope_cache, then v3_flash_decode_wide's split and merge kernels",
       launch_qkv_attention_v0, qkv_attention_v0_supports, 3},
      {"v1_qkv_attention_cluster", "one kernel: K/V streamed by cp.async while QK-norm/RoPE run, CTA clusters "
                                   "merge split-KV partials through distributed shared memory (sm_90)",
       launch_qkv_attention_v1, qkv_attention_v1_supports},
      {"v2_qkv_attention_mma", "v1 with q·Kᵀ and P·V on tensor cores (mma.sync m16n8k16, swizzled K/V tiles via "
                               "ldmatrix), an 8-deep cp.async ring for long contexts",
       launch_qkv_attention_v2, qkv_attention_v2_supports},
      {"v3_qkv_attention_adaptive", "v2's kernel on only as many CTAs of the cluster as the position needs (one: "
                                    "no cluster barrier) (v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v3, qkv_attention_v3_supports},
      {"v4_qkv_attention_l2", "v2 that pulls the o projection's weights into L2 (bulk prefetch, after its PDL wait) "
                              "while its own latency leaves HBM idle (v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v4, qkv_attention_v4_supports},
      {"v5_qkv_attention_l2_early", "v4 with the prefetch before the PDL wait, over the QKV GEMV's tail "
                                    "(v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v5, qkv_attention_v5_supports},
      {"v6_qkv_attention_split", "v2 that, past what a cluster splits well (2048 keys at batch 1), runs as many CTAs "
                                 "per kv head as fill the SMs, merged by the last through the workspace "
                                 "(v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v6, qkv_attention_v6_supports},
      {"v7_qkv_attention_split2", "v6 with two CTAs per SM on its long-context path (4-deep ring): twice the "
                                  "splits (v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v7, qkv_attention_v7_supports},
      {"v8_qkv_attention_chains", "v6 with two independent accumulator chains per product on its long-context path "
                                  "(v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v8, qkv_attention_v8_supports},
      {"v9_qkv_attention_split2_chains", "v7 (two CTAs per SM at long contexts) with v8's two accumulator chains "
                                         "(v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v9, qkv_attention_v9_supports},
      {"v10_qkv_attention_lean", "v9 with each thread's K/V tile-load offsets computed once, not per load (same "
                                 "loads, fewer instructions) (v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v10, qkv_attention_v10_supports},
      {"v11_qkv_attention_lean_short", "v10's lean loads at short contexts (the cluster path), v9 past 2048-key "
                                       "buckets (v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v11, qkv_attention_v11_supports},
      {"v12_qkv_attention_warp_merge", "v11 whose last CTA merges the long-context splits a warp per head, all of "
                                       "a head's L2 reads in flight at once (v2_qkv_attention_mma.cu)",
       launch_qkv_attention_v12, qkv_attention_v12_supports},
  };
  return v;
}

const std::vector<KernelVersion<QkvAttentionOArgs>>& qkv_attention_o_versions() {
  static const std::vector<KernelVersion<QkvAttentionOArgs>> v{
      {"v1_qkv_attention_o", "v12's attention and the o projection with its residual add in one launch: each CTA "
                             "streams its rows of w_o into shared memory (TMA) while the attention runs, splits "
                             "merged through the workspace (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v1, qkv_attention_o_v1_supports},
      {"v2_qkv_attention_o_head_merge", "v1 where the last split of each kv head merges it and every CTA reads the "
                                        "bf16 attention output instead of every split's partials "
                                        "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v2, qkv_attention_o_v2_supports},
      {"v3_qkv_attention_o_short_chain", "v2 with a shorter chain after the wait: the split's K/V rows prefetched "
                                         "into L2 before it, the residual rows read after the split, the merge's "
                                         "values loaded with its statistics (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v3, qkv_attention_o_v3_supports},
      {"v4_qkv_attention_o_grouped", "v3 with the o rows multiplied in groups of 8 read by the whole CTA, the first "
                                     "16 rows that are not staged loaded into registers while the attention runs "
                                     "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v4, qkv_attention_o_v4_supports},
      {"v5_qkv_attention_o_mma", "v3 with the o rows multiplied on tensor cores (mma.m16n8k16, the attention "
                                 "output as column 0 of B), staged rows padded against bank conflicts "
                                 "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v5, qkv_attention_o_v5_supports},
      {"v6_qkv_attention_o_warp_keys", "v2 with every warp attending its own 16-key chunks straight from global "
                                       "memory into mma fragments, an online softmax a warp, no K/V ring or "
                                       "barrier in the loop (attention_warp.cuh, v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v6, qkv_attention_o_v6_supports},
      {"v7_qkv_attention_o_mlp_lead", "v2 whose CTAs without a split pull the next MLP's first rows into L2 while "
                                      "the splits attend (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v7, qkv_attention_o_v7_supports},
      {"v8_qkv_attention_o_wavefront", "the QKV projection (RMSNorm folded in), the attention and the o projection "
                                       "in one launch, kv head by kv head: a head's splits attend once its QKV "
                                       "rows are counted in, a CTA multiplies a head's o columns once it is "
                                       "merged, one ring streaming every CTA's rows (v8_qkv_attention_o_wavefront.cu)",
       launch_qkv_attention_o_v8, qkv_attention_o_v8_supports},
      {"v9_qkv_attention_o_lean", "v2 with its tuning and diagnostic paths compiled out (the L2 prefetch of "
                                  "unstaged o rows, the loops run twice) (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v9, qkv_attention_o_v9_supports},
      {"v10_qkv_attention_o_claimed", "v9 whose splits of a kv head share its keys out while they run: static "
                                      "tiles, then tiles claimed from a per-head counter, so a slow split takes "
                                      "fewer (attention_mma.cuh attend_claimed_keys; v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v10, qkv_attention_o_v10_supports},
      {"v11_qkv_attention_o_late_rows", "v9 whose CTAs copy the o rows that fit in the K/V ring into it once the "
                                        "ring is free (after the split, or the PDL wait), so those rows arrive while "
                                        "the other splits finish (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v11, qkv_attention_o_v11_supports},
      {"v12_qkv_attention_o_typed_rows", "v9 whose o loop reads a warp's staged rows with shared-memory loads and "
                                         "its unstaged rows with global loads, not all through generic loads "
                                         "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v12, qkv_attention_o_v12_supports},
      {"v13_qkv_attention_o_shared_rows", "v12 with v9's generic loads for the unstaged rows: LDS.128 for the "
                                          "staged rows and the attention output only (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v13, qkv_attention_o_v13_supports},
      {"v14_qkv_attention_o_warm_code", "v9 whose split attention and o loop each run once before they are needed "
                                        "(before the PDL wait; before the wait for the heads), fetching their "
                                        "instructions while the CTA waits anyway (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v14, qkv_attention_o_v14_supports},
      {"v15_qkv_attention_o_warm_first", "v9 whose split attention runs once as a warm-up of its instructions first "
                                         "thing in the CTA, before it queues its staged o rows; v9's o loop "
                                         "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v15, qkv_attention_o_v15_supports},
      {"v16_qkv_attention_o_touch_pages", "v9 that prefetches one line of every page its chain touches after the "
                                          "PDL wait into L2 before it, warming the address translations "
                                          "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v16, qkv_attention_o_v16_supports},
      {"v17_qkv_attention_o_warm_rows", "v9 whose o loop runs a first pass (nothing written) before the heads are "
                                        "in, in the CTAs that did not merge one: its instructions fetched and its "
                                        "unstaged rows read once before the pass that counts (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v17, qkv_attention_o_v17_supports},
      {"v18_qkv_attention_o_pull_rows", "v9 whose CTAs without a split pull their unstaged o rows into L2 after the "
                                        "PDL wait, while the splits attend (v17's timing of those reads without its "
                                        "first pass; v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v18, qkv_attention_o_v18_supports},
      {"v19_qkv_attention_o_deep_rows", "v9 whose o loop keeps 8 chunks of each row in flight a lane, not 4: an "
                                        "unstaged row in 2 dependent round trips, not 4 (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v19, qkv_attention_o_v19_supports},
      {"v20_qkv_attention_o_warm_deep_rows", "v17 (the first o pass in the CTAs without a split) with v19's o loop; "
                                             "v19 where v17 takes v9 (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v20, qkv_attention_o_v20_supports},
      {"v21_qkv_attention_o_late_staging", "v17 whose CTAs with a split stage their o rows after the split, not "
                                           "before the PDL wait (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v21, qkv_attention_o_v21_supports},
      {"v22_qkv_attention_o_scaled_splits", "v17 with fewer, longer splits past 384 keys (6 splits of up to 192 "
                                            "keys, then 192 keys a split), more CTAs free for the first o pass "
                                            "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v22, qkv_attention_o_v22_supports},
      {"v23_qkv_attention_o_bucket_splits", "v17 in the graph buckets where it runs its own kernel, v22 (fewer, "
                                            "longer splits) where v17 takes v9's (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v23, qkv_attention_o_v23_supports},
      {"v24_qkv_attention_o_reverse_splits", "v9 with its splits on the CTAs in reverse order: the new key's split "
                                             "on the CTAs resident first (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v24, qkv_attention_o_v24_supports},
      {"v25_qkv_attention_o_scaled_early", "v22 wherever the launch's positions may pass 384 keys (where v22's splits "
                                           "differ from v17's), v17 below: v23's switch to v22 moved from 1920 "
                                           "positions down (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v25, qkv_attention_o_v25_supports},
      {"v26_qkv_attention_o_paced", "v25 whose CTAs without a split keep 4 staged o rows in flight (one thread "
                                    "issues the next as the oldest lands) instead of queueing all at once ahead of "
                                    "the attention's loads (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v26, qkv_attention_o_v26_supports},
      {"v27_qkv_attention_o_mlp_warm", "v25 whose CTAs without a split, after their first o pass, pull the next "
                                       "MLP's gate rows read after its wait into L2 until the heads are merged, 4 "
                                       "copies in flight a CTA (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v27, qkv_attention_o_v27_supports},
      {"v28_qkv_attention_o_mlp_after_heads", "v25 whose CTAs without a split, once the heads are merged, send "
                                              "bulk L2 prefetches of the next MLP's gate rows read after its wait, "
                                              "then run their o phase (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v28, qkv_attention_o_v28_supports},
      {"v29_qkv_attention_o_mma_handoff", "v25 whose split CTAs multiply only their staged o rows and hand the "
                                          "rest to the CTAs without a split, the o loop on tensor cores "
                                          "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v29, qkv_attention_o_v29_supports},
      {"v30_qkv_attention_o_handoff_rows", "v29's hand-off of the split CTAs' unstaged o rows with v17's o loop, "
                                           "the rows dealt round-robin over the warps (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v30, qkv_attention_o_v30_supports},
      {"v31_qkv_attention_o_handoff_late", "v30's hand-off, the rows taken over read after the merge only, and "
                                           "only the split CTAs' last handoff_rows (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v31, qkv_attention_o_v31_supports},
      {"v32_qkv_attention_o_trigger_late", "v25 whose CTAs let the next launch start once every split is in, "
                                           "not at their start (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v32, qkv_attention_o_v32_supports},
      {"v33_qkv_attention_o_counted", "v25 whose CTAs wait for the QKV GEMV's count of CTAs done instead of the "
                                      "PDL wait and count themselves done for the next MLP (QkvAttentionOArgs::"
                                      "handoff, handoff_signal; norm_gemv v25, norm_mlp v19) (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v33, qkv_attention_o_v33_supports, 1, true},
      {"v34_qkv_attention_o_release_counts", "v25 whose splits, head merges and waits for the merged heads "
                                             "synchronize through one thread's release / acquire on their counts "
                                             "instead of every thread's __threadfence (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v34, qkv_attention_o_v34_supports},
      {"v35_qkv_attention_o_tagged_merge", "v34 whose splits hand their partials to the head's last split, and it "
                                           "the merged head to every CTA, in tagged words: no fence, no count on "
                                           "the splits' side (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v35, qkv_attention_o_v35_supports},
      {"v36_qkv_attention_o_merge_at_once", "v34 whose head merge loads up to eight splits' values with their "
                                            "statistics: one L2 round trip; slower past 1536 keys "
                                            "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v36, qkv_attention_o_v36_supports},
      {"v37_qkv_attention_o_cluster_merge", "v34 in thread-block clusters of 8 CTAs, one a kv head's splits, "
                                            "whose first split merges the head from the cluster's shared memory: "
                                            "no L2 round trip on the merge's path (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v37, qkv_attention_o_v37_supports},
      {"v38_qkv_attention_o_cluster_trigger_late", "v37 whose CTAs let the next launch start once every split is in, "
                                                   "not at their start (v32's trigger) (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v38, qkv_attention_o_v38_supports},
      {"v39_qkv_attention_o_cluster_rows", "v38 whose o loop deals a CTA's rows round-robin over its warps in one "
                                           "batch (v30's loop, no hand-off) (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v39, qkv_attention_o_v39_supports},
      {"v40_qkv_attention_o_merge_at_once_short", "v36 where every position takes at most eight splits (1536 keys), "
                                                  "v34 past them (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v40, qkv_attention_o_v40_supports},
      {"v41_qkv_attention_o_cluster_heads", "every cluster of 8 CTAs attends every kv head (one a CTA) and sums its "
                                            "o rows' heads in distributed shared memory: no L2 round trip between "
                                            "CTAs; v40 past 1024 keys; 0.95x of v40 "
                                            "(v41_qkv_attention_o_cluster_heads.cu)",
       launch_qkv_attention_o_v41, qkv_attention_o_v41_supports},
      {"v42_qkv_attention_o_trigger_late_short", "v40 whose CTAs let the next launch start once every split is "
                                                 "in (v32's trigger); 1.003x-1.005x of v40 on an H100 "
                                                 "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v42, qkv_attention_o_v42_supports},
      {"v43_qkv_attention_o_residual_in_prepare", "v42 whose split CTAs read their residual rows by their last warp "
                                                  "in the attention's prepare step, not by warp 0 before it "
                                                  "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v43, qkv_attention_o_v43_supports},
      {"v44_qkv_attention_o_residual_in_prepare_short", "v43 where the splits take a ring of two K/V tiles (the "
                                                        "512-position graph bucket at Qwen3-8B), v42 elsewhere; the "
                                                        "default, 1.003x of v42 at prompt 128 on an H100 "
                                                        "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v44, qkv_attention_o_v44_supports},
      {"v45_qkv_attention_o_tiles_at_once", "v44 whose splits have every K/V tile in flight before the prepare step "
                                            "where they all fit the ring, not the K tile then the V tile "
                                            "(v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v45, qkv_attention_o_v45_supports},
      {"v46_qkv_attention_o_tiles_early", "v45 whose split CTAs issue their first K/V tiles before the PDL wait, "
                                          "ahead of their staged o rows (v1_qkv_attention_o.cu)",
       launch_qkv_attention_o_v46, qkv_attention_o_v46_supports},
  };
  return v;
}

const std::vector<KernelVersion<SiluMulArgs>>& silu_mul_versions() {
  static const std::vector<KernelVersion<SiluMulArgs>> v{
      {"v0_silu_mul", "elementwise on the fused gate|up output, 16-byte vectors", launch_silu_mul_v0,
       silu_mul_v0_supports},
  };
  return v;
}

const std::vector<KernelVersion<GateUpSwigluArgs>>& gate_up_swiglu_versions() {
  static const std::vector<KernelVersion<GateUpSwigluArgs>> v{
      {"v1_gate_up_swiglu", "gate and up rows in one warp, SwiGLU in the GEMV epilogue (v0 = gemm + silu_mul)",
       launch_gate_up_swiglu_v1, gate_up_swiglu_v1_supports},
      {"v2_gate_up_swiglu", "v1 with each loaded vector widened once", launch_gate_up_swiglu_v2,
       gate_up_swiglu_v2_supports},
      {"v3_gate_up_swiglu_l2", "v2 + bulk L2 prefetch of the first gate/up rows before the PDL wait",
       launch_gate_up_swiglu_v3, gate_up_swiglu_v3_supports},
      {"v4_gate_up_swiglu_mma", "gemm v10_gemv_mma's kernel (tensor cores, 2-8 tokens) with the gate and up rows of "
                                "the same 16 features as its two tiles and SwiGLU in the epilogue: v10 + v0_silu_mul's "
                                "bits in one launch (v10_gemv_mma.cu)",
       launch_gate_up_swiglu_v4, gate_up_swiglu_v4_supports},
  };
  return v;
}

// The decode GEMVs with the residual add / RMSNorm folded in. Their v0 is the unfused pair they replace:
// gemm v5_gemv_batch + v1_add_rmsnorm_vec (residual) and v1_add_rmsnorm_vec + gemm / gate_up_swiglu (norm).
const std::vector<KernelVersion<GemvResidualArgs>>& gemv_residual_versions() {
  static const std::vector<KernelVersion<GemvResidualArgs>> v{
      {"v7_gemv_residual", "residual add in the GEMV epilogue, per-block sums of squares for the next norm",
       launch_gemv_residual_v7, gemv_residual_v7_supports},
      {"v9_gemv_residual_tma", "v7 on v9_gemv_tma's persistent TMA ring (sm_90); one partial per SM",
       launch_gemv_residual_v9, gemv_residual_v9_supports},
      {"v10_gemv_residual_early", "v7 with both weight buffers loaded before the PDL wait (v7_gemv_residual.cu)",
       launch_gemv_residual_v10, gemv_residual_v10_supports},
  };
  return v;
}

const std::vector<KernelVersion<NormGemvArgs>>& norm_gemv_versions() {
  static const std::vector<KernelVersion<NormGemvArgs>> v{
      {"v8_gemv_norm", "RMSNorm of the residual into shared memory in the GEMV prologue", launch_gemv_norm_v8,
       gemv_norm_v8_supports},
      {"v9_gemv_norm_tma", "v8 on v9_gemv_tma's persistent TMA ring (sm_90): weights in flight during the norm",
       launch_gemv_norm_v9, gemv_norm_v9_supports},
      {"v10_gemv_norm_wave", "v8 in one wave at batch 1: two rows per warp where one row per warp needs a second wave",
       launch_gemv_norm_v10, gemv_norm_v10_supports},
      {"v11_gemv_norm_early", "v10 with both weight buffers loaded before the PDL wait (v10_gemv_norm_wave.cu)",
       launch_gemv_norm_v11, gemv_norm_v11_supports},
      {"v12_gemv_norm_ring", "batch 1: one CTA per SM owning contiguous rows, fed by a cp.async shared-memory ring "
                             "(gemv_ring.cuh) with 128 KB in flight from before the PDL wait; other shapes: v10",
       launch_gemv_norm_v12, gemv_norm_v12_supports},
      {"v13_gemv_norm_ring_full", "v12 with every stage of its ring in flight (192 KB a CTA; the third group issued "
                                  "once the norm's loads are done): a group's successor is issued once the group is "
                                  "multiplied (v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v13, gemv_norm_v13_supports},
      {"v14_gemv_norm_ring_tma", "v13 whose groups before the PDL wait are TMA bulk copies (sm_90), so the norm's "
                                 "loads after the wait do not queue behind 192 KB of cp.async (v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v14, gemv_norm_v14_supports},
      {"v15_gemv_norm_ring_256t", "v12 with 256 threads a CTA, twice the pieces a thread (diagnostic: the 8 warps "
                                  "of qkv_attention_o v8; v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v15, gemv_norm_v15_supports},
      {"v16_gemv_norm_ring_l2_first", "v13 whose CTAs pull their first rows into L2 before the PDL wait instead of "
                                      "into the ring, and send the norm's loads ahead of the ring's copies (sm_90; "
                                      "elsewhere v12; v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v16, gemv_norm_v16_supports},
      {"v17_gemv_norm_ring_pair", "v12 in clusters of two CTAs: each reads half the columns of h and the delta "
                                  "copies for the norm and takes the other half from its partner's shared memory "
                                  "(sm_90; elsewhere v12; v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v17, gemv_norm_v17_supports},
      {"v18_gemv_norm_ring_lean", "v12's work with its ring's bookkeeping cut (hidden 4096 fixed at compile time, a "
                                  "group's rows from one pointer, bounds only in the last group; other shapes v12) "
                                  "(v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v18, gemv_norm_v18_supports},
      {"v19_gemv_norm_ring_tokens", "gemm v12's ring for 1-2 tokens with the input normed from the residual and the "
                                    "MLP's delta (the delta form only, k 4096; other args v10) "
                                    "(v12_gemv_ring_tokens.cu)",
       launch_gemv_norm_v19, gemv_norm_v19_supports},
      {"v20_gemv_norm_ring_deep", "v18 with groups of 4 rows in 6 stages: the same 192 KB ring, 160 KB of it in "
                                  "flight while a group is multiplied instead of 128 (other shapes v12) "
                                  "(v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v20, gemv_norm_v20_supports},
      {"v21_gemv_norm_ring_claimed", "v18 whose CTAs take the groups past their first 4 from a shared queue, so "
                                     "that CTAs resident early take more (needs NormGemvArgs::claims; else v18) "
                                     "(v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v21, gemv_norm_v21_supports},
      {"v22_gemv_norm_ring_paced", "v20 (groups of 4 rows) whose 5 groups before the PDL wait go out one at a "
                                   "time, the next once the previous lands, instead of a burst queued ahead of the "
                                   "loads around the MLP's end (v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v22, gemv_norm_v22_supports},
      {"v23_gemv_norm_ring_late", "v22 whose last CTAs to become resident (from NormGemvArgs::late_cta_from, 0: a "
                                  "quarter of the grid) issue one group before the PDL wait and the rest after the "
                                  "norm's loads, instead of pacing five before it (v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v23, gemv_norm_v23_supports},
      {"v24_gemv_norm_ring_touch_pages", "v22 whose warp 0 prefetches one line of each page the CTA touches after "
                                         "the PDL wait (residual, delta or partials, output) into L2 before it, so "
                                         "that the norm's address translations are warm (v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v24, gemv_norm_v24_supports},
      {"v25_gemv_norm_ring_handoff", "v22 whose CTAs wait for the previous launch's count of CTAs done "
                                     "(NormGemvArgs::handoff, from norm_mlp v19) in place of the PDL wait, which "
                                     "returns 1.4-2 us after that launch's last CTA (v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v25, gemv_norm_v25_supports, 1, true},
      {"v26_gemv_norm_ring_ramp", "v22 whose CTAs take shares of the rows that fall linearly with the block index "
                                  "(NormGemvArgs::row_ramp_permille), since the last indices become resident last "
                                  "and end last (v12_gemv_norm_ring.cu)",
       launch_gemv_norm_v26, gemv_norm_v26_supports},
  };
  return v;
}

const std::vector<KernelVersion<NormGateUpSwigluArgs>>& norm_gate_up_swiglu_versions() {
  static const std::vector<KernelVersion<NormGateUpSwigluArgs>> v{
      {"v4_gate_up_swiglu_norm", "v2_gate_up_swiglu with the post-attention RMSNorm in the prologue",
       launch_gate_up_swiglu_norm_v4, gate_up_swiglu_norm_v4_supports},
      {"v5_gate_up_swiglu_norm_tma", "v4 on v9_gemv_tma's persistent TMA ring (sm_90): gate and up rows per slot",
       launch_gate_up_swiglu_norm_v5, gate_up_swiglu_norm_v5_supports},
      {"v6_gate_up_swiglu_norm_early", "v4 with both weight buffers loaded before the PDL wait "
                                       "(v4_gate_up_swiglu_norm.cu)",
       launch_gate_up_swiglu_norm_v6, gate_up_swiglu_norm_v6_supports},
  };
  return v;
}

const std::vector<KernelVersion<AddArgs>>& add_versions() {
  static const std::vector<KernelVersion<AddArgs>> v{
      {"v0_add", "elementwise residual add, 16-byte vectors", launch_add_v0, add_v0_supports},
  };
  return v;
}

// The baseline (v0) of this op is the per-kernel layer loop it replaces: the engine's folded-norm chain of five
// launches per layer (cuda_backend.cu, --decode-layers off), measured beside it in the same run.
const std::vector<KernelVersion<NormMlpArgs>>& norm_mlp_versions() {
  static const std::vector<KernelVersion<NormMlpArgs>> v{
      {"v1_mlp_split_down", "norm, gate|up, SwiGLU and down in one launch: each CTA owns a block of features and "
                            "adds its down partial with fp32 reductions, so no CTA waits for another",
       launch_mlp_split_down_v1, mlp_split_down_v1_supports},
      {"v2_mlp_split_down_ring", "v1 fed through a shared-memory ring by cp.async (each thread reads back only its "
                                 "own copies: no barrier), 8 rows multiplied at once with one transposed warp sum "
                                 "(v1_mlp_split_down.cu)",
       launch_mlp_split_down_v2, mlp_split_down_v2_supports},
      {"v3_mlp_qkv_next", "v2, then a grid-wide wait for the delta and the next layer's QKV norm GEMV in the same "
                          "launch: its rows stream into the ring during the down tail and the wait "
                          "(v1_mlp_split_down.cu)",
       launch_mlp_qkv_next_v3, mlp_qkv_next_v3_supports},
      {"v4_mlp_split_down_l2", "v2 whose CTAs pull the next kernel's weights (the next layer's QKV) into L2 once "
                               "their own rows are in flight: the launch's tail has HBM time to spare "
                               "(v1_mlp_split_down.cu)",
       launch_mlp_split_down_v4, mlp_split_down_v4_supports},
      {"v5_mlp_split_down_full_ring", "v2 with every stage of its ring in flight (192 KB a CTA): a group's "
                                      "successor is issued once the group is multiplied (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v5, mlp_split_down_v5_supports},
      {"v6_mlp_split_down_tma", "v5 whose groups before the PDL wait are TMA bulk copies (sm_90), so the norm's "
                                "loads after the wait do not queue behind them (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v6, mlp_split_down_v6_supports},
      {"v7_mlp_with_o", "v5 with the attention sublayer's o projection first: its rows stream through the same ring "
                        "(prefetched while the attention runs), then a grid-wide wait for h' and its norm "
                        "(v1_mlp_split_down.cu)",
       launch_mlp_with_o_v7, mlp_with_o_v7_supports},
      {"v8_mlp_split_down_l2_lead", "v5 whose first CTAs (resident early, on the SMs the attention leaves free) "
                                    "pull the first rows of every other CTA into L2 before the PDL wait "
                                    "(v1_mlp_split_down.cu)",
       launch_mlp_split_down_v8, mlp_split_down_v8_supports},
      {"v9_mlp_split_down_l2_first", "v5 whose CTAs pull their own first rows into L2 before the PDL wait, not into "
                                     "the ring, and send the norm's loads ahead of the ring's copies "
                                     "(v1_mlp_split_down.cu)",
       launch_mlp_split_down_v9, mlp_split_down_v9_supports},
      {"v10_mlp_split_down_lean", "v5's MLP (norm, gate|up, SwiGLU, down, reductions) in a kernel with nothing "
                                  "else: no o, next-layer, TMA or L2-hint paths (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v10, mlp_split_down_v10_supports},
      {"v11_mlp_split_down_skewed", "v10 on weighted feature blocks: the CTAs from skew_from on (those that become "
                                    "resident last in the decode step) take skew_permille per mille fewer features "
                                    "(v1_mlp_split_down.cu)",
       launch_mlp_split_down_v11, mlp_split_down_v11_supports},
      {"v12_mlp_split_down_paired", "v10 whose CTAs c and ctas - 1 - c hand the tail of the later one's block to the "
                                    "other, by how much later its CTA waited in the previous launch "
                                    "(v1_mlp_split_down.cu)",
       launch_mlp_split_down_v12, mlp_split_down_v12_supports},
      {"v13_mlp_split_down_lean_loop", "v10's work in fewer instructions: hidden 4096 fixed at compile time, groups of "
                                       "gate, then up, then down rows that never straddle, a group's rows from one "
                                       "pointer, bounds only in a phase's last group; other shapes v10 (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v13, mlp_split_down_v13_supports},
      {"v14_mlp_split_down_batched", "v13's kernel for 1-2 tokens decoded together, their inputs normed by the "
                                     "caller (NormMlpArgs::rows, normed_input): each weight piece converted once "
                                     "and multiplied by every token's input; hidden 4096 (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v14, mlp_split_down_v14_supports},
      {"v15_mlp_split_down_paced", "v13 whose three ring groups before the PDL wait go out one at a time, the next "
                                   "once the previous lands, instead of 192 KB at once (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v15, mlp_split_down_v15_supports},
      {"v16_mlp_split_down_late", "v15 whose last CTAs to become resident (from NormMlpArgs::late_cta_from, 0: a "
                                  "quarter of the grid) issue one group before the PDL wait and the rest after the "
                                  "norm's loads (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v16, mlp_split_down_v16_supports},
      {"v17_mlp_split_down_touch_pages", "v15 whose warp 0 prefetches one line of each page the CTA touches after "
                                         "the PDL wait (residual, partials, delta) into L2 before it, so that the "
                                         "norm's address translations are warm (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v17, mlp_split_down_v17_supports},
      {"v18_mlp_split_down_beside", "v15 in groups of 4 rows, a ring of 2-5 of them and at most 56 registers a "
                                    "thread, so that a CTA fits on an SM beside a qkv_attention_o CTA and becomes "
                                    "resident while the attention runs (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v18, mlp_split_down_v18_supports},
      {"v19_mlp_split_down_handoff", "v15 whose CTAs each add 1 to a counter (NormMlpArgs::handoff_signal) once "
                                     "their delta is sent, so that the next QKV GEMV (norm_gemv v25) goes on at the "
                                     "count instead of at the grid's completion (v1_mlp_split_down.cu)",
       launch_mlp_split_down_v19, mlp_split_down_v19_supports, 1, true},
  };
  return v;
}

const std::vector<KernelVersion<TransposeArgs>>& transpose_versions() {
  static const std::vector<KernelVersion<TransposeArgs>> v{
      {"v0_transpose", "32 x 32 shared-memory tiles, coalesced reads and writes (load time only)",
       launch_transpose_v0, transpose_v0_supports},
  };
  return v;
}

const std::vector<KernelVersion<DecodeLayersArgs>>& decode_layers_versions() {
  static const std::vector<KernelVersion<DecodeLayersArgs>> v{
      {"v1_decode_layers_persistent", "all layers in one persistent kernel: a TMA producer per SM streams every "
                                      "weight through a 4-stage ring without waiting on activations; consumers "
                                      "wait on per-phase counters instead of kernel boundaries (sm_90)",
       launch_decode_layers_v1, decode_layers_v1_supports},
  };
  return v;
}

const std::vector<KernelVersion<SampleArgs>>& sample_versions() {
  static const std::vector<KernelVersion<SampleArgs>> v{
      {"v0_sample", "block per row: penalties, argmax or radix-select top-k/top-p + min-p, prefix-sum draw",
       launch_sample_v0, sample_v0_supports},
      {"v1_sample_topk", "top-k: warp-aggregated radix counts, candidates ranked in shared memory (v0 otherwise)",
       launch_sample_v1, sample_v0_supports},
      {"v2_sample_split", "v0 with the argmax split over blocks of 8192 ids (16-byte loads); the row's last block "
                          "merges them, samples as v0 and can advance the slot (needs the workspace)",
       launch_sample_v2, sample_v2_supports},
  };
  return v;
}

}  // namespace qwen3::kernels
