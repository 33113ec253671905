#include "model/config_families.h"
#include "model/config_hf_common.h"

namespace ssm::config_detail {

ModelConfig parse_hf_bamba(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m = hf_decoder_config(
      r, "bamba",
      hf_decoder_names("mamba.", "self_attn.", "feed_forward.", "pre_ff_layernorm.weight"), false,
      1e-5);
  read_hf_swiglu_mlp(r, m);

  read_mamba_prefixed_keys(r, m);

  m.attn_layer_idx = layer_indices(r, "attn_layer_indices", m.n_layer);
  read_split_attention(r, m);
  read_rope(r, m.attention);
  return m;
}

ModelConfig parse_hf_granite_hybrid(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m = hf_decoder_config(
      r, "granitemoehybrid",
      hf_decoder_names("mamba.", "self_attn.", "", "post_attention_layernorm.weight"), true, 1e-6);
  m.names.final_norm = "model.norm.weight";
  require_silu(r, "hidden_act");
  m.embedding_multiplier = static_cast<float>(r.number("embedding_multiplier", 1.0));
  m.residual_multiplier = static_cast<float>(r.number("residual_multiplier", 1.0));
  m.logits_scaling = static_cast<float>(r.number("logits_scaling", 1.0));
  if (!(m.logits_scaling > 0)) throw Error(cat(source, ": logits_scaling must be positive"));

  const Json& types = r.raw("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != m.n_layer)
    throw Error(cat(source, ": layer_types must list num_hidden_layers (", m.n_layer, ") layer types"));
  for (const Json& t : types) {
    const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
    if (s == "mamba" || s == "linear_attention") m.layer_kinds.push_back(MixerKind::kMamba2);
    else if (s == "attention" || s == "full_attention") m.layer_kinds.push_back(MixerKind::kAttention);
    else throw Error(cat(source, ": layer_types: unknown layer type '", s, "'"));
    if (m.layer_kinds.back() == MixerKind::kAttention)
      m.attn_layer_idx.push_back(static_cast<int64_t>(m.layer_kinds.size()) - 1);
  }
  read_mamba_prefixed_keys(r, m);
  read_split_attention(r, m);
  m.attention.softmax_scale = r.number("attention_multiplier", 0.0);
  const std::string pos = r.string("position_embedding_type", "rope");
  if (pos == "rope") {
    read_rope(r, m.attention);
  } else if (pos != "nope") {
    throw Error(cat(source, ": position_embedding_type '", pos, "' is not supported (rope or nope)"));
  }

  MoeConfig& e = m.moe;
  m.moe_mlp = true;
  e.d_model = m.d_model;
  e.experts = r.integer("num_local_experts", 0);
  e.top_k = r.positive("num_experts_per_tok", 1);
  e.expert_hidden = r.positive("intermediate_size", 0, true);
  e.shared_hidden = r.integer("shared_intermediate_size", 0);
  if (e.experts < 0 || e.shared_hidden < 0)
    throw Error(cat(source, ": num_local_experts and shared_intermediate_size must be >= 0"));
  if (e.experts > 0 && e.top_k > e.experts)
    throw Error(cat(source, ": num_experts_per_tok (", e.top_k, ") exceeds num_local_experts (", e.experts, ")"));
  if (e.experts == 0 && e.shared_hidden == 0)
    throw Error(cat(source, ": neither experts nor a shared MLP (num_local_experts and shared_intermediate_size are 0)"));
  return m;
}

}  // namespace ssm::config_detail
