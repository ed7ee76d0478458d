// Rotary embedding frequencies exactly as transformers derives them (fp32 inv_freq; cos/sin scaled by
// attention_factor for YaRN). Shared by the CPU reference and the CUDA engine, which uploads the same table.
#pragma once

#include <vector>

#include "core/config.h"

namespace qwen3 {

struct RopeTable {
  std::vector<float> inv_freq;    // (head_dim / 2)
  float attention_factor = 1.0f;  // multiplies cos and sin (YaRN); 1 otherwise
};

RopeTable make_rope_table(const ModelConfig& config);

// cos/sin for one position: (head_dim / 2) values each, computed as transformers does in fp32:
// angle = float(pos) * inv_freq[i]; cos = cosf(angle) * attention_factor.
void rope_cos_sin(const RopeTable& table, int64_t position, float* cos_out, float* sin_out);

}  // namespace qwen3
