// Which tensors a Qwen3 model has, with which shapes, bound by name from a checkpoint. Every tensor's presence,
// dtype and shape is checked here, once, before any compute; kernels and the reference forward trust the result.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/tensor.h"
#include "io/checkpoint.h"

namespace qwen3 {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// The tensors config.json implies, in checkpoint naming. lm_head.weight is listed only for untied models.
std::vector<TensorSpec> expected_qwen3_tensors(const ModelConfig& config);

struct LayerWeights {
  TensorView input_norm;  // (hidden)
  TensorView q_proj;      // (heads * head_dim, hidden)
  TensorView k_proj;      // (kv_heads * head_dim, hidden)
  TensorView v_proj;      // (kv_heads * head_dim, hidden)
  TensorView o_proj;      // (hidden, heads * head_dim)
  TensorView q_norm;      // (head_dim)
  TensorView k_norm;      // (head_dim)
  TensorView post_norm;   // (hidden)
  TensorView gate_proj;   // (intermediate, hidden)
  TensorView up_proj;     // (intermediate, hidden)
  TensorView down_proj;   // (hidden, intermediate)
};

struct Qwen3Weights {
  TensorView embed;       // (vocab, hidden)
  std::vector<LayerWeights> layers;
  TensorView final_norm;  // (hidden)
  TensorView lm_head;     // (vocab, hidden): the embedding itself when tied
};

// Throws FormatError naming the tensor when one is missing, has the wrong shape, or a dtype the engine does not
// read (floating weights must be BF16, F16 or F32).
Qwen3Weights bind_qwen3_weights(const Checkpoint& checkpoint);

}  // namespace qwen3
