// Plain CPU references for every op of kernels/kernels.h, following its rounding points (those of
// transformers' bf16 Qwen3 forward), so the GPU tests can compare each kernel version within a stated bound.
//
// Tensors are bf16 bit patterns (uint16_t) in the layouts of kernels.h. Two kinds of reference:
//   * rounded: the bf16 result transformers produces (embedding, rmsnorm, rope, silu_mul, add, cache copies).
//     The GPU must match it bit for bit, or within a stated number of bf16 ulps where the fp32 order of
//     operations or a libm ulp may differ (test_kernels.cu states each op's bound).
//   * exact: the unrounded result in double and, per element, the magnitude its rounding error scales with
//     (gemm: sum |x w|; attention: sum p |v|), so a bound can be stated relative to what rounding loses.
// Everything here is deliberately plain (one loop per formula), parallel over rows with OpenMP.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qwen3::reference {

// ---- bf16 -------------------------------------------------------------------------------------------------
float to_float(uint16_t bf16_bits);
uint16_t to_bf16(float value);  // round to nearest even, as torch
float round_bf16(float value);  // to_float(to_bf16(value))
// Distance in representable bf16 values (0 = identical, +0 and -0 equal); huge for NaN.
int64_t ulp_distance(uint16_t a, uint16_t b);

// ---- random inputs (counter-based, so each element is a pure function of (seed, index)) -------------------
uint64_t mix_seed(uint64_t seed, uint64_t salt);
void fill_uniform_bf16(std::span<uint16_t> out, uint64_t seed, float lo, float hi);
void fill_uniform_int(std::span<int32_t> out, uint64_t seed, int32_t lo, int32_t hi);  // [lo, hi]

// ---- 00 embedding -----------------------------------------------------------------------------------------
// out: (tokens, hidden) = table rows of ids
void embedding(std::span<const int32_t> ids, const uint16_t* table, int64_t hidden, uint16_t* out);

// ---- 01 rmsnorm -------------------------------------------------------------------------------------------
// y = bf16(weight * bf16(x * rsqrt(mean(x^2) + eps))) per row; x, y: (rows, n); y may alias x.
void rmsnorm(const uint16_t* x, const uint16_t* weight, int64_t rows, int64_t n, float eps, uint16_t* y);
// out = bf16(a + b) elementwise
void add(const uint16_t* a, const uint16_t* b, int64_t n, uint16_t* out);

// ---- 02 gemm ----------------------------------------------------------------------------------------------
// For each row i in `rows`: y_exact[r, j] = sum_k x[i, k] * w[j, k] in double (r = index of i in `rows`) and
// abs_sum[r, j] = sum_k |x[i, k] * w[j, k]|. x: (m, k), w: (n, k); y_exact, abs_sum: (rows.size(), n).
void gemm(const uint16_t* x, const uint16_t* w, int64_t n, int64_t k, std::span<const int64_t> rows,
          float* y_exact, float* abs_sum);

// ---- 03 rope ----------------------------------------------------------------------------------------------
// cos/sin for one position, rounded to bf16 (returned as float): (head_dim / 2) values each.
void rope_cos_sin(int32_t position, std::span<const float> inv_freq, float attention_factor, float* cos_out,
                  float* sin_out);
// NeoX rotation of one head in place, transformers' rounding: x' = bf16(bf16(x*cos) +
// bf16(rotate_half(x)*sin)). term_magnitude (optional, head_dim): |x_i*cos| + |partner*sin| before rounding,
// for the error bound.
void rope_head(uint16_t* head, int64_t head_dim, const float* cos_bf16, const float* sin_bf16,
               float* term_magnitude = nullptr);
// q: (tokens, q_heads, head_dim), k: (tokens, kv_heads, head_dim), in place; magnitudes: same shapes,
// optional.
void rope(uint16_t* q, uint16_t* k, std::span<const int32_t> positions, std::span<const float> inv_freq,
          float attention_factor, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
          float* q_magnitude = nullptr, float* k_magnitude = nullptr);

// ---- 04 attention -----------------------------------------------------------------------------------------
struct AttentionShape {
  int64_t tokens, q_heads, kv_heads, head_dim, max_ctx;
  float scale;
};
// out_exact: (tokens, q_heads, head_dim) in double, softmax over keys [0, positions[t]] of cache slot
// slots[t] (slot 0 when slots is empty); weighted_abs: sum_j p_j |v_j| per output element, for the bound. q:
// (tokens, q_heads, head_dim); caches: (slots, max_ctx, kv_heads, head_dim).
void attention(const AttentionShape& shape, const uint16_t* q, const uint16_t* k_cache,
               const uint16_t* v_cache, std::span<const int32_t> positions, std::span<const int32_t> slots,
               float* out_exact, float* weighted_abs);

// ---- 05 mlp -----------------------------------------------------------------------------------------------
// bf16(bf16(silu(gate)) * up) for one pair of bf16 values (silu in fp32, as F.silu on bf16).
uint16_t swiglu(uint16_t gate, uint16_t up);
// out (tokens, inter) = swiglu(gate, up) with gate_up: (tokens, 2 * inter), gate in the first inter columns.
void silu_mul(const uint16_t* gate_up, int64_t tokens, int64_t inter, uint16_t* out);

// ---- 07 sampling ------------------------------------------------------------------------------------------
struct SamplingSpec {
  double temperature = 1.0;  // <= 0: greedy
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off
  double min_p = 0.0;        // 0: off
  double repetition_penalty = 1.0, presence_penalty = 0.0, frequency_penalty = 0.0;
};
// logits after the penalties (transformers' repetition penalty over prompt and generated tokens, OpenAI
// presence and frequency penalties over generated ones). counts / in_prompt: (vocab) or empty.
std::vector<double> penalized_logits(std::span<const uint16_t> logits, std::span<const int32_t> counts,
                                     std::span<const uint8_t> in_prompt, const SamplingSpec& spec);
// argmax, ties to the lowest id
int32_t argmax(std::span<const double> logits);
// The probability of each token under temperature, top-k, top-p (smallest prefix of the sorted top-k set
// whose mass reaches top_p), then min-p (keep p >= min_p * p_max), in that order; 0 for filtered tokens.
std::vector<double> token_probabilities(std::span<const double> logits, const SamplingSpec& spec);
// Like token_probabilities but lenient where rounding could legitimately decide: ties at a cut are kept,
// top_p is raised by `slack` and min_p lowered by the factor (1 - slack). 1 = the token may be returned.
std::vector<uint8_t> allowed_tokens(std::span<const double> logits, const SamplingSpec& spec, double slack);

}  // namespace qwen3::reference
