// libFuzzer target: any byte string as config.json and as generation_config.json. Accepted configs must be
// self-consistent (the invariants the engine relies on); everything else must be a FormatError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/config.h"
#include "core/error.h"
#include "model/rope.h"
#include "model/qwen3_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const qwen3::ModelConfig c = qwen3::parse_model_config(text);
    if (c.hidden_size <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
        c.head_dim % 2 != 0 || c.vocab_size <= 0)
      std::abort();
    (void)c.parameter_count();
    if (c.num_layers <= 4) (void)qwen3::expected_qwen3_tensors(c);
    (void)qwen3::make_rope_table(c);
  } catch (const qwen3::FormatError&) {
  }
  try {
    (void)qwen3::parse_generation_config(text);
  } catch (const qwen3::FormatError&) {
  }
  return 0;
}
