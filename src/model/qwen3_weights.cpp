#include "model/qwen3_weights.h"

#include "core/error.h"

namespace qwen3 {
namespace {

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace

std::vector<TensorSpec> expected_qwen3_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = layer_prefix(l);
    specs.push_back({p + "input_layernorm.weight", {c.hidden_size}});
    specs.push_back({p + "self_attn.q_proj.weight", {c.q_dim(), c.hidden_size}});
    specs.push_back({p + "self_attn.k_proj.weight", {c.kv_dim(), c.hidden_size}});
    specs.push_back({p + "self_attn.v_proj.weight", {c.kv_dim(), c.hidden_size}});
    specs.push_back({p + "self_attn.o_proj.weight", {c.hidden_size, c.q_dim()}});
    specs.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
    specs.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    specs.push_back({p + "post_attention_layernorm.weight", {c.hidden_size}});
    specs.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}});
    specs.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}});
    specs.push_back({p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}});
  }
  specs.push_back({"model.norm.weight", {c.hidden_size}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}});
  return specs;
}

Qwen3Weights bind_qwen3_weights(const Checkpoint& checkpoint) {
  const ModelConfig& c = checkpoint.config();
  std::map<std::string, TensorView> bound;
  for (const TensorSpec& spec : expected_qwen3_tensors(c)) {
    const TensorView* view = checkpoint.find(spec.name);
    if (!view) {
      std::string hint = spec.name == "lm_head.weight" ? " (config.json says tie_word_embeddings = false)" : "";
      throw FormatError("checkpoint " + checkpoint.dir().string() + " is missing tensor '" + spec.name + "'" + hint);
    }
    if (view->shape != spec.shape)
      throw FormatError("tensor '" + spec.name + "' has shape " + shape_string(view->shape) + ", config.json implies " +
                        shape_string(spec.shape));
    if (view->dtype != DType::BF16 && view->dtype != DType::F16 && view->dtype != DType::F32)
      throw FormatError("tensor '" + spec.name + "' has dtype " + std::string(dtype_name(view->dtype)) +
                        " (supported: BF16, F16, F32)");
    bound.emplace(spec.name, *view);
  }

  Qwen3Weights w;
  w.embed = bound.at("model.embed_tokens.weight");
  w.final_norm = bound.at("model.norm.weight");
  w.lm_head = c.tie_word_embeddings ? w.embed : bound.at("lm_head.weight");
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = layer_prefix(l);
    LayerWeights layer;
    layer.input_norm = bound.at(p + "input_layernorm.weight");
    layer.q_proj = bound.at(p + "self_attn.q_proj.weight");
    layer.k_proj = bound.at(p + "self_attn.k_proj.weight");
    layer.v_proj = bound.at(p + "self_attn.v_proj.weight");
    layer.o_proj = bound.at(p + "self_attn.o_proj.weight");
    layer.q_norm = bound.at(p + "self_attn.q_norm.weight");
    layer.k_norm = bound.at(p + "self_attn.k_norm.weight");
    layer.post_norm = bound.at(p + "post_attention_layernorm.weight");
    layer.gate_proj = bound.at(p + "mlp.gate_proj.weight");
    layer.up_proj = bound.at(p + "mlp.up_proj.weight");
    layer.down_proj = bound.at(p + "mlp.down_proj.weight");
    w.layers.push_back(std::move(layer));
  }
  return w;
}

}  // namespace qwen3
