// FalconH1ForCausalLM: attention and Mamba-2 side by side in every layer,
// with the muP multipliers of its config.
#include <cmath>

#include "model/config_families.h"
#include "model/config_hf_common.h"

namespace ssm::config_detail {
namespace {

float multiplier(Reader& r, const char* key) {
  const double v = r.number(key, 1.0);
  if (!std::isfinite(v))
    throw Error(cat(r.where(), ": ", key, " must be a finite number, got ", v));
  return static_cast<float>(v);
}

// A list of exactly n finite multipliers (ssm_multipliers, mlp_multipliers).
std::vector<float> multipliers(Reader& r, const char* key, size_t n) {
  const Json& v = r.raw(key);
  if (v.is_null()) return std::vector<float>(n, 1.f);
  if (!v.is_array() || v.size() != n)
    throw Error(cat(r.where(), ": ", key, " must be a list of ", n, " numbers"));
  std::vector<float> out;
  for (const Json& e : v) {
    const double d = json_number(e, cat(r.where(), ": ", key));
    if (!std::isfinite(d))
      throw Error(cat(r.where(), ": ", key, " entries must be finite, got ", e.dump()));
    out.push_back(static_cast<float>(d));
  }
  return out;
}

}  // namespace

ModelConfig parse_hf_falcon_h1(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m = hf_decoder_config(
      r, "falcon_h1",
      hf_decoder_names("mamba.", "self_attn.", "feed_forward.", "pre_ff_layernorm.weight"), false,
      1e-5);
  read_hf_swiglu_mlp(r, m);

  // Every layer: Mamba-2 with attention beside it.
  m.layer_kinds.assign(static_cast<size_t>(m.n_layer), MixerKind::kMamba2);
  m.parallel_attention = true;
  for (int64_t i = 0; i < m.n_layer; ++i)
    m.attn_layer_idx.push_back(i);  // each layer has a KV cache

  read_mamba_prefixed_keys(r, m, [&](Mamba2Config& c) {
    // in_proj's bias is mamba_proj_bias, out_proj's projectors_bias: one flag here.
    if (r.boolean("projectors_bias", false) != c.proj_bias)
      throw Error(cat(source, ": mamba_proj_bias and projectors_bias differ (not supported)"));
    c.rmsnorm = r.boolean("mamba_rms_norm", false);
    c.norm_before_gate = r.boolean("mamba_norm_before_gate", true);
    if (!r.raw("mamba_d_ssm").is_null()) c.d_ssm = r.positive("mamba_d_ssm", 0);
  });
  Mamba2Config& c = m.mamba2;
  c.in_multiplier = multiplier(r, "ssm_in_multiplier");
  const std::vector<float> parts = multipliers(r, "ssm_multipliers", 5);
  std::copy(parts.begin(), parts.end(), c.part_multipliers.begin());

  read_split_attention(r, m);
  AttentionConfig& a = m.attention;
  read_rope(r, a);
  a.key_multiplier = multiplier(r, "key_multiplier");

  m.embedding_multiplier = multiplier(r, "embedding_multiplier");
  const float head = multiplier(r, "lm_head_multiplier");
  if (!(head > 0)) throw Error(cat(source, ": lm_head_multiplier must be positive, got ", head));
  m.logits_scaling = 1.f / head;
  m.attention_in_multiplier = multiplier(r, "attention_in_multiplier");
  m.attention_out_multiplier = multiplier(r, "attention_out_multiplier");
  m.ssm_out_multiplier = multiplier(r, "ssm_out_multiplier");
  const std::vector<float> mlp = multipliers(r, "mlp_multipliers", 2);
  m.mlp_gate_multiplier = mlp[0];
  m.mlp_down_multiplier = mlp[1];
  return m;
}

}  // namespace ssm::config_detail
