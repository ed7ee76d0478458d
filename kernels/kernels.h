// Host API of every CUDA kernel, the contract between kernels/, the engine, the tests and the bench runner.
//
// Conventions (all ops):
//   * bf16 activations and weights, fp32 accumulation inside kernels, bf16 results: the rounding points of
//     transformers' Qwen3 forward in bf16 (models.md section 1.3/1.4), so the engine reproduces its tokens.
//   * Row-major tensors; a linear weight is (out_features, in_features) and y = x · Wᵀ.
//   * Every launch takes a stream and never synchronizes, so a whole decode step can be captured in a CUDA graph.
//     Values that change from step to step (token ids, positions) live in device memory for the same reason.
//   * Each op has one Args struct shared by all of its versions; versions are listed in registry.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace qwen3::kernels {

using bf16 = __nv_bfloat16;

// ---- 00 embedding ------------------------------------------------------------------------------------------------
struct EmbeddingArgs {
  const int32_t* ids;  // (tokens) device; PRECOND: 0 <= id < vocab (validated on the host)
  const bf16* table;   // (vocab, hidden)
  bf16* out;           // (tokens, hidden)
  int64_t tokens, hidden;
  float* norm_partials = nullptr;  // (tokens, kMaxNormPartials) or nullptr: v1 leaves Σ out² in [t][0]
};

// ---- 01 rmsnorm --------------------------------------------------------------------------------------------------
// y = weight * bf16(x * rsqrt(mean(x^2) + eps)): the normalized value is rounded to bf16 before the weight multiply,
// as in transformers. Used for the layer norms (n = hidden) and for QK-norm (rows = tokens * heads, n = head_dim).
struct RmsnormArgs {
  const bf16* x;       // (rows, n)
  const bf16* weight;  // (n)
  bf16* y;             // (rows, n); may alias x
  int64_t rows, n;
  float eps;
};

// Fused residual add + rmsnorm: residual = bf16(residual + delta); y = rmsnorm(residual).
struct AddRmsnormArgs {
  bf16* residual;      // (rows, n) in/out: the hidden state h
  const bf16* delta;   // (rows, n): the sublayer output added to h
  const bf16* weight;  // (n)
  bf16* y;             // (rows, n): normalized, input of the next sublayer
  int64_t rows, n;
  float eps;
};

// The one-launch MLP's output into the residual, then the next norm: residual = bf16(residual + bf16(Σ_j delta
// copy j)) (the copies summed in order j = 0, 1, ..., as the batch-1 readers sum them), the delta zeroed, y =
// rmsnorm(residual). The batched decode layer (2 tokens) runs it after norm_mlp v14, whose fp32 reductions leave
// the MLP's output in the delta (NormMlpArgs::residual_delta); at batch 1 the QKV GEMV and qkv_attention_o fold it.
struct AddDeltaRmsnormArgs {
  bf16* residual;      // (rows, n) in/out: the hidden state h
  float* delta;        // (copies, rows, n) fp32: read, then zeroed
  int32_t copies;
  const bf16* weight;  // (n)
  bf16* y;             // (rows, n): normalized, input of the next sublayer
  int64_t rows, n;
  float eps;
  // nullptr, or (rows, n): a second sublayer output added after the delta, residual = bf16(bf16(residual +
  // bf16(Σ delta copies)) + addend), as the two residual adds round in turn (the batched layer with the delta folded
  // into the next layer: the previous MLP's output, then this layer's o projection).
  const bf16* addend = nullptr;
};

// ---- 02 gemm -----------------------------------------------------------------------------------------------------
// y (m, n) = x (m, k) · w (n, k)ᵀ. m = tokens: 1..8 is the decode regime (GEMV, memory bound), large m prefill.
struct GemmArgs {
  const bf16* x;  // (m, k)
  const bf16* w;  // (n, k)
  bf16* y;        // (m, n), rows ldy elements apart
  int64_t m, n, k;
  int64_t ldy = 0;  // row stride of y in elements; 0 means n (lets two GEMMs fill the halves of one buffer)
  int64_t y_stride() const { return ldy > 0 ? ldy : n; }
};

// ---- 03 rope (and QK-norm, KV-cache write) -------------------------------------------------------------------------
// NeoX rotary embedding in place on q and k: dim j pairs with j + head_dim/2. cos/sin are computed in fp32 from
// inv_freq and rounded to bf16, then q' = bf16(bf16(q*cos) + bf16(rotate_half(q)*sin)), as transformers does.
struct RopeArgs {
  bf16* q;                   // (tokens, q_heads, head_dim)
  bf16* k;                   // (tokens, kv_heads, head_dim)
  const int32_t* positions;  // (tokens) device
  const float* inv_freq;     // (head_dim / 2) device
  float attention_factor;    // multiplies cos and sin (YaRN), else 1
  int64_t tokens, q_heads, kv_heads, head_dim;
};

// Everything between the QKV projection and attention in one pass (fused path):
// q = rope(q_norm(q)), k = rope(k_norm(k)) written to the cache at its position, v copied to the cache.
struct QkNormRopeCacheArgs {
  const bf16* qkv;           // (tokens, (q_heads + 2 * kv_heads) * head_dim): q | k | v per token
  const bf16* q_norm;        // (head_dim)
  const bf16* k_norm;        // (head_dim)
  bf16* q_out;               // (tokens, q_heads, head_dim)
  bf16* k_cache;             // (slots, max_ctx, kv_heads, head_dim): this layer
  bf16* v_cache;             // (slots, max_ctx, kv_heads, head_dim)
  const int32_t* positions;  // (tokens)
  const int32_t* slots;      // (tokens) cache slot per token, or nullptr for slot 0
  const float* inv_freq;     // (head_dim / 2)
  float attention_factor;
  float eps;
  int64_t tokens, q_heads, kv_heads, head_dim, max_ctx;
};

// Writes k and v rows into the cache at (slot, position) (the unfused path's separate store).
struct KvWriteArgs {
  const bf16* k;             // (tokens, kv_heads, head_dim)
  const bf16* v;             // (tokens, kv_heads, head_dim)
  bf16* k_cache;             // (slots, max_ctx, kv_heads, head_dim)
  bf16* v_cache;
  const int32_t* positions;  // (tokens)
  const int32_t* slots;      // (tokens) or nullptr for slot 0
  int64_t tokens, kv_heads, head_dim, max_ctx;
  int64_t k_row_stride, v_row_stride;  // elements between consecutive tokens of k / v (kv_heads*head_dim if packed)
};

// ---- 04 attention ------------------------------------------------------------------------------------------------
// Causal GQA attention against the cache: query token t (at positions[t], in cache slot slots[t]) attends to keys
// [0, positions[t]] of its slot; q head h reads kv head h / (q_heads / kv_heads). Softmax in fp32, output bf16.
// Prefill: tokens = T of one sequence (its keys already in the cache). Decode: tokens = batch, one per slot.
struct AttentionArgs {
  const bf16* q;             // (tokens, q_heads, head_dim)
  const bf16* k_cache;       // (slots, max_ctx, kv_heads, head_dim)
  const bf16* v_cache;       // (slots, max_ctx, kv_heads, head_dim)
  bf16* out;                 // (tokens, q_heads, head_dim)
  const int32_t* positions;  // (tokens)
  const int32_t* slots;      // (tokens) or nullptr for slot 0
  int64_t tokens, q_heads, kv_heads, head_dim, max_ctx;
  int64_t max_position;      // host-side upper bound of positions[] (sizes split-KV grids; may exceed the truth)
  float scale;               // head_dim^-0.5
  float* workspace;          // split-KV partials, attention_workspace_floats() floats, or nullptr if unused
};
int64_t attention_workspace_floats(int64_t tokens, int64_t q_heads, int64_t head_dim, int64_t max_ctx);
// The workspace begins with merge counters, this many bytes: zero them once before the first launch of a version
// that merges in-kernel through them (v6_qkv_attention_split); such versions leave them zero again.
int64_t attention_workspace_counter_bytes(int64_t q_heads);

// Decode attention with its preparation fused in: from the fused QKV projection's output, QK-norm and RoPE q and
// k, store k and v in the cache at (slot, position), and attend q to keys [0, position] of the slot, exactly as
// qk_norm_rope_cache followed by attention. Decode only: tokens = batch, one token per slot, each attending to its
// own slot. prep.q_out is scratch for versions that pass q through memory (the composite v0); fused versions
// leave it unwritten. Cache rows past each token's position are never read.
struct QkvAttentionArgs {
  QkNormRopeCacheArgs prep;  // qkv, q_norm, k_norm, q_out, k_cache, v_cache, positions, slots, rope, eps, shapes
  bf16* out;                 // (tokens, q_heads, head_dim)
  int64_t max_position;      // host-side upper bound of positions[] (sizes the grid; may exceed the truth)
  float scale;               // head_dim^-0.5
  float* workspace;          // attention_workspace_floats() floats for versions with split-KV partials, or nullptr
  // A hint: bytes the step reads next (the o projection's weights) that versions with an L2 prefetch pull into L2
  // while they wait on their own latency, when HBM idles. nullptr / 0: none. PRECOND: 16-byte aligned, bytes % 16 == 0.
  const void* l2_prefetch = nullptr;
  int64_t l2_prefetch_bytes = 0;
  // When each CTA lets the next kernel launch (PDL): 0 at its start; f in (0, 1] once it has consumed a fraction
  // f of its K/V tiles (v2-v11; v0 and v1 trigger at their start).
  float pdl_trigger = 0.0f;
};

// Decode attention with the o projection and its residual add fused in (batch 1): what qkv_attention followed by
// the residual GEMV over w_o (v7_gemv_residual) computes, in one launch. Each CTA streams its rows of w_o into
// shared memory from its start; kv_heads x splits of them attend one split of one kv head's keys while those bytes
// arrive; then every CTA merges the splits into the attention output, multiplies its rows and updates the
// residual. attention.out is written as qkv_attention writes it.
struct QkvAttentionOArgs {
  QkvAttentionArgs attention;  // prep.tokens == 1; attention.workspace, l2_prefetch and pdl_trigger are not used
  const bf16* w_o;             // (hidden, q_heads * head_dim)
  bf16* residual;              // (1, hidden) in/out: residual = bf16(residual + bf16(attn · w_oᵀ))
  float* norm_partials;        // (1, kMaxNormPartials): [b] = Σ over CTA b's rows of residual²
  int64_t hidden;
  float* workspace;            // qkv_attention_o_workspace_floats() floats; the first qkv_attention_o_counter_bytes()
                               // bytes zero before the first launch (every launch leaves them zero); one launch at a
                               // time per workspace
  int32_t keys_per_split = 0;  // tuning: the fewest keys a CTA's split gets before more CTAs share them (0: default)
  int32_t smem_bytes = 0;      // tuning: the dynamic shared memory a CTA takes, most of it staged w_o rows (0: default)
  int32_t l2_prefetch_rows = -1;  // tuning: rows past the staged ones a CTA prefetches into L2 at its start
                                  // (v3: after the PDL wait; -1: the version's default, v1/v2 none, v3 all)
  int32_t ring_stages = 0;        // tuning: K/V tiles in the attention's ring, 2, 4 or 8 (0: the version's choice)
  // Tuning (v3-v5): which steps of the shortened chain run, a bit mask: 1 the split's first K/V tile prefetched
  // into L2 before the PDL wait, 2 the residual rows read after the CTA's split instead of before it, 4 the merge's
  // values loaded together with its statistics (-1: all; v1 and v2 run none). Diagnostic, v1-v3, with a
  // non-negative mask: 8 runs the o loop twice (same result; the trace's o_staged stamps the first pass's end);
  // any version: 16 runs each split's attention twice (o_staged stamps the first pass's end).
  int32_t chain_steps = -1;
  // Profiling only (nullptr otherwise): (CTAs, kQkvAttentionOTraceEvents) %globaltimer stamps of when each CTA
  // reached each point (v1: QkvAttentionOTraceEvent in its source).
  uint64_t* trace = nullptr;
  // nullptr, or (hidden) fp32: the previous layer's down projection still owed to the residual (NormMlpArgs). Then
  // each CTA first folds it into its rows, residual = bf16(residual + bf16(delta)), before the o projection's add,
  // and writes zeros over the delta rows it read, so the next NormMlp launch finds the buffer zero.
  float* residual_delta = nullptr;
  int32_t delta_copies = 1;  // the delta is the sum of this many (hidden) copies (NormMlpArgs); all are zeroed
  // v7 (v7_qkv_attention_o_mlp_lead), v27 (v27_qkv_attention_o_mlp_warm) and v28 only: the next launch's MLP
  // (NormMlpArgs of the same layer, mlp_ctas CTAs splitting mlp_inter features as it does). The CTAs without a split
  // pull mlp_lead_bytes of each MLP CTA's gate rows into L2 while the splits attend (v7: the first; v27: those past
  // mlp_lead_skip_rows, whole rows) or once the heads are merged (v28: those past mlp_lead_skip_rows). nullptr / 0:
  // none. PRECOND: % 16 == 0.
  const bf16* mlp_w_gate_up = nullptr;  // (2 * mlp_inter, hidden)
  int64_t mlp_inter = 0;
  int32_t mlp_ctas = 0;
  int64_t mlp_lead_bytes = 0;
  // v8 (v8_qkv_attention_o_wavefront) only: the QKV projection in the same launch, with its RMSNorm folded in as
  // NormGemvArgs folds it: over bf16(residual + bf16(residual_delta)) where residual_delta is set, else over the
  // residual with qkv_norm_partials / qkv_partial_count; eps is attention.prep.eps (Qwen3 has one rms_norm_eps).
  // It writes qkv_out, which attention.prep.qkv must point at. w_qkv nullptr: qkv is given, as in v1-v7, which
  // refuse args with w_qkv set (supports()).
  const bf16* w_qkv = nullptr;            // ((q_heads + 2 * kv_heads) * head_dim, hidden)
  const bf16* qkv_norm_weight = nullptr;  // (hidden): input_layernorm
  const float* qkv_norm_partials = nullptr;  // (1, kMaxNormPartials) left by the producer of residual
  int64_t qkv_partial_count = 0;
  bf16* qkv_out = nullptr;  // (1, (q_heads + 2 * kv_heads) * head_dim)
  // Tuning, v10 (v10_qkv_attention_o_claimed) only (last, so that the other versions' parameter offsets stay).
  int32_t claims_ahead = 0;        // claims of K/V tiles thread 0 keeps in flight, 2, 4 or 8 (0: 2)
  int32_t claim_static_tiles = 0;  // K/V tiles a split takes before it claims (0: the ring's depth - 1)
  // Tuning, v11 (v11_qkv_attention_o_late_rows) only: bit 1 the ring takes the CTA's last o rows (0: the first
  // unstaged ones), bit 2 they are copied once every split is in (0: once the CTA's ring is free).
  int32_t late_rows = 0;
  // Tuning, v14 and v15 (v14_qkv_attention_o_warm_code, v15_qkv_attention_o_warm_first): bit 1 skips v14's o loop
  // warm-up pass, bit 2 the attention's (0: every warm-up of the version runs; 3 in v14, 2 in v15: none, the
  // version's code doing v9's work). Diagnostics: bit 4 warms the attention up on the next kv head's K/V rows, bit 8
  // on one K/V row read as every key's. v17 (v17_qkv_attention_o_warm_rows): bit 1 no first o pass, bit 2 one in the
  // CTAs with a split too, bit 8 those pull their unstaged o rows into L2 after their split; diagnostic bit 4: the
  // first pass reads shared memory in place of the unstaged rows; bit 16 / 32: the CTAs without a split pull the
  // split CTAs' unstaged o rows into L2 after / before their first pass. v20-v25 take it as v17 does, where they
  // run v17's first pass (v23 and v25 where they run v17 or v22).
  int32_t warm_code = 0;
  // Tuning, v26 (v26_qkv_attention_o_paced) only: the staged o rows a CTA without a split keeps in flight (0: 4),
  // and how a CTA with a split stages its rows: 0 all at once before the PDL wait (v17's way), 1 all at once once
  // its split is counted, 2 stage_window at a time from then.
  int32_t stage_window = 0;
  int32_t split_staging = 0;
  int32_t stage_burst = 0;          // v26: rows a CTA without a split issues at once before pacing (0: stage_window)
  int32_t split_prewait_rows = -1;  // v26, split_staging 0: rows issued before the wait (-1: all), the rest after
  // v27 and v28 (the skip only): the gate rows of each MLP CTA left out of the pull (the MLP's ring reads them
  // before its PDL wait: 24 for norm_mlp v13 / v15), and the row copies a CTA keeps in flight (0: 4; at most 8, and
  // what its K/V ring holds).
  int32_t mlp_lead_skip_rows = 0;
  int32_t mlp_lead_window = 0;
  int32_t mlp_lead_policy = 0;  // v27: the pulled lines' L2 priority, 0 evict-normal, 1 evict-first, 2 evict-last
                                // (kernels/common/ptx.cuh L2Priority)
  // Tuning, v31 (v31_qkv_attention_o_handoff_late) only: the unstaged o rows each CTA with a split hands to the
  // CTAs without one, its last ones (-1: all of them; 0: none, every CTA multiplies its own rows). v31 also takes
  // warm_code as v30, and bit 128 with bit 2: the split CTAs' first pass reads staged rows in place of unstaged ones;
  // bit 256: the split CTAs pull their unstaged rows into L2 as the heads come in; bit 512: the hand-off the other
  // way, each CTA without a split giving its last handoff_rows rows to the split CTAs (where every row block is
  // full); diagnostic bits 1024 / 2048 (both: 3): the CTAs without a split stay 1 / 2 us on their SM after their work.
  // v32 (v32_qkv_attention_o_trigger_late) takes warm_code as v25, and diagnostic bits 1024 / 2048 (both: 3) move its
  // PDL trigger: 1 once the CTA has the merged heads, 2 once its o rows are written, 3 never (at the launch's end).
  int32_t handoff_rows = -1;
  // v33 (v33_qkv_attention_o_counted) only, nullptr elsewhere: counter hand-offs with the launches around it
  // (kernels/common/handoff.cuh; not v29-v31's hand-off of o rows between CTAs). handoff: two words a CTA waits on
  // in place of its PDL wait until they count handoff_producers CTAs of the previous launch (the QKV GEMV's,
  // NormGemvArgs::handoff_signal; handoff_poll_ns between polls), reset by the last CTA. handoff_signal: the words of
  // a hand-off to the next launch (NormMlpArgs::handoff), to which every CTA adds 1 once its rows, norm partial and
  // zeroed delta rows are written. PRECOND: handoff.cuh's.
  uint32_t* handoff = nullptr;
  int32_t handoff_producers = 0;
  int32_t handoff_poll_ns = 0;
  uint32_t* handoff_signal = nullptr;
};
constexpr int kQkvAttentionOTraceEvents = 10;
// The norm partials per token a launch on the current device leaves (its CTAs): the next norm GEMV's partial_count.
int64_t qkv_attention_o_partials(int64_t hidden, int64_t kv_heads);
int64_t qkv_attention_o_workspace_floats(int64_t hidden, int64_t q_heads, int64_t kv_heads, int64_t head_dim);
int64_t qkv_attention_o_counter_bytes(int64_t hidden, int64_t kv_heads);

// ---- 05 mlp ------------------------------------------------------------------------------------------------------
// out = bf16(bf16(silu(gate)) * up), gate and up side by side in one row (the fused gate|up projection).
struct SiluMulArgs {
  const bf16* gate_up;  // (tokens, 2 * inter): gate in columns [0, inter), up in [inter, 2 * inter)
  bf16* out;            // (tokens, inter)
  int64_t tokens, inter;
};

// The gate|up projection with SwiGLU in its epilogue (decode GEMV): a warp computes gate row i and up row i
// together and writes act[t][i] = bf16(bf16(silu(g)) * u) with g, u rounded to bf16 first, as transformers'
// bf16 gate_proj / up_proj outputs are. The (tokens, 2 * inter) gate|up activations never touch memory.
struct GateUpSwigluArgs {
  const bf16* x;          // (m, k)
  const bf16* w_gate_up;  // (2 * inter, k): gate_proj rows, then up_proj rows
  bf16* out;              // (m, inter)
  int64_t m, inter, k;
};

// The whole MLP sublayer of a batch-1 decode step in one launch, no grid-wide wait inside: delta += down(
// bf16(bf16(silu(g)) * u)) with g, u = gate|up(rmsnorm(residual)) rounded to bf16, as NormGateUpSwiglu followed by
// the down projection computes it, except that the down projection's sum is split: CTA c owns a block of the
// intermediate features, computes their gate|up rows and SwiGLU in full, multiplies its block of down_projᵀ rows
// and adds its (hidden) partial into residual_delta with fp32 reductions (red.global.add). So the sum's order is
// not fixed: the result is not bit-reproducible from run to run (within fp32 rounding of bf16 inputs).
// The delta is not added to the residual here: the next QKV norm GEMV (NormGemvArgs::residual_delta) and then
// qkv_attention_o (QkvAttentionOArgs::residual_delta, which zeroes it) do that on their way.
struct NormMlpArgs {
  const bf16* residual;        // (1, hidden): h after the attention sublayer, read only
  const float* norm_partials;  // (1, kMaxNormPartials) left by the producer of residual
  int64_t partial_count;
  const bf16* norm_weight;     // (hidden): post_attention_layernorm
  float eps;
  const bf16* w_gate_up;       // (2 * inter, hidden): gate_proj rows, then up_proj rows
  const bf16* w_down_t;        // (inter, hidden): down_proj transposed (transpose_bf16 of the (hidden, inter) weight)
  float* residual_delta;       // (delta_copies, hidden) fp32: += the MLP's output (zero between uses in the engine)
  int64_t hidden, inter;
  int32_t ctas = 0;            // tuning: CTAs, each owning ~inter / ctas features (0: one per SM)
  int32_t prewait_rows = -1;   // tuning: weight rows each CTA loads before the PDL wait (-1: the version's default)
  // CTA c adds its partial into copy c % delta_copies of the delta; the readers sum the copies. Why: 132 CTAs
  // reducing into the same 16 KB queue at the few L2 slices that hold it (the launch completed ~3.4 us after its
  // last CTA's end, H200); more copies spread the reductions over more slices.
  int32_t delta_copies = 1;
  // v3 (v3_mlp_qkv_next) only, nullptr elsewhere: the next layer's QKV norm GEMV in the same launch, after a
  // grid-wide wait for the delta: next_out = w_next · x with x normed from bf16(residual + bf16(delta)) by
  // next_norm_weight, as NormGemvArgs with residual_delta computes it (the residual is still not updated).
  const bf16* next_norm_weight = nullptr;  // (hidden): the next layer's input_layernorm
  const bf16* w_next = nullptr;            // (next_rows, hidden): its q_proj | k_proj | v_proj rows
  bf16* next_out = nullptr;                // (1, next_rows)
  int64_t next_rows = 0;
  uint32_t* sync = nullptr;                // 2 words, zero before the first launch; every launch leaves them zero
  // v4 (v4_mlp_split_down_l2) only: bytes the CTAs pull into L2 once all their own rows are in flight (the next
  // kernel's weights, the next layer's QKV rows: the launch's tail, when CTAs finish at different times, has HBM
  // time to spare). PRECOND: 16-byte aligned, l2_prefetch_bytes % 16 == 0. nullptr / 0: none.
  const void* l2_prefetch = nullptr;
  int64_t l2_prefetch_bytes = 0;
  // v7 (v7_mlp_with_o) only, nullptr elsewhere: the attention sublayer's o projection first, in the same launch.
  // o_residual (the same buffer as residual) then holds h before the o projection, and residual_delta the previous
  // MLP's output; CTA c < o_ctas takes o rows [c * hidden / o_ctas, (c + 1) * hidden / o_ctas) and writes
  // h' = bf16(bf16(h + bf16(Σ delta copies)) + bf16(w_o · attention_out)) there (zeroing those delta rows, as
  // qkv_attention_o does), its Σ h'² into o_partials[c]; every CTA waits at a grid-wide counter (sync) and norms
  // h' for the MLP (norm_partials and partial_count are not read). PRECOND: q_dim == hidden.
  const bf16* w_o = nullptr;            // (hidden, q_dim): o_proj
  const bf16* attention_out = nullptr;  // (q_dim): the attention output, from the previous kernel
  bf16* o_residual = nullptr;           // (hidden): h in, h' out
  float* o_partials = nullptr;          // (o_ctas)
  int64_t q_dim = 0;
  int32_t o_ctas = 0;                   // CTAs [0, o_ctas) take the o rows (0: all); the others only wait
  int32_t o_ahead_groups = -1;          // tuning: MLP row groups in flight during the o rows (-1: all the ring's)
  // Profiling only (nullptr otherwise; v2-v7): (CTAs, kNormMlpTraceEvents) %globaltimer stamps of when each CTA
  // reached each point (NormMlpTraceEvent in v1_mlp_split_down.cu; 0: not reached in this version).
  uint64_t* trace = nullptr;
  // v8 (v8_mlp_split_down_l2_lead) only: CTAs [0, l2_lead_ctas) pull the first l2_lead_bytes of each other CTA's
  // rows into L2 before their PDL wait. In the decode step they are the CTAs that find an SM long before the
  // release (the SMs qkv_attention_o leaves free), when HBM idles under the attention. PRECOND: % 16 == 0.
  // v9 (v9_mlp_split_down_l2_first): every CTA pulls its own first l2_lead_bytes of rows (whole rows) into L2.
  int32_t l2_lead_ctas = 0;
  int64_t l2_lead_bytes = 0;
  // v11 (v11_mlp_split_down_skewed) only: CTAs [skew_from, ctas) take (1000 - skew_permille) / 1000 of the share
  // of features the others take (norm_mlp_feature_begin_skewed). Why: in the decode step the CTAs placed after the
  // attention's split CTAs leave become resident ~2 us after the others and end ~2.3 us after them, every layer
  // (ITERATIONS.md session 17). PRECOND: 0 <= skew_permille < 1000, skew_from >= 0.
  int32_t skew_from = 0;
  int32_t skew_permille = 0;
  // v12 (v12_mlp_split_down_paired) only: CTA c and CTA ctas - 1 - c form a pair; the one whose "waited" stamp in
  // lateness_in (the previous launch's, %globaltimer ns, a CTA each) is later gives the last d of its features to
  // the other, d = its features x (their difference in us) x lateness_permille_per_us / 1000, at most
  // lateness_max_features. Every CTA writes its own stamp to lateness_out for the next launch. The block scheduler
  // places CTAs in index order, so the CTAs that find an SM last (after the attention's split CTAs leave, ~2 us
  // after the others) are the last indices and pair with the first. PRECOND: lateness_in (ctas) complete before
  // the launch's PDL wait and not written during the launch (the engine alternates two buffers by layer);
  // lateness_out (ctas) another buffer; all zeros in lateness_in: no transfer.
  const uint64_t* lateness_in = nullptr;
  uint64_t* lateness_out = nullptr;
  int32_t lateness_permille_per_us = 25;
  int32_t lateness_max_features = 8;
  // v14 (v14_mlp_split_down_batched) only: `rows` tokens decoded together (1 or 2: the warp sums of two tokens
  // fill its shared memory beside the ring), their inputs already normed (normed_input, (rows, hidden), as the
  // batched decode layer's add_rmsnorm writes them); residual, norm_partials and norm_weight are then not read, and
  // residual_delta is (delta_copies, rows, hidden). Every other version takes only rows == 1, normed_input nullptr.
  const bf16* normed_input = nullptr;
  int64_t rows = 1;
  // Tuning, v15 (v15_mlp_split_down_paced) only (last, so that the aggregate initializations above stay): of the
  // ring groups before the PDL wait, how many are in flight at once (0: 1).
  int32_t prewait_window = 0;
  // v16 (v16_mlp_split_down_late) only: the CTAs from index late_cta_from on (0: a quarter of the grid, rounded
  // down; -1: none, v15's launch) issue late_prewait_groups (0-3) ring groups before the PDL wait instead of all
  // three, and the rest after it, behind the norm's loads (the last indices find their SMs last).
  int32_t late_cta_from = 0;
  int32_t late_prewait_groups = 1;
  // v18 (v18_mlp_split_down_beside) only: stages of its ring, 4 rows (32 KB at hidden 4096) each, 2-5 (0: 4). Its
  // CTA then takes 32 KB a stage and ~13 KB of warp sums, so that it fits on an SM beside a qkv_attention_o CTA of
  // 228 KB less that (the engine's attention_o_smem_kb).
  int32_t beside_stages = 0;
  // v18 only: ring groups past the first beside_stages a CTA pulls into L2 before its PDL wait (0: none).
  int32_t beside_l2_groups = 0;
  // v19 (v19_mlp_split_down_handoff) only, nullptr elsewhere: counter hand-offs with the launches around it
  // (kernels/common/handoff.cuh). handoff_signal: the words of a hand-off to the next launch (NormGemvArgs::handoff):
  // every CTA adds 1 once its reductions into residual_delta are sent. handoff: the words of a hand-off from the
  // previous launch (QkvAttentionOArgs::handoff_signal), waited for in place of the PDL wait until they count
  // handoff_producers CTAs (handoff_poll_ns between polls), and reset by the last CTA. PRECOND: handoff.cuh's.
  uint32_t* handoff_signal = nullptr;
  uint32_t* handoff = nullptr;
  int32_t handoff_producers = 0;
  int32_t handoff_poll_ns = 0;
};
constexpr int kNormMlpTraceEvents = 8;
// CTAs a launch runs on the current device (one per SM unless NormMlpArgs::ctas says otherwise).
int64_t norm_mlp_ctas(const NormMlpArgs& args);
// The intermediate features of CTA c of a norm_mlp launch of `ctas` CTAs: [norm_mlp_feature_begin(c),
// norm_mlp_feature_begin(c + 1)), contiguous blocks of near-equal size (qkv_attention_o v7 prefetches by it).
__host__ __device__ inline int64_t norm_mlp_feature_begin(int64_t c, int64_t ctas, int64_t inter) {
  return c * inter / ctas;
}
// The same blocks weighted: CTAs [from, ctas) weigh 1000 - permille, the others 1000 (NormMlpArgs::skew_from);
// permille 0 gives norm_mlp_feature_begin's blocks. PRECOND: 0 <= permille < 1000, from >= 0, ctas >= 1.
// norm_mlp_skewed_weight_before(n): the weight of CTAs [0, n).
__host__ __device__ inline int64_t norm_mlp_skewed_weight_before(int64_t n, int64_t from, int64_t permille) {
  return 1000 * n - permille * (n > from ? n - from : 0);
}
__host__ __device__ inline int64_t norm_mlp_feature_begin_skewed(int64_t c, int64_t ctas, int64_t inter, int64_t from,
                                                                 int64_t permille) {
  return inter * norm_mlp_skewed_weight_before(c, from, permille) /
         norm_mlp_skewed_weight_before(ctas, from, permille);
}
// The most features a CTA of norm_mlp_feature_begin_skewed takes: floor(a) - floor(b) <= ceil(a - b), and a CTA
// weighs at most 1000.
__host__ __device__ inline int64_t norm_mlp_max_features_skewed(int64_t ctas, int64_t inter, int64_t from,
                                                                int64_t permille) {
  const int64_t total = norm_mlp_skewed_weight_before(ctas, from, permille);
  return (inter * 1000 + total - 1) / total;
}

// out = inᵀ for a (rows, cols) bf16 matrix: a weight re-laid out once at load time.
struct TransposeArgs {
  const bf16* in;  // (rows, cols)
  bf16* out;       // (cols, rows)
  int64_t rows, cols;
};

// ---- decode GEMVs with the residual add and the RMSNorm folded in -------------------------------------------------
// The decode layer without add_rmsnorm kernels: a *residual* GEMV (O and down projections) adds its bf16 result
// into the residual stream in place and leaves, per block, the sum of squares of the new residual values; the next
// *norm* GEMV (QKV, gate|up) sums those partials in a fixed order (deterministic), normalizes the residual into
// shared memory exactly as rmsnorm does, and multiplies. The sublayer output and the normed activations never
// touch memory.
constexpr int64_t kMaxNormPartials = 2048;  // per token

struct GemvResidualArgs {
  const bf16* x;          // (m, k)
  const bf16* w;          // (n, k)
  bf16* residual;         // (m, n) in/out: residual = bf16(residual + bf16(x · wᵀ))
  float* norm_partials;   // (m, kMaxNormPartials): [t][b] = Σ over block b's rows of residual², b < blocks
  int64_t m, n, k;
  // When each CTA lets the next kernel launch (PDL): 0 at its start; f in (0, 1] once it has streamed a fraction
  // f of its weights, so the next kernel's first loads land in this one's drain instead of competing with its start.
  float pdl_trigger = 0.0f;
};
// How many partials per token one launch leaves (its block count).
int64_t gemv_residual_partials(int64_t m, int64_t n);
// The same for v9_gemv_residual_tma: its grid, one CTA per SM of the current device for every shape (CTAs left
// without rows when n < SMs write 0). Pass it as the next norm GEMV's partial_count after a v9 launch.
int64_t gemv_residual_tma_partials(int64_t m, int64_t n);

struct NormGemvArgs {
  const bf16* residual;        // (m, k): the hidden state
  const float* norm_partials;  // (m, kMaxNormPartials)
  int64_t partial_count;       // partials per token left by the producer
  const bf16* norm_weight;     // (k)
  float eps;
  const bf16* w;               // (n, k)
  bf16* y;                     // (m, n)
  int64_t m, n, k;
  // When each CTA lets the next kernel launch (PDL): 0 at its start; f in (0, 1] once it has streamed a fraction
  // f of its weights, so the next kernel's first loads land in this one's drain instead of competing with its start.
  float pdl_trigger = 0.0f;
  // Profiling only (nullptr otherwise; v12 at batch 1): (CTAs, kNormGemvTraceEvents) %globaltimer stamps of when
  // each CTA reached each point (NormGemvTraceEvent in v12_gemv_norm_ring.cu).
  uint64_t* trace = nullptr;
  // nullptr, or (m, k) fp32: the down projection's output still owed to the residual (NormMlpArgs). Then the
  // hidden state normed here is bf16(residual + bf16(residual_delta)), its sum of squares is taken here, and
  // norm_partials / partial_count are not read. The residual itself is left as it is (qkv_attention_o adds the
  // delta in, later). Versions without it refuse such args (supports()).
  const float* residual_delta = nullptr;
  // The delta is the sum of this many (m, k) copies laid out one after the other (NormMlpArgs::delta_copies).
  int32_t delta_copies = 1;
  // v16 (v16_gemv_norm_ring_l2_first) only: bytes of each CTA's first rows (whole rows) it pulls into L2 before the
  // PDL wait, in place of v12's copies into its ring.
  int64_t l2_first_bytes = 0;
  // v20 (v20_gemv_norm_ring_deep), v22: ring groups of 4 rows issued before the PDL wait; 0: 4 (128 KB, v18's), v22 5.
  int32_t prewait_groups = 0;
  // v21 (v21_gemv_norm_ring_claimed) only: two uint32 counters, zero before its first launch (each launch leaves
  // them zero), from which CTAs claim the groups of 8 rows past their first claim_static_groups (0: 4). nullptr:
  // v18's fixed rows.
  uint32_t* claims = nullptr;
  int32_t claim_static_groups = 0;
  // v22 (v22_gemv_norm_ring_paced) only: its groups before the PDL wait (prewait_groups, 0: 5) go out this many at
  // a time (0: 1), the next once the oldest has landed.
  int32_t prewait_window = 0;
  // v23 (v23_gemv_norm_ring_late) only: the CTAs from index late_cta_from on (0: a quarter of the grid, rounded
  // down; -1: none, v22's launch) issue late_prewait_groups (0-5) ring groups before the PDL wait instead of
  // prewait_groups, and the rest after it, behind the norm's loads. The block scheduler places CTAs in index order
  // as the MLP's leave their SMs, so the last indices become resident in the MLP's last microseconds.
  int32_t late_cta_from = 0;
  int32_t late_prewait_groups = 1;
  // v25 (v25_gemv_norm_ring_handoff) only, nullptr elsewhere: counter hand-offs (kernels/common/handoff.cuh). handoff:
  // two words a CTA waits on in place of its PDL wait until they count handoff_producers CTAs of the previous launch
  // (NormMlpArgs::handoff_signal; handoff_poll_ns between polls, 0: none); the last CTA resets them. handoff_signal:
  // the words of a hand-off to the next launch (QkvAttentionOArgs::handoff), to which every CTA adds 1 once its
  // rows are written. Why: the PDL wait returns ~0.9-2 us after the previous launch's last CTA ends (ITERATIONS.md
  // sessions 16-19); a count can be seen one L2 round trip after the last add. PRECOND: handoff.cuh's.
  uint32_t* handoff = nullptr;
  int32_t handoff_producers = 0;
  int32_t handoff_poll_ns = 0;
  uint32_t* handoff_signal = nullptr;
  // v26 (v26_gemv_norm_ring_ramp) only: CTA c's rows are [gemv_rows_begin_ramped(c), gemv_rows_begin_ramped(c + 1)),
  // shares that fall linearly with the block index, from ~(1000 + row_ramp_permille) / 1000 of the even share at
  // CTA 0 to ~(1000 - row_ramp_permille) / 1000 at the last (negative: rising). Why: the block scheduler places the
  // CTAs in index order as the MLP's leave their SMs, and at prompt 128 the QKV GEMV's CTAs ended in that order,
  // the last 12 6.2 us after the first 12 (ITERATIONS.md session 31); the attention's release waits for the last.
  // PRECOND: -1000 <= row_ramp_permille <= 1000.
  int32_t row_ramp_permille = 0;
  // v26 only: the first CTA of the ramp; CTAs [0, row_ramp_first_cta) take the even share and the ramp spreads the
  // remaining rows over the rest (gemv_rows_begin_ramped's first_ramped). Why: with the ramp over the whole grid the
  // first CTAs, which hold more rows, leave their SMs later, and the attention launch's CTAs take those SMs first
  // (ITERATIONS.md session 32); from a later CTA on, the rows the last CTAs give up go to the middle ones.
  // PRECOND: row_ramp_first_cta >= 0 (past the grid: the even split).
  int32_t row_ramp_first_cta = 0;
};

constexpr int kNormGemvTraceEvents = 5;

// The first CTA of gemv_rows_begin_ramped's ramp: first_ramped clamped to the grid, 0 where permille is 0 (no ramp:
// the even split, whatever first_ramped).
__host__ __device__ inline int64_t gemv_ramp_first_cta(int64_t ctas, int64_t permille, int64_t first_ramped) {
  return permille == 0 ? 0 : first_ramped < ctas ? first_ramped : ctas;
}
// The first of n rows that CTA c of `ctas` takes where the shares fall linearly with c (NormGemvArgs::
// row_ramp_permille = p): CTAs [0, c) take the fraction c / ctas + p / 1000 * c (ctas - c) / ctas² of the rows,
// rounded down; CTA c's share is then n / ctas * (1 + p / 1000 * (ctas - 2c - 1) / ctas). p = 0: c * n / ctas.
// first_ramped = f > 0 (NormGemvArgs::row_ramp_first_cta): CTAs [0, f) take the even split's rows, c * n / ctas,
// and CTAs [f, ctas) split the rest as above, as a grid of their own (p = 0: the even split whatever f).
// PRECOND: 0 <= c <= ctas, |p| <= 1000 (the rows then never fall as c rises), first_ramped >= 0.
__host__ __device__ inline int64_t gemv_rows_begin_ramped(int64_t c, int64_t ctas, int64_t n, int64_t permille,
                                                          int64_t first_ramped = 0) {
  const int64_t f = gemv_ramp_first_cta(ctas, permille, first_ramped);
  if (c <= f) return c * n / ctas;
  const int64_t head = f * n / ctas, tail_ctas = ctas - f, tail_rows = n - head;
  const int64_t t = c - f;
  return head + tail_rows * (1000 * t * tail_ctas + permille * t * (tail_ctas - t)) / (1000 * tail_ctas * tail_ctas);
}
// The most rows a CTA of gemv_rows_begin_ramped takes: floor(a) - floor(b) <= ceil(a - b), and a share is at most
// tail_rows / tail_ctas * (1000 + |p|) / 1000 in the ramp, ceil(n / ctas) before it.
__host__ __device__ inline int64_t gemv_rows_max_ramped(int64_t ctas, int64_t n, int64_t permille,
                                                        int64_t first_ramped = 0) {
  const int64_t magnitude = permille < 0 ? -permille : permille;
  const int64_t f = gemv_ramp_first_cta(ctas, permille, first_ramped);
  const int64_t even = (n + ctas - 1) / ctas;
  if (f == ctas) return even;
  const int64_t tail_ctas = ctas - f, tail_rows = n - f * n / ctas;
  const int64_t ramped = (tail_rows * (1000 + magnitude) + 1000 * tail_ctas - 1) / (1000 * tail_ctas);
  return ramped > even ? ramped : even;
}

struct NormGateUpSwigluArgs {
  const bf16* residual;        // (m, k)
  const float* norm_partials;  // (m, kMaxNormPartials)
  int64_t partial_count;
  const bf16* norm_weight;     // (k)
  float eps;
  const bf16* w_gate_up;       // (2 * inter, k)
  bf16* out;                   // (m, inter)
  int64_t m, inter, k;
  // When each CTA lets the next kernel launch (PDL): 0 at its start; f in (0, 1] once it has streamed a fraction
  // f of its weights, so the next kernel's first loads land in this one's drain instead of competing with its start.
  float pdl_trigger = 0.0f;
};

// ---- 08 decode layers: every layer of one batch-1 decode step in one launch ----------------------------------------
// The whole layer stack of the decode step for one token: for each layer, h += o(attention(rope(qk_norm(qkv(
// rmsnorm(h)))))) then h += down(swiglu(gate_up(rmsnorm(h)))), with the new k and v stored in the cache at
// (slot, position). Same arithmetic and rounding points as the folded-norm chain (norm GEMV, fused QKV attention,
// residual GEMVs). On return h holds the last layer's residual stream (the final norm is not applied).
struct DecodeLayerWeights {
  const bf16* input_norm;  // (hidden)
  const bf16* post_norm;   // (hidden)
  const bf16* q_norm;      // (head_dim)
  const bf16* k_norm;      // (head_dim)
  const bf16* wqkv;        // (q_dim + 2 * kv_dim, hidden): q_proj, k_proj, v_proj rows
  const bf16* wo;          // (hidden, q_dim)
  const bf16* w_gate_up;   // (2 * inter, hidden): gate_proj rows, then up_proj rows
  const bf16* w_down;      // (hidden, inter)
};

struct DecodeLayersArgs {
  const DecodeLayerWeights* layers;  // (num_layers) device array
  int64_t num_layers, hidden, q_heads, kv_heads, head_dim, inter, max_ctx;
  bf16* h;                   // (hidden) in/out: the residual stream of the one token
  bf16* qkv;                 // (q_dim + 2 * kv_dim) scratch
  bf16* attn;                // (q_dim) scratch
  bf16* act;                 // (inter) scratch
  bf16* k_cache;             // (num_layers, slots, max_ctx, kv_heads, head_dim): layer l at l * layer_cache_elems
  bf16* v_cache;             // same layout
  int64_t layer_cache_elems;
  const int32_t* positions;  // (1) device: the token's position
  const int32_t* slots;      // (1) device cache slot, or nullptr for slot 0
  const float* inv_freq;     // (head_dim / 2)
  float attention_factor;
  float eps;
  float scale;               // head_dim^-0.5
  int64_t max_position;      // host-side upper bound of positions[0]: sizes the attention's key split, never limits
                             // the keys attended (positions[0] + 1 of them)
  float* workspace;          // decode_layers_workspace_floats() floats
  uint32_t* sync;            // decode_layers_sync_words() words: zero before the first launch; every launch leaves
                             // them zero again
  // Profiling only (nullptr otherwise): (grid, num_layers, kDecodeLayersTraceEvents) %globaltimer stamps of when
  // each CTA reached each point of each layer (v1: see DecodeLayersTraceEvent in its source).
  uint64_t* trace = nullptr;
  // Tuning only: at most this many weight stages in flight per SM (0: as many as fit, v1: 4 of 48 KB).
  int32_t ring_stages = 0;
  // Tuning only: the keys of the context bucket one attention split aims at (0: v1's 256, one per consumer lane).
  int32_t split_keys = 0;
};
constexpr int kDecodeLayersTraceEvents = 24;
int64_t decode_layers_workspace_floats(int64_t kv_heads, int64_t head_dim);
int64_t decode_layers_sync_words(int64_t num_layers, int64_t kv_heads);

// ---- 06 residual add ---------------------------------------------------------------------------------------------
struct AddArgs {
  bf16* h;             // (n) in/out: h = bf16(h + delta)
  const bf16* delta;   // (n)
  int64_t n;
};

// ---- 07 sampling -------------------------------------------------------------------------------------------------
// One token per row of logits. Per-row parameters live on the device so a captured graph can change them.
struct DeviceSampling {
  float temperature;  // <= 0: greedy
  int32_t top_k;      // 0: off
  float top_p;        // 1: off
  float min_p;        // 0: off
  float repetition_penalty, presence_penalty, frequency_penalty;
  uint64_t seed;
};

struct SampleArgs {
  const bf16* logits;            // (rows, vocab)
  const DeviceSampling* params;  // (rows)
  const int32_t* token_counts;   // (rows, vocab): times generated, or nullptr (no penalties)
  const uint8_t* in_prompt;      // (rows, vocab): 1 if in the prompt, or nullptr
  uint64_t* step;                // (rows) random-stream position, incremented by the kernel
  int32_t* out_tokens;           // (rows)
  int64_t rows, vocab;
  float* workspace;              // sample_workspace_floats() floats, zero before a version's first launch, or
                                 // nullptr (v0 and v1 use none; v2 needs it)
  // Optional, versions whose supports() take it (v2): the sampled token becomes the row's next decode input, as
  // the engine's advance kernel would make it: next_ids[r] = token, positions[r] += 1 (where positions is given),
  // and counts[r * vocab + token] += 1 where the row samples with penalties. nullptr: none of it.
  int32_t* next_ids = nullptr;   // (rows)
  int32_t* positions = nullptr;  // (rows) or nullptr
  int32_t* counts = nullptr;     // (rows, vocab): token_counts' memory, or nullptr if no row has penalties
};
// Per-row partials and counters of v2_sample_split; each launch leaves the counters zero again.
int64_t sample_workspace_floats(int64_t rows, int64_t vocab);

}  // namespace qwen3::kernels
