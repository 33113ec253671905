// Zamba2ForCausalLM: Mamba-2 layers, some of which first run a shared
// transformer block over [h | embeddings] with adapters of their own.
#include "model/config_families.h"
#include "model/config_hf_common.h"

namespace ssm::config_detail {

ModelConfig parse_hf_zamba2(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m =
      hf_decoder_config(r, "zamba2", hf_decoder_names("mamba.", "self_attn.", "", ""), true, 1e-5);
  if (r.boolean("add_bias_linear", false))
    throw Error(cat(source, ": add_bias_linear=true is not supported"));
  if (r.boolean("use_long_context", false))
    throw Error(cat(source, ": use_long_context=true (rescaled rope) is not supported"));

  // "hybrid" layers run the shared block, then their Mamba-2 mixer.
  const Json& types = r.raw("layers_block_type");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != m.n_layer)
    throw Error(cat(source, ": layers_block_type must list num_hidden_layers (", m.n_layer,
                    ") layer types"));
  for (const Json& t : types) {
    const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
    const int64_t i = static_cast<int64_t>(m.layer_kinds.size());
    if (s == "hybrid")
      m.shared_block_layers.push_back(i);
    else if (s != "mamba" && s != "linear_attention")
      throw Error(
          cat(source, ": layers_block_type: unknown layer type '", s, "' (mamba or hybrid)"));
    m.layer_kinds.push_back(MixerKind::kMamba2);
  }
  m.attn_layer_idx = m.shared_block_layers;  // each use keeps a KV cache

  Mamba2Config& c = m.mamba2;
  m.ssm_kind = MixerKind::kMamba2;
  c.d_model = m.d_model;
  c.d_state = r.positive("mamba_d_state", 64);
  c.d_conv = r.positive("mamba_d_conv", 4);
  c.expand = r.positive("mamba_expand", 2);
  c.ngroups = r.positive("mamba_ngroups", 1);
  c.chunk_size = r.positive("chunk_size", 256);
  c.conv_bias = r.boolean("use_conv_bias", true);
  const int64_t heads = r.positive("n_mamba_heads", 8);
  check_divides(source, "mamba_expand * hidden_size", c.d_inner(), "n_mamba_heads", heads);
  c.headdim = c.d_inner() / heads;
  if (r.positive("mamba_headdim", c.headdim) != c.headdim)
    throw Error(cat(source, ": mamba_headdim != mamba_expand * hidden_size / n_mamba_heads (",
                    c.headdim, ")"));
  c.norm_eps = 1e-5f;  // Zamba2's gated norm has its own fixed epsilon
  read_time_step_limit(r, c);
  validate_mamba2(c, source);

  SharedBlockConfig& s = m.shared_block;
  s.d_model = m.d_model;
  s.norm_eps = m.norm_eps;
  s.mlp_hidden = r.positive("intermediate_size", 4 * m.d_model);
  s.adapter_rank = r.positive("adapter_rank", 128);
  s.attention_adapters = r.boolean("use_shared_attention_adapter", false);
  const std::string act = r.string("hidden_act", "gelu");
  if (act != "gelu") throw Error(cat(source, ": hidden_act '", act, "' is not supported (gelu)"));
  m.shared_blocks = r.positive("num_mem_blocks", 1);

  AttentionConfig& a = s.attention;
  a.d_model = 2 * m.d_model;
  a.split_projections = true;
  a.qkv_proj_bias = a.out_proj_bias = false;
  a.num_heads = r.positive("num_attention_heads", 0, true);
  a.num_heads_kv = r.positive("num_key_value_heads", a.num_heads);
  check_divides(source, "num_attention_heads", a.num_heads, "num_key_value_heads", a.num_heads_kv);
  check_divides(source, "2 * hidden_size", a.d_model, "num_attention_heads", a.num_heads);
  a.head_dim = a.d_model / a.num_heads;
  if (r.positive("attention_head_dim", a.head_dim) != a.head_dim)
    throw Error(cat(source, ": attention_head_dim != 2 * hidden_size / num_attention_heads (",
                    a.head_dim, ")"));
  // The concatenated input doubles the width: scores are scaled by 1/sqrt(head_dim / 2).
  a.softmax_scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim) / 2.0);
  if (r.boolean("use_mem_rope", false)) read_rope(r, a);
  if (s.attention_adapters && a.num_heads_kv != a.num_heads)
    throw Error(cat(
        source,
        ": attention adapters with num_key_value_heads != num_attention_heads are not supported"));
  m.attention = a;  // for the KV cache's size
  r.ignore({"attention_hidden_size", "kv_channels", "num_query_groups", "hybrid_layer_ids"});
  return m;
}

}  // namespace ssm::config_detail
