// The CPU reference forward pass: the oracle every other path is checked against. Plain and exact rather than
// fast: weights (bf16/f16/f32) are widened to fp32 as they are read, every activation stays fp32, and the order of
// operations follows transformers' Qwen3 modeling code computed in float32. Multi-threaded with OpenMP.
#pragma once

#include <memory>
#include <vector>

#include "io/checkpoint.h"
#include "model/backend.h"
#include "model/qwen3_weights.h"
#include "model/rope.h"

namespace qwen3 {

class CpuBackend final : public Backend {
 public:
  // The checkpoint must outlive the backend (weights are read from its mapping). context_length 0 means the
  // model's max_position_embeddings. The KV cache grows as tokens arrive.
  explicit CpuBackend(const Checkpoint& checkpoint, int64_t context_length = 0);

  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return config_; }
  int64_t context_length() const override { return context_length_; }
  int64_t length() const override { return length_; }
  void truncate(int64_t n) override;
  void forward(std::span<const int32_t> tokens, bool want_argmax_per_position, ForwardOutput& out) override;

 private:
  struct LayerNorms {
    std::vector<float> input, post, q, k;  // fp32 copies of the small norm weights
  };

  ModelConfig config_;
  Qwen3Weights weights_;
  std::vector<LayerNorms> norms_;
  std::vector<float> final_norm_;
  RopeTable rope_;
  int64_t context_length_ = 0;
  int64_t length_ = 0;
  std::vector<std::vector<float>> k_cache_;  // per layer: (length, kv_heads * head_dim) fp32, after norm and RoPE
  std::vector<std::vector<float>> v_cache_;  // per layer: (length, kv_heads * head_dim) fp32
};

// Helpers shared with tests and other host code.
// Row `row` of a 2-D tensor (or the whole of a 1-D one) widened to fp32: out has cols() values.
void load_row_f32(const TensorView& t, int64_t row, float* out);
std::vector<float> load_f32(const TensorView& t);
// y: (T, out) = x: (T, in) · W: (out, in)ᵀ, fp32 accumulation, OpenMP over output rows.
void matmul_f32(const float* x, int64_t T, const TensorView& w, float* y);

}  // namespace qwen3
