// What the HF hybrid families' configs share: their tensor names, layer
// index lists, rotary settings, dt limits.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/config_reader.h"
#include "ssm/model/config.h"

namespace ssm::config_detail {

// The HF decoder-layer names most hybrids share (model.layers.i.*).
inline TensorNames hf_decoder_names(const char* ssm, const char* attention, const char* mlp,
                             const char* mlp_norm) {
  TensorNames n;
  n.embedding = "model.embed_tokens.weight";
  n.final_norm = "model.final_layernorm.weight";
  n.layers = "model.layers.";
  n.mixer_norm = "input_layernorm.weight";
  n.mlp_norm = mlp_norm;
  n.ssm = ssm;
  n.attention = attention;
  n.mlp = mlp;
  return n;
}

// The keys every HF decoder family reads alike. The defaults of the tied
// head and the norm epsilon differ per family, as transformers' config
// classes set them.
inline ModelConfig hf_decoder_config(Reader& r, const char* family, TensorNames names,
                                     bool tie_default, double norm_eps_default) {
  ModelConfig m;
  m.convention = Convention::kHuggingFace;
  m.family = family;
  m.names = std::move(names);
  m.d_model = r.positive("hidden_size", 0, true);
  m.n_layer = r.positive("num_hidden_layers", 0, true);
  m.vocab_size = r.positive("vocab_size", 0, true);
  m.tie_embeddings = r.boolean("tie_word_embeddings", tie_default);
  m.norm_eps = static_cast<float>(r.number("rms_norm_eps", norm_eps_default));
  return m;
}

inline std::vector<int64_t> layer_indices(Reader& r, const char* key, int64_t n_layer) {
  std::vector<int64_t> out;
  const Json& v = r.raw(key);
  if (v.is_null()) return out;
  if (!v.is_array()) throw Error(cat(r.where(), ": ", key, " must be a list of layer indices"));
  for (const Json& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= n_layer)
      throw Error(cat(r.where(), ": ", key, " entry ", e.dump(), " is not a layer index below ", n_layer));
    out.push_back(e.get<int64_t>());
  }
  return out;
}

// rope_theta and partial_rotary_factor, from rope_parameters (transformers
// 5) or the top level (older configs).
inline void read_rope(Reader& r, AttentionConfig& a) {
  double theta = r.number("rope_theta", 10000.0), partial = r.number("partial_rotary_factor", 1.0);
  const Json& rp = r.raw("rope_parameters");
  if (rp.is_object()) {
    Reader p(rp, r.where() + ": rope_parameters");
    theta = p.number("rope_theta", theta);
    partial = p.number("partial_rotary_factor", partial);
    const std::string type = p.string("rope_type", "default");
    if (type != "default")
      throw Error(cat(r.where(), ": rope_parameters.rope_type '", type, "' is not supported (default)"));
  }
  if (!(partial >= 0 && partial <= 1))
    throw Error(cat(r.where(), ": partial_rotary_factor must be in [0, 1], got ", partial));
  a.rotary_emb_base = theta;
  a.rotary_emb_dim = static_cast<int64_t>(static_cast<double>(a.head_dim) * partial);
  if (a.rotary_emb_dim % 2 != 0)
    throw Error(cat(r.where(), ": head_dim * partial_rotary_factor (", a.rotary_emb_dim, ") must be even"));
}

inline void read_time_step_limit(Reader& r, Mamba2Config& c) {
  if (!r.has("time_step_limit")) return;
  const Json& lim = r.raw("time_step_limit");
  if (!lim.is_array() || lim.size() != 2)
    throw Error(cat(r.where(), ": time_step_limit must be a pair of numbers"));
  c.dt_limit_lo = json_number(lim[0], r.where() + ": time_step_limit");
  c.dt_limit_hi = json_number(lim[1], r.where() + ": time_step_limit");
  if (c.dt_limit_lo > c.dt_limit_hi) throw Error(cat(r.where(), ": time_step_limit lower bound exceeds upper"));
}

// The keys a family names a Mamba-2's settings with, and the defaults its
// transformers config class gives them.
struct Mamba2Keys {
  const char* d_state;
  int64_t d_state_default;
  const char *d_conv, *expand, *head_dim, *n_groups, *chunk_size, *conv_bias, *proj_bias;
  bool proj_bias_default;
  const char* n_heads;
  bool n_heads_required;  // else it defaults to the inner width / head_dim
};

// Bamba, Granite 4.0-H and Falcon-H1: mamba_*.
inline constexpr Mamba2Keys kMambaPrefixedKeys{"mamba_d_state",    256,
                                               "mamba_d_conv",     "mamba_expand",
                                               "mamba_d_head",     "mamba_n_groups",
                                               "mamba_chunk_size", "mamba_conv_bias",
                                               "mamba_proj_bias",  false,
                                               "mamba_n_heads",    false};

// A family's Mamba-2 keys into m.mamba2; `more` reads a family's own keys
// before the whole is validated. The head count must agree with the inner
// width.
inline void read_mamba2_keys(Reader& r, ModelConfig& m, const Mamba2Keys& k,
                             const std::function<void(Mamba2Config&)>& more = {}) {
  const std::string& source = r.where();
  Mamba2Config& c = m.mamba2;
  m.ssm_kind = MixerKind::kMamba2;
  c.d_model = m.d_model;
  c.d_state = r.positive(k.d_state, k.d_state_default);
  c.d_conv = r.positive(k.d_conv, 4);
  c.expand = r.positive(k.expand, 2);
  c.headdim = r.positive(k.head_dim, 64);
  c.ngroups = r.positive(k.n_groups, 1);
  c.chunk_size = r.positive(k.chunk_size, 256);
  c.conv_bias = r.boolean(k.conv_bias, true);
  c.proj_bias = r.boolean(k.proj_bias, k.proj_bias_default);
  c.norm_eps = m.norm_eps;
  if (more) more(c);
  read_time_step_limit(r, c);
  validate_mamba2(c, source);
  const int64_t heads = r.positive(k.n_heads, c.nheads(), k.n_heads_required);
  if (heads != c.nheads())
    throw Error(cat(source, ": ", k.n_heads, " (", heads, ") != the inner width / ", k.head_dim,
                    " (", c.nheads(), ")"));
}

inline void read_mamba_prefixed_keys(Reader& r, ModelConfig& m,
                                     const std::function<void(Mamba2Config&)>& more = {}) {
  read_mamba2_keys(r, m, kMambaPrefixedKeys, more);
}

// Attention with split q/k/v/o projections from num_attention_heads and
// friends (rotary settings apart: the families differ there).
inline void read_split_attention(Reader& r, ModelConfig& m) {
  AttentionConfig& a = m.attention;
  a.d_model = m.d_model;
  a.split_projections = true;
  a.num_heads = r.positive("num_attention_heads", 0, true);
  a.num_heads_kv = r.positive("num_key_value_heads", a.num_heads);
  a.head_dim = r.positive("head_dim", m.d_model / a.num_heads);
  a.qkv_proj_bias = a.out_proj_bias = r.boolean("attention_bias", false);
  check_divides(r.where(), "num_attention_heads", a.num_heads, "num_key_value_heads", a.num_heads_kv);
}

inline void require_silu(Reader& r, const char* key) {
  const std::string act = r.string(key, "silu");
  if (act != "silu") throw Error(cat(r.where(), ": ", key, " '", act, "' is not supported (silu)"));
}

// The SwiGLU MLP of intermediate_size (SiLU gate, no bias).
inline void read_hf_swiglu_mlp(Reader& r, ModelConfig& m) {
  m.d_intermediate = r.positive("intermediate_size", 0, true);
  m.hf_mlp = true;
  if (r.boolean("mlp_bias", false)) throw Error(cat(r.where(), ": mlp_bias=true is not supported"));
  require_silu(r, "hidden_act");
}

}  // namespace ssm::config_detail
