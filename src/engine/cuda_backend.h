// The CUDA engine: a Qwen3 forward pass on hand-written kernels (kernels/), bf16 weights and activations on the
// device, a pre-allocated KV cache with several sequence slots, sampling on the device, and the decode step
// captured in a CUDA graph per batch size. Implements Backend (slot 0) for the CLI and tests, plus a batched API
// for benchmarks and the server.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "io/checkpoint.h"
#include "model/backend.h"
#include "model/sampler.h"

namespace qwen3 {

int cuda_device_count();
std::string cuda_device_name();

// Which kernel versions and fusions the engine runs. Presets name the paths the benchmarks compare.
struct EngineOptions {
  std::string decode_gemm = "v4_gemv_pdl";         // decode GEMMs at batch 1
  // Decode GEMMs at batch 2..3: v12 (batch 2's QKV and o through a ring filled before the PDL wait; v2 at batch 3
  // and other shapes), 4.110 against v2's 4.230 ms a batch-2 step (session 18).
  std::string decode_gemm_batched = "v12_gemv_ring_tokens";
  // Decode GEMMs from batch 4 (tensor cores; measured on the H200: batch 8 step 5.24 vs 7.55 ms with v2, batch 4
  // 5.30 vs 5.36, batch 2 5.05 vs 4.52: slower there). Falls back to decode_gemm_batched where unsupported. v11 (v10
  // with twice the bytes in flight in its one-tile CTAs, the same bits): batch 4 4.776 / 4.774 ms against v10's
  // 5.195 (1.088x), batch 8 1.082x, the same logits hashes (session 15).
  std::string decode_gemm_batched_large = "v11_gemv_mma_deep";
  std::string prefill_gemm = "v3_gemm_mma";        // GEMMs with more rows (prefill)
  bool cublas_gemm = false;                        // every GEMM through cuBLAS instead (the baseline path)
  std::string decode_attention = "v3_flash_decode_wide";
  // Decode attention with QK-norm, RoPE and the cache store fused in (kernels/registry.h qkv_attention_versions);
  // "off", or a shape it does not support (sm_89, contexts past 16K): qk_norm_rope_cache + decode_attention.
  // v12: v2 with lean tile loads up to 2048-key buckets; past them the keys split over two CTAs per SM and the last
  // merges a warp per head (H200, context 8192: 4.837 ms per step, v11 4.951, v2 5.265 in an earlier run).
  std::string decode_qkv_attention = "v12_qkv_attention_warp_merge";
  // Bytes of each layer's o projection the fused attention is hinted to pull into L2 while it runs (versions with
  // an L2 prefetch; capped at the o weights' size). 0: no hint.
  int64_t attention_l2_prefetch_bytes = int64_t(32) << 20;
  // Batch-1 folded decode path and fused attention, by launch site (gemm_qkv_norm, qkv_attention, gemm_o_residual,
  // gemm_gate_up_swiglu_norm, gemm_down_residual): the fraction of its work a kernel does before it lets the next
  // one launch under PDL (kernels.h pdl_trigger). Sites not named trigger at their start.
  std::map<std::string, float> pdl_trigger;
  // The batch-1 decode GEMVs with the norms / residual adds folded in (fold_norms): QKV with the input RMSNorm,
  // O and down with the residual add, gate|up with the post-attention RMSNorm and SwiGLU. A version that does not
  // support the shape or device falls back to the first of its op (kernels/registry.cu). v12 (QKV on a cp.async
  // ring, one CTA per SM): 4.329 vs 4.371 ms per step with v10 at context 128, 4.446 vs 4.494 at 1024, 4.718 vs
  // 4.812 at 8192 (H200, one lease, ITERATIONS.md session 6). v18 (v12 with its ring's bookkeeping cut, at hidden
  // 4096; v12 elsewhere): 1.004x-1.009x of v12 at contexts 128-8192 (session 17). v22 (v18's ring in groups of 4
  // rows whose 5 groups before the PDL wait go out one at a time): 1.0077x / 1.0106x / 1.0047x of v18 at prompts
  // 128 / 1024 / 8192 (session 20).
  std::string norm_gemv = "v26_gemv_norm_ring_ramp";
  // v16_gemv_norm_ring_l2_first only: bytes of each CTA's first QKV rows it pulls into L2 before the PDL wait
  // (NormGemvArgs::l2_first_bytes).
  int64_t qkv_l2_first_bytes = int64_t(192) << 10;
  int32_t qkv_prewait_groups = 0;  // norm_gemv v20: ring groups before the PDL wait (0: the version's default)
  int32_t qkv_claim_static_groups = 0;  // norm_gemv v21: a CTA's own row groups before the queue (0: 4)
  int32_t qkv_prewait_window = 0;  // norm_gemv v22: ring groups in flight before the PDL wait (0: 1)
  // norm_gemv v23: the CTAs from this index on (0: a quarter of the grid; -1: none) issue qkv_late_prewait_groups
  // ring groups before the PDL wait (NormGemvArgs::late_cta_from, late_prewait_groups).
  int32_t qkv_late_cta_from = 0;
  int32_t qkv_late_prewait_groups = 1;
  // norm_gemv v26: how far the CTAs' shares of the QKV rows fall from the first CTA to the last, per mille of the
  // even share (NormGemvArgs::row_ramp_permille; negative: rising). 450: measured on an H100 (ITERATIONS.md session
  // 32), 1.0014x-1.0034x of v22 at prompts 128-8192 (300 and 700: within 0.1% of v22; 200: 0.9976x); the H200 is
  // not measured yet (its QKV GEMV's ends rise less with the block index: session 22).
  int32_t qkv_row_ramp_permille = 450;
  // norm_gemv v26: the first CTA of the ramp; the CTAs before it take the even share (NormGemvArgs::
  // row_ramp_first_cta). 0: the ramp over the whole grid.
  int32_t qkv_row_ramp_first_cta = 0;
  // The whole batch-1 layer stack of a decode step in one persistent kernel (kernels/registry.h
  // decode_layers_versions), or "off": the folded-norm chain of five launches per layer. Used where the version
  // supports the shape and device (sm_90); otherwise, and at batch > 1, the chain runs. Off by default until a
  // version beats the chain (ITERATIONS.md, session 4).
  std::string decode_layers = "off";
  // The batch-1 fused attention and the o projection with its residual add in one launch (kernels/registry.h
  // qkv_attention_o_versions), or "off": qkv_attention then the residual GEMV. Used in the folded-norm chain where
  // the version supports the shape and device (sm_90), and only while decode_qkv_attention is not "off". v2 (H200,
  // Qwen3-8B, one lease): 4.328 vs 4.324 ms per step at context 128, 4.420 vs 4.435 at 1024, 4.728 vs 4.870 at 8192
  // (ITERATIONS.md session 5); v1 was slower. v9 (v2's work with its tuning and diagnostic paths compiled out), on
  // three leases: 1.0062x-1.008x of v2 at 8192, 0.998x-0.999x at 128 and 1024 (sessions 11 and 12). v17 (v9 whose
  // CTAs without a split read their o rows while the splits attend; v9 itself past the bucket of 1024): 1.021x-1.022x
  // of v9 at 128 on four leases, 1.007x-1.010x at 512 on three (session 15). v23 (v17, and past the buckets where
  // v17 runs its own kernel v22's fewer, longer splits): 1.006x of v17 at prompt 1024, 1.0035x at 2048, v17 itself
  // below (session 16).
  // v25 (v22 wherever the positions may pass 384 keys, v17 below): 1.002x-1.012x of v23 at prompts 512-1024, the
  // same elsewhere (session 18). v34 (v25 whose chain synchronizes through one thread's release / acquire on its
  // counts instead of every thread's __threadfence; the same bits): 1.009x-1.010x of v25 at prompts 128-8192 on an
  // H100, the merging split 1.0 us shorter (session 34; not yet measured on an H200). v36 (v34 whose head merge
  // loads up to eight splits' values with their statistics: one L2 round trip; the same bits): 1.0006x / 1.0019x /
  // 1.0029x of v34 at prompts 128 / 512 / 1024 on one H100 lease (session 35), but 0.998x / 0.994x / 0.989x at
  // 2048 / 4096 / 8192 (session 36). v40 (v36 up to eight splits, 1536 keys; v34 past them) keeps v36's gain and
  // v34's long contexts. Neither measured on an H200. The cluster merges (v37-v39) were not faster; v41 (every
  // cluster attends every kv head, no L2 round trip between CTAs) was 0.954x of v40 at 128 (session 37, H100). v42
  // (v40 whose CTAs let the next launch start once every split is in, v32's trigger; the same bits): 1.0032x /
  // 1.0047x / 1.0047x / 1.0005x of v40 at prompts 128 / 512 / 1024 / 8192 on one H100, 1.0011x / 1.0027x at 128 /
  // 1024 with every kernel loaded at start (session 37); v32's trigger was 1.0034x of v25 on an H200 (session 26).
  // v44 (v42 whose split CTAs read their residual rows by their last warp inside the attention's prepare step, where
  // a split takes at most two K/V tiles; the same bits): 1.0029x / 1.0031x of v42 at prompt 128 on two H100s,
  // 0.9995x / 0.9998x at 512 / 1024, where it runs v42's kernels (session 39). v45 (every K/V tile of a split in
  // flight at once) and v46 (a split's first tiles issued before the PDL wait) were no faster (session 39).
  std::string decode_attention_o = "v44_qkv_attention_o_residual_in_prepare_short";
  // Tuning (0: the version's defaults): keys per split and shared memory per CTA of decode_attention_o. 192 KB (the
  // versions' own default is 160) stages more o rows: 1.003x at prompt 128 (session 18; session 17 1.002x, 1.006x at
  // 8192).
  int32_t attention_o_keys_per_split = 0;
  int32_t attention_o_smem_bytes = 192 * 1024;
  int32_t attention_o_l2_prefetch_rows = -1;  // -1: the version's default
  int32_t attention_o_ring_stages = 0;        // 0: the version's choice
  int32_t attention_o_chain_steps = -1;       // QkvAttentionOArgs::chain_steps (v3, v4; -1: all)
  int32_t attention_o_claims_ahead = 0;      // QkvAttentionOArgs::claims_ahead (v10; 0: 2)
  int32_t attention_o_claim_static_tiles = 0;  // QkvAttentionOArgs::claim_static_tiles (v10; 0: its ring's)
  int32_t attention_o_late_rows = 0;           // QkvAttentionOArgs::late_rows (v11; 0-3)
  int32_t attention_o_warm_code = 0;           // QkvAttentionOArgs::warm_code (v14, v15, v17, v20-v31; 0-4095)
  int32_t attention_o_stage_window = 0;        // QkvAttentionOArgs::stage_window (v26; 0: 4)
  int32_t attention_o_split_staging = 0;       // QkvAttentionOArgs::split_staging (v26; 0-2)
  int32_t attention_o_stage_burst = 0;         // QkvAttentionOArgs::stage_burst (v26)
  int32_t attention_o_split_prewait_rows = -1;  // QkvAttentionOArgs::split_prewait_rows (v26; -1: all)
  // QkvAttentionOArgs::mlp_lead_window (v27; 0: 4) and mlp_lead_skip_rows (v27: the gate rows of each MLP CTA its
  // ring reads before the PDL wait: 3 groups of 8 in norm_mlp v13 / v15; mlp_lead_bytes is mlp_l2_lead_bytes).
  int32_t attention_o_mlp_lead_window = 0;
  int32_t attention_o_mlp_lead_skip_rows = 24;
  int32_t attention_o_mlp_lead_policy = 0;  // QkvAttentionOArgs::mlp_lead_policy (v27)
  int32_t attention_o_handoff_rows = -1;    // QkvAttentionOArgs::handoff_rows (v31; -1: all)
  // Profiling only: decode_attention_o stamps %globaltimer at fixed points of every CTA of every layer
  // (attention_o_trace() returns the last step's stamps).
  bool attention_o_trace = false;
  // The batch-1 MLP sublayer in one launch (kernels/registry.h norm_mlp_versions), or "off": the gate|up GEMV then
  // the down GEMV. Its output reaches the residual through the next layer's QKV GEMV and qkv_attention_o, so it
  // runs only where decode_attention_o does (and not in the last layer). Keeps a transposed copy of every layer's
  // down_proj on the device (hidden x intermediate bf16 a layer: 3.5 GB for Qwen3-8B). H200, Qwen3-8B: v2 4.209
  // vs 4.332 ms per step (off) at context 128, 4.292 vs 4.413 at 1024, 4.635 vs 4.730 at 8192; v3 (the next
  // layer's QKV in the same launch) 4.565 and v1 7.30 were slower (ITERATIONS.md session 6). v5 (every stage of
  // the ring in flight) beat v2 on four leases by 0.1-1.6% at 128 / 1024 / 8192 (session 8); v7 (the o projection
  // in this launch, the attention alone before it) was 8-12% slower; v8 (v5 + the first CTAs pulling the others'
  // first rows into L2 during the attention) 1-2% slower (session 9). v10 (v5's MLP alone in a lean kernel, without
  // the other versions' paths): 4.123 vs 4.329 ms at 128, 4.218 vs 4.440 at 1024, 4.566 vs 4.826 at 8192 (session
  // 11); v9 (the first rows into L2, the norm's loads first) was no better. Session 17: v11 (the CTAs that find an
  // SM last take fewer features, a fixed skew) 1.001x-1.005x at 128-320; v12 (the skew from the previous layer's
  // stamps, CTA pairs) 0.95x, 0.95x with nothing handed over. v13 (v10's work in 44% fewer instructions, at hidden
  // 4096; v10 elsewhere): 1.013x at context 128, 1.024x at 1024 and 8192 (session 17). v15 (v13 whose three ring
  // groups before the PDL wait go out one at a time): 1.0070x / 1.0092x / 1.0037x of v13 at 128 / 1024 / 8192
  // (session 20).
  std::string decode_mlp = "v15_mlp_split_down_paced";
  // The MLP of batch-2 decode in one launch (norm_mlp with NormMlpArgs::rows and normed_input; "off": gate|up,
  // SwiGLU, down and the residual add as four launches), then add_delta_rmsnorm. Runs where decode_mlp does (it
  // reads the same transposed down_proj) on the layers it runs on.
  std::string decode_mlp_batched = "v14_mlp_split_down_batched";
  // Where decode_mlp_batched runs: the next layer's QKV GEMV norms h with the MLP's delta folded in (norm_gemv op,
  // its delta form at 2 tokens) and the o projection's residual add takes the delta in too (add_delta_rmsnorm with
  // an addend), so no launch of its own adds the delta after the MLP. "off" (the default): add_delta_rmsnorm after
  // the MLP. With v19 a batch-2 step took 4.393 ms against 4.284 without (0.975x) although it made 36 launches fewer
  // (187 against 223): its norm loads 5 times the bytes of the normed input after the PDL wait (session 18).
  std::string decode_norm_gemv_batched = "off";
  int32_t mlp_ctas = 0;           // tuning: CTAs of decode_mlp (0: one per SM)
  int32_t mlp_prewait_rows = -1;  // tuning: weight rows a CTA loads before the PDL wait (-1: the version's default)
  int32_t mlp_prewait_window = 0;  // norm_mlp v15: ring groups in flight before the PDL wait (0: 1)
  // norm_mlp v16: the CTAs from this index on (0: a quarter of the grid; -1: none) issue mlp_late_prewait_groups
  // ring groups before the PDL wait (NormMlpArgs::late_cta_from, late_prewait_groups).
  int32_t mlp_late_cta_from = 0;
  int32_t mlp_late_prewait_groups = 1;
  int32_t mlp_beside_stages = 0;  // norm_mlp v18: ring stages of 4 rows (2-5; 0: 4)
  int32_t mlp_beside_l2_groups = 0;  // norm_mlp v18: ring groups past the ring pulled into L2 before the wait
  // Where decode_mlp and norm_gemv are both hand-off versions (KernelVersion::handoff: norm_mlp v19, norm_gemv v25),
  // the next layer's QKV GEMV goes on at the MLP's count of CTAs done instead of at its PDL wait; this is its pause
  // between polls of the count in ns (NormGemvArgs::handoff_poll_ns, 0: none).
  int32_t handoff_poll_ns = 0;
  // v11_mlp_split_down_skewed only: CTAs from mlp_skew_from on take mlp_skew_permille per mille fewer features
  // (NormMlpArgs::skew_from, skew_permille).
  int32_t mlp_skew_from = 0;
  int32_t mlp_skew_permille = 0;
  // v12_mlp_split_down_paired only: per mille of a CTA's features handed to its partner per us it waited later in
  // the previous layer, and the most features handed (NormMlpArgs::lateness_permille_per_us; -1: the kernel's).
  int32_t mlp_lateness_permille_per_us = -1;
  int32_t mlp_lateness_max_features = -1;
  // v7_mlp_with_o only: CTAs that take the o rows (NormMlpArgs::o_ctas; 0: all), and whether the attention before
  // it still pulls the o rows into L2 (attention_l2_prefetch_bytes).
  int32_t mlp_o_ctas = 0;
  int32_t mlp_o_ahead = -1;  // NormMlpArgs::o_ahead_groups
  bool mlp_o_l2_prefetch = false;
  // Copies of the MLP's fp32 delta its CTAs spread their reductions over (NormMlpArgs::delta_copies); the readers sum
  // them. 2 since session 17: with the MLP's v13 and the QKV GEMV's v18, 1.001x-1.004x over 4 at contexts 128-8192
  // (8: 0.985x).
  int32_t mlp_delta_copies = 2;
  // Bytes of the next layer's QKV weights the MLP pulls into L2 at its tail (versions with NormMlpArgs::l2_prefetch;
  // capped at the weights' size).
  int64_t mlp_l2_prefetch_bytes = int64_t(64) << 20;
  // v8_mlp_split_down_l2_lead only: CTAs that pull other CTAs' first rows into L2 before the PDL wait
  // (NormMlpArgs::l2_lead_ctas; -1: the SMs qkv_attention_o leaves free), and how many bytes of each; v9: the bytes
  // of its own first rows each CTA pulls.
  int32_t mlp_l2_lead_ctas = -1;
  int64_t mlp_l2_lead_bytes = int64_t(192) << 10;
  // Profiling only: decode_mlp, and the QKV GEMV where it is v12, stamp %globaltimer at fixed points of every CTA
  // of every layer (mlp_trace(), qkv_trace()).
  bool mlp_trace = false;
  std::string residual_gemv = "v7_gemv_residual";
  std::string norm_gate_up = "v4_gate_up_swiglu_norm";
  std::string gate_up_swiglu = "v1_gate_up_swiglu";  // used when fused_swiglu (batch 1)
  // At 4-8 rows with fused_swiglu, where decode_gemm_batched_large would run gate|up then silu_mul: gate|up with
  // SwiGLU in its epilogue on tensor cores (the same bits as v10_gemv_mma + v0_silu_mul), or "off" for those two.
  // H200, Qwen3-8B, context 128: batch 4 5.193 / 5.196 ms against 5.318 / 5.314, batch 8 1.022x (session 15).
  std::string gate_up_swiglu_batched_large = "v4_gate_up_swiglu_mma";
  std::string sample = "v1_sample_topk";
  // The sampler where no slot samples with top-k (greedy and untruncated sampling). v2 splits the argmax over
  // blocks (session 19); v0 walks a row in one block.
  std::string sample_plain = "v2_sample_split";
  bool fold_advance = true;  // the sampler advances the slots where it can (v2), instead of advance_kernel after it
  // Batch-1 decode: the last layer's MLP as the one-launch MLP (decode_mlp) whose delta a small add + final RMSNorm
  // launch folds in, as the other layers' MLPs (session 19); off: the normed gate|up and residual down GEMVs, then
  // the final RMSNorm.
  bool last_mlp_in_one_launch = true;
  std::string prefill_attention = "v0_attention";
  std::string rmsnorm = "v1_rmsnorm_vec";
  std::string add_rmsnorm = "v1_add_rmsnorm_vec";
  bool fused = true;       // fused QKV and gate|up GEMMs, one QK-norm+RoPE+cache kernel, residual add in the norm
  // Batch-1 decode fusions (at batch 2..8 the plain v2 GEMV + silu_mul + add_rmsnorm measured faster):
  bool fused_swiglu = true;  // SwiGLU in the gate|up GEMV's epilogue (batch 1; 4-8: gate_up_swiglu_batched_large)
  bool fold_norms = true;    // residual adds in the O/down GEMVs, RMSNorms in the QKV/gate|up GEMVs
  // L2 persistence (cudaAccessPropertyPersisting) for what every decode step reads again: "off", "norms" (every
  // RMSNorm weight, laid out as one block: 0.6 MB for Qwen3-8B) or "kv" (the KV cache, K and V as one range, its
  // lines persisting at the hit ratio the device's set-aside allows). The window is set on the stream and on every
  // kernel node of the captured graphs; the set-aside is l2_persist_bytes (0: the device's maximum), capped at the
  // window.
  std::string l2_persist = "off";
  int64_t l2_persist_bytes = 0;
  bool cuda_graph = true;  // capture the decode step once per batch size (and context bucket) and replay it
  bool pdl = true;         // programmatic dependent launch (sm_90): kernels start while their predecessor drains
  // Tuning: the shared-memory carveout every kernel asks for, percent of the SM's L1 / shared memory (-1: none, the
  // driver's choice per kernel; kernels::set_smem_carveout, process-wide). norm_mlp v18 beside qkv_attention_o
  // needs both on one split: 100.
  int32_t smem_carveout = -1;
  bool speculative_decode = true;  // forward_and_sample launches the next step before returning a token
  int64_t context = 0;     // KV-cache positions per slot; 0 = min(max_position_embeddings, 16384)
  int64_t max_batch = 1;   // sequence slots (decode batch size)
  int64_t prefill_chunk = 2048;
  // Profiling only: launch sites (as `qwen3 bench --profile` names them) left out of the batch-1 decode step, so
  // the step time with and without them can be compared under the graph and PDL. The tokens are then garbage.
  std::set<std::string> skip_launches;

  // "fast" (the defaults), "v0" (every op's v0, unfused, no graph), "cublas" (fast with cuBLAS GEMMs),
  // "fast-v1" (the first fast path: v2 GEMV, v1 attention, graph, no PDL, SwiGLU as its own kernel).
  static EngineOptions preset(const std::string& name);
};

struct KernelTiming {
  std::string what;  // launch site, e.g. "gemm_qkv"
  double ms;         // from the previous launch's end to this one's (eager launches, events in between)
  double bytes;      // the least this launch must move
};

class CudaEngine final : public Backend {
 public:
  // Weights from a checkpoint (validated by bind_qwen3_weights). The checkpoint may be closed afterwards.
  CudaEngine(const Checkpoint& checkpoint, const EngineOptions& options);
  // Random weights of the given shape, made on the device in seconds (benchmarks at real sizes, no download).
  CudaEngine(const ModelConfig& config, uint64_t seed, const EngineOptions& options);
  ~CudaEngine() override;

  // Backend, on slot 0.
  std::string name() const override { return "cuda"; }
  const ModelConfig& config() const override { return config_; }
  int64_t context_length() const override { return context_; }
  int64_t length() const override { return lengths_[0]; }
  void truncate(int64_t n) override;
  void forward(std::span<const int32_t> tokens, bool want_argmax_per_position, ForwardOutput& out) override;
  int32_t forward_and_sample(std::span<const int32_t> tokens, Sampler& sampler) override;

  // Batched API. Slots are independent sequences.
  int64_t max_batch() const { return options_.max_batch; }
  int64_t slot_length(int64_t slot) const { return lengths_[size_t(slot)]; }
  void set_sampling(int64_t slot, const SamplingParams& params);
  void reset_slot(int64_t slot);
  // Runs tokens on `slot` after its cached positions, samples the next token and stages it as the slot's next
  // input. Returns the sampled token.
  int32_t prefill(int64_t slot, std::span<const int32_t> tokens);
  // `steps` decode steps for slots [0, batch) back to back with no host round trip (each step feeds the tokens it
  // sampled to the next). Returns the sampled tokens, (steps, batch) row-major. PRECOND: every slot was prefilled.
  // elapsed_ms, when given, receives the GPU time of the steps (CUDA events; graph capture excluded).
  std::vector<int32_t> decode(int64_t batch, int64_t steps, double* elapsed_ms = nullptr);
  // Bytes of weights a decode step reads (all layers, final norm, lm_head).
  int64_t decode_weight_bytes() const;
  // Hash of the last logits row computed (FNV-1a over the bf16 bits), for spotting numeric drift between runs.
  uint64_t last_logits_hash(int64_t row = 0) const;
  // The last logits row computed, bf16 bits (V): row b of a decode step is slot b's.
  std::vector<uint16_t> last_logits_bits(int64_t row = 0) const;
  // One decode step for slots [0, batch) run eagerly with an event after every launch: time per launch site.
  // Advances the slots like a normal step.
  std::vector<KernelTiming> profile_decode_step(int64_t batch);
  // With EngineOptions::attention_o_trace: the last decode step's stamps, (layers, CTAs, kQkvAttentionOTraceEvents)
  // with CTAs = kernels::qkv_attention_o_partials(); empty otherwise.
  std::vector<uint64_t> attention_o_trace() const;
  // With EngineOptions::mlp_trace: the last decode step's stamps, (layers - 1, CTAs, kNormMlpTraceEvents) with
  // CTAs = kernels::norm_mlp_ctas(); empty otherwise.
  std::vector<uint64_t> mlp_trace() const;
  // The same for the QKV GEMV (v12): (layers, SMs, kNormGemvTraceEvents), zeros where another version ran.
  std::vector<uint64_t> qkv_trace() const;
  // What EngineOptions::l2_persist set up (zeros when off): the window, the set-aside and the window's hit ratio.
  struct L2Persistence {
    int64_t window_bytes = 0, set_aside_bytes = 0;
    float hit_ratio = 0.0f;
  };
  L2Persistence l2_persistence() const;
  // Number of kernel launches one decode step makes (graph nodes when captured).
  int64_t launches_per_decode_step() const { return launches_per_step_; }
  // Counter hand-offs between launches one decode step makes in place of PDL waits (norm_mlp v19 -> norm_gemv v25
  // where both are chosen: EngineOptions::handoff_poll_ns); 0 elsewhere.
  int64_t handoffs_per_decode_step() const { return handoffs_per_step_; }

  struct Impl;  // device state (cuda_backend.cu)

 private:
  void prepare(const EngineOptions& options);  // validates, creates the stream and kernel choices
  void init();                                 // KV cache, activations, warm-up (after the weights are on device)
  void run_decode_step(int64_t batch, int64_t max_position);
  // Launches `steps` decode steps for slots [0, batch) (graph replays) and the copies of their tokens to
  // host_tokens (pinned, steps * batch); returns without waiting.
  void enqueue_decode(int64_t batch, int64_t steps, int32_t* host_tokens);
  // Waits for a speculative step of slot 0 (forward_and_sample) and puts slot 0's device inputs back.
  void drain_speculation();
  // Throws InputError unless tokens is non-empty, fits the context after pos0 cached positions, and every id is
  // in the vocabulary.
  void check_new_tokens(const char* what, int64_t pos0, std::span<const int32_t> tokens) const;

  ModelConfig config_;
  EngineOptions options_;
  int64_t context_ = 0;
  std::vector<int64_t> lengths_;
  int64_t launches_per_step_ = 0;
  int64_t handoffs_per_step_ = 0;
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<Backend> make_cuda_backend(const Checkpoint& checkpoint, int64_t context);

// The Qwen3 dense sizes by name ("qwen3-0.6b" ... "qwen3-32b"), as in their config.json files.
ModelConfig synthetic_qwen3_config(const std::string& name);

}  // namespace qwen3
