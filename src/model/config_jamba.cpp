// JambaForCausalLM: Mamba-1 mixers with RMS norms (with weights) on dt, B
// and C, attention (grouped-query, no position embedding) every
// attn_layer_period layers from attn_layer_offset, and a mixture of experts
// in place of the SwiGLU MLP every expert_layer_period layers from
// expert_layer_offset.
#include "model/config_families.h"
#include "model/config_hf_common.h"

#include <algorithm>

namespace ssm::config_detail {
namespace {

// The layers i with i % period == offset; period and offset as the config
// names them, checked.
std::vector<int64_t> periodic_layers(Reader& r, const char* period_key, int64_t period_default,
                                     const char* offset_key, int64_t offset_default, int64_t n_layer) {
  const int64_t period = r.positive(period_key, period_default);
  const int64_t offset = r.integer(offset_key, offset_default);
  if (offset < 0 || offset >= period)
    throw Error(cat(r.where(), ": ", offset_key, " (", offset, ") must be in [0, ", period_key, " = ", period, ")"));
  std::vector<int64_t> out;
  for (int64_t i = offset; i < n_layer; i += period) out.push_back(i);
  return out;
}

void read_jamba_mamba(Reader& r, ModelConfig& m) {
  const std::string& source = r.where();
  Mamba1Config& c = m.mamba1;
  m.ssm_kind = MixerKind::kMamba1;
  c.d_model = m.d_model;
  c.d_inner = r.positive("mamba_expand", 2) * m.d_model;
  c.d_state = r.positive("mamba_d_state", 16);
  c.d_conv = r.positive("mamba_d_conv", 4);
  // "auto" is ceil(hidden_size / 16), as transformers defines it.
  const Json& rank = r.raw("mamba_dt_rank");
  if (rank.is_null() || (rank.is_string() && rank.get<std::string>() == "auto"))
    c.dt_rank = (m.d_model + 15) / 16;
  else if (rank.is_number())
    c.dt_rank = r.positive("mamba_dt_rank", 0);
  else
    throw Error(cat(source, ": mamba_dt_rank must be a positive integer or \"auto\", got ", rank.dump()));
  c.conv_bias = r.boolean("mamba_conv_bias", true);
  c.proj_bias = r.boolean("mamba_proj_bias", false);
  c.bcdt_norm = true;
  c.bcdt_norm_weights = true;
  c.bcdt_eps = m.norm_eps;
  if (c.d_inner > kMaxConfigInteger / std::max<int64_t>(c.d_state, c.d_x_proj()))
    throw Error(cat(source, ": mamba_expand * hidden_size (", c.d_inner, ") times mamba_d_state is too large"));
}

}  // namespace

ModelConfig parse_hf_jamba(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m = hf_decoder_config(
      r, "jamba",
      hf_decoder_names("mamba.", "self_attn.", "feed_forward.", "pre_ff_layernorm.weight"), false,
      1e-6);
  read_hf_swiglu_mlp(r, m);
  read_jamba_mamba(r, m);

  m.attn_layer_idx = periodic_layers(r, "attn_layer_period", 8, "attn_layer_offset", 4, m.n_layer);
  AttentionConfig& a = m.attention;
  a.d_model = m.d_model;
  a.split_projections = true;
  a.num_heads = r.positive("num_attention_heads", 0, true);
  a.num_heads_kv = r.positive("num_key_value_heads", a.num_heads);
  check_divides(source, "hidden_size", m.d_model, "num_attention_heads", a.num_heads);
  check_divides(source, "num_attention_heads", a.num_heads, "num_key_value_heads", a.num_heads_kv);
  a.head_dim = m.d_model / a.num_heads;
  a.qkv_proj_bias = a.out_proj_bias = false;
  a.rotary_emb_dim = 0;  // Jamba's attention has no position embedding

  // Jamba's experts are SwiGLU MLPs of intermediate_size; one expert means
  // a plain MLP everywhere.
  SparseMoeConfig& e = m.sparse_moe;
  e.style = SparseMoeConfig::Style::kJamba;
  e.d_model = m.d_model;
  e.experts = r.positive("num_experts", 16);
  e.top_k = r.positive("num_experts_per_tok", 2);
  e.expert_hidden = m.d_intermediate;
  if (e.top_k > e.experts)
    throw Error(cat(source, ": num_experts_per_tok (", e.top_k, ") exceeds num_experts (", e.experts, ")"));
  const std::vector<int64_t> moe =
      periodic_layers(r, "expert_layer_period", 2, "expert_layer_offset", 1, m.n_layer);
  if (e.experts > 1) m.sparse_moe_layers = moe;
  return m;
}

}  // namespace ssm::config_detail
