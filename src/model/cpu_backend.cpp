#include "model/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/sampler.h"

namespace qwen3 {

void load_row_f32(const TensorView& t, int64_t row, float* out) {
  const int64_t cols = t.shape.size() >= 2 ? t.shape[1] : t.numel();
  const int64_t offset = row * cols;
  switch (t.dtype) {
    case DType::BF16: {
      const auto* src = static_cast<const uint16_t*>(t.data) + offset;
      for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_f32(src[i]);
      break;
    }
    case DType::F16: {
      const auto* src = static_cast<const uint16_t*>(t.data) + offset;
      for (int64_t i = 0; i < cols; ++i) out[i] = f16_to_f32(src[i]);
      break;
    }
    case DType::F32:
      std::memcpy(out, static_cast<const float*>(t.data) + offset, size_t(cols) * sizeof(float));
      break;
    default:
      throw FormatError("load_row_f32: unsupported dtype " + std::string(dtype_name(t.dtype)));
  }
}

std::vector<float> load_f32(const TensorView& t) {
  std::vector<float> out(size_t(t.numel()));
  const int64_t rows = t.shape.size() >= 2 ? t.shape[0] : 1;
  const int64_t cols = t.shape.size() >= 2 ? t.shape[1] : t.numel();
  for (int64_t r = 0; r < rows; ++r) load_row_f32(t, r, out.data() + r * cols);
  return out;
}

namespace {

// Eight independent partial sums so the compiler can vectorize without reassociating (no -ffast-math).
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// out = weight * (x * rsqrt(mean(x^2) + eps)), the order of transformers' Qwen3RMSNorm in fp32.
void rmsnorm(const float* x, const float* weight, int64_t n, double eps, float* out) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += double(x[i]) * double(x[i]);
  const float inv_rms = 1.0f / std::sqrt(float(sum_sq / double(n)) + float(eps));
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * inv_rms);
}

// NeoX rotation: dim j pairs with j + head_dim/2.
void apply_rope(float* head, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = head[i], b = head[i + half];
    head[i] = a * cos[i] - b * sin[i];
    head[i + half] = b * cos[i] + a * sin[i];
  }
}

}  // namespace

void matmul_f32(const float* x, int64_t T, const TensorView& w, float* y) {
  const int64_t out_features = w.shape[0];
  const int64_t in_features = w.shape[1];
  constexpr int64_t kRows = 4;  // weight rows widened together, so each x row is read once per 4 outputs
  const int64_t blocks = (out_features + kRows - 1) / kRows;
#pragma omp parallel
  {
    std::vector<float> rows(size_t(kRows * in_features));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t r0 = b * kRows;
      const int64_t nr = std::min(kRows, out_features - r0);
      for (int64_t r = 0; r < nr; ++r) load_row_f32(w, r0 + r, rows.data() + r * in_features);
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * in_features;
        for (int64_t r = 0; r < nr; ++r) y[t * out_features + r0 + r] = dot(xt, rows.data() + r * in_features, in_features);
      }
    }
  }
}

CpuBackend::CpuBackend(const Checkpoint& checkpoint, int64_t context_length)
    : config_(checkpoint.config()), weights_(bind_qwen3_weights(checkpoint)), rope_(make_rope_table(config_)) {
  context_length_ = context_length > 0 ? std::min(context_length, config_.max_position_embeddings)
                                       : config_.max_position_embeddings;
  for (const LayerWeights& l : weights_.layers)
    norms_.push_back({load_f32(l.input_norm), load_f32(l.post_norm), load_f32(l.q_norm), load_f32(l.k_norm)});
  final_norm_ = load_f32(weights_.final_norm);
  k_cache_.resize(size_t(config_.num_layers));
  v_cache_.resize(size_t(config_.num_layers));
}

void CpuBackend::truncate(int64_t n) {
  length_ = std::clamp<int64_t>(n, 0, length_);
  for (size_t l = 0; l < k_cache_.size(); ++l) {
    k_cache_[l].resize(size_t(length_ * config_.kv_dim()));
    v_cache_[l].resize(size_t(length_ * config_.kv_dim()));
  }
}

void CpuBackend::forward(std::span<const int32_t> tokens, bool want_argmax_per_position, ForwardOutput& out) {
  const ModelConfig& c = config_;
  const int64_t T = int64_t(tokens.size());
  const int64_t pos0 = length_;
  if (T == 0) throw InputError("forward: no tokens");
  if (pos0 + T > context_length_)
    throw InputError("forward: " + std::to_string(pos0 + T) + " positions exceed the context of " +
                     std::to_string(context_length_));
  for (int32_t id : tokens)
    if (id < 0 || id >= c.vocab_size) throw InputError("token id " + std::to_string(id) + " is out of range");

  const int64_t H = c.hidden_size, D = c.head_dim, QD = c.q_dim(), KVD = c.kv_dim(), I = c.intermediate_size;
  const int64_t half = D / 2;
  std::vector<float> h(size_t(T * H)), x(size_t(T * H)), tmp(size_t(T * H));  // (T, hidden)
  std::vector<float> q(size_t(T * QD)), attn(size_t(T * QD));                  // (T, heads * head_dim)
  std::vector<float> k(size_t(T * KVD)), v(size_t(T * KVD));                   // (T, kv_heads * head_dim)
  std::vector<float> gate(size_t(T * I)), up(size_t(T * I));                   // (T, intermediate)
  std::vector<float> cos(size_t(T * half)), sin(size_t(T * half));             // (T, head_dim / 2)

  for (int64_t t = 0; t < T; ++t) {
    load_row_f32(weights_.embed, tokens[size_t(t)], h.data() + t * H);
    rope_cos_sin(rope_, pos0 + t, cos.data() + t * half, sin.data() + t * half);
  }
  const float scale = 1.0f / std::sqrt(float(D));

  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = weights_.layers[size_t(l)];
    const LayerNorms& ln = norms_[size_t(l)];
    for (int64_t t = 0; t < T; ++t) rmsnorm(h.data() + t * H, ln.input.data(), H, c.rms_norm_eps, x.data() + t * H);
    matmul_f32(x.data(), T, lw.q_proj, q.data());
    matmul_f32(x.data(), T, lw.k_proj, k.data());
    matmul_f32(x.data(), T, lw.v_proj, v.data());
    // QK-norm per head, then RoPE.
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t hq = 0; hq < c.num_heads; ++hq) {
        float* head = q.data() + t * QD + hq * D;
        rmsnorm(head, ln.q.data(), D, c.rms_norm_eps, head);
        apply_rope(head, D, cos.data() + t * half, sin.data() + t * half);
      }
      for (int64_t hk = 0; hk < c.num_kv_heads; ++hk) {
        float* head = k.data() + t * KVD + hk * D;
        rmsnorm(head, ln.k.data(), D, c.rms_norm_eps, head);
        apply_rope(head, D, cos.data() + t * half, sin.data() + t * half);
      }
    }
    auto& kc = k_cache_[size_t(l)];
    auto& vc = v_cache_[size_t(l)];
    kc.insert(kc.end(), k.begin(), k.end());
    vc.insert(vc.end(), v.begin(), v.end());

    // Causal attention: query t (position pos0 + t) sees keys 0..pos0 + t. GQA: head hq reads kv head hq / group.
    const int64_t group = c.gqa_group();
#pragma omp parallel
    {
      std::vector<float> scores(size_t(pos0 + T));
#pragma omp for collapse(2) schedule(dynamic)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t hq = 0; hq < c.num_heads; ++hq) {
          const int64_t n_keys = pos0 + t + 1;
          const float* qh = q.data() + t * QD + hq * D;
          const int64_t kv_off = (hq / group) * D;
          float max_score = -INFINITY;
          for (int64_t j = 0; j < n_keys; ++j) {
            scores[size_t(j)] = dot(qh, kc.data() + j * KVD + kv_off, D) * scale;
            max_score = std::max(max_score, scores[size_t(j)]);
          }
          double denom = 0;
          for (int64_t j = 0; j < n_keys; ++j) {
            scores[size_t(j)] = std::exp(scores[size_t(j)] - max_score);
            denom += scores[size_t(j)];
          }
          const float inv_denom = float(1.0 / denom);
          float* oh = attn.data() + t * QD + hq * D;
          std::fill(oh, oh + D, 0.0f);
          for (int64_t j = 0; j < n_keys; ++j) {
            const float p = scores[size_t(j)] * inv_denom;
            const float* vj = vc.data() + j * KVD + kv_off;
            for (int64_t d = 0; d < D; ++d) oh[d] += p * vj[d];
          }
        }
      }
    }
    matmul_f32(attn.data(), T, lw.o_proj, tmp.data());
    for (size_t i = 0; i < h.size(); ++i) h[i] += tmp[i];

    for (int64_t t = 0; t < T; ++t) rmsnorm(h.data() + t * H, ln.post.data(), H, c.rms_norm_eps, x.data() + t * H);
    matmul_f32(x.data(), T, lw.gate_proj, gate.data());
    matmul_f32(x.data(), T, lw.up_proj, up.data());
    for (size_t i = 0; i < gate.size(); ++i) {
      const float g = gate[i];
      gate[i] = g / (1.0f + std::exp(-g)) * up[i];  // silu(gate) * up
    }
    matmul_f32(gate.data(), T, lw.down_proj, tmp.data());
    for (size_t i = 0; i < h.size(); ++i) h[i] += tmp[i];
  }
  length_ += T;

  for (int64_t t = 0; t < T; ++t) rmsnorm(h.data() + t * H, final_norm_.data(), H, c.rms_norm_eps, x.data() + t * H);
  const int64_t V = c.vocab_size;
  out.last_logits.resize(size_t(V));
  out.argmax.clear();
  out.top2_margin.clear();
  if (!want_argmax_per_position) {
    matmul_f32(x.data() + (T - 1) * H, 1, weights_.lm_head, out.last_logits.data());
    return;
  }
  // All positions, a chunk at a time so T x vocab logits never sit in memory at once.
  constexpr int64_t kChunk = 16;
  std::vector<float> logits(size_t(std::min(T, kChunk) * V));
  for (int64_t t0 = 0; t0 < T; t0 += kChunk) {
    const int64_t n = std::min(kChunk, T - t0);
    matmul_f32(x.data() + t0 * H, n, weights_.lm_head, logits.data());
    for (int64_t i = 0; i < n; ++i) {
      const std::span<const float> row(logits.data() + i * V, size_t(V));
      const int32_t best = argmax(row);
      float second = -INFINITY;
      for (int64_t j = 0; j < V; ++j)
        if (j != best) second = std::max(second, row[size_t(j)]);
      out.argmax.push_back(best);
      out.top2_margin.push_back(row[size_t(best)] - second);
      if (t0 + i == T - 1) std::copy(row.begin(), row.end(), out.last_logits.begin());
    }
  }
}

}  // namespace qwen3
