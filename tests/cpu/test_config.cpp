#include <gtest/gtest.h>

#include <cmath>

#include "core/config.h"
#include "core/error.h"
#include "model/rope.h"

namespace qwen3 {
namespace {

// Qwen3-8B's config.json as Qwen published it (transformers 4.51 dialect).
constexpr const char* kQwen3_8B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
  "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
  "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

TEST(Config, ParsesQwen3_8B) {
  const ModelConfig c = parse_model_config(kQwen3_8B);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 36);
  EXPECT_EQ(c.gqa_group(), 4);
  EXPECT_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.rope.type, "default");
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
  // models.md section 5: 6.946 G layer parameters + 0.622 G lm_head are read per decode token.
  EXPECT_NEAR(double(c.decode_parameter_count()) / 1e9, 6.946 + 0.622, 0.002);
  EXPECT_NEAR(double(c.parameter_count()) / 1e9, 8.19, 0.01);
}

TEST(Config, ParsesTransformers5Dialect) {
  const ModelConfig c = parse_model_config(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "dtype": "bfloat16",
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "layer_types": ["full_attention", "full_attention"], "eos_token_id": null, "tie_word_embeddings": true})");
  EXPECT_EQ(c.rope.theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.q_dim(), 2048);  // heads x head_dim != hidden
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(Config, YarnMatchesTransformers) {
  const ModelConfig c = parse_model_config(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 64, "vocab_size": 10, "max_position_embeddings": 131072, "rope_theta": 1000000,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})");
  const RopeTable table = make_rope_table(c);
  EXPECT_NEAR(table.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  // Highest frequencies are extrapolated (unchanged), the lowest interpolated (divided by the factor).
  EXPECT_FLOAT_EQ(table.inv_freq[0], 1.0f);
  const float plain_last = 1.0f / std::pow(1e6f, 62.0f / 64.0f);
  EXPECT_NEAR(table.inv_freq[31], plain_last / 4.0f, plain_last * 1e-5);
}

void expect_rejected(const std::string& json, const std::string& needle) {
  try {
    parse_model_config(json);
    FAIL() << "accepted: " << json;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Config, RejectsBadInput) {
  expect_rejected("{", "not valid JSON");
  expect_rejected("[1]", "JSON object");
  expect_rejected(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})", "unsupported architecture 'LlamaForCausalLM'");
  expect_rejected(R"({"architectures": ["Qwen3NextForCausalLM"]})", "Qwen3NextForCausalLM");
  const std::string base = R"("architectures": ["Qwen3ForCausalLM"], "intermediate_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 4, "head_dim": 8, "vocab_size": 10)";
  expect_rejected("{" + base + "}", "missing 'hidden_size'");
  expect_rejected("{" + base + R"(, "hidden_size": -4})", "out of range");
  expect_rejected("{" + base + R"(, "hidden_size": 1e3})", "must be an integer");
  expect_rejected("{" + base + R"(, "hidden_size": 99999999999999999999})", "must be an integer");
  expect_rejected("{" + base + R"(, "hidden_size": 9223372036854775808})", "out of range");
  expect_rejected("{" + base + R"(, "hidden_size": 16, "num_key_value_heads": 3})", "multiple");
  expect_rejected("{" + base + R"(, "hidden_size": 16, "rope_scaling": {"rope_type": "longrope"}})", "longrope");
  expect_rejected("{" + base + R"(, "hidden_size": 16, "hidden_act": "gelu"})", "gelu");
  expect_rejected("{" + base + R"(, "hidden_size": 16, "quantization_config": {"quant_method": "awq"}})", "awq");
  expect_rejected("{" + base + R"(, "hidden_size": 16, "use_sliding_window": true})", "sliding");
}

TEST(Config, GenerationConfig) {
  const GenerationConfig g = parse_generation_config(
      R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
          "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"})");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(*g.top_k, 20);
  EXPECT_DOUBLE_EQ(*g.temperature, 0.6);
  EXPECT_THROW(parse_generation_config(R"({"eos_token_id": ["x"]})"), FormatError);
  EXPECT_THROW(parse_generation_config(R"({"top_p": 7})"), FormatError);
}

}  // namespace
}  // namespace qwen3
