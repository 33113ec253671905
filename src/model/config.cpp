#include "ssm/model/config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "model/config_families.h"
#include "model/config_reader.h"
#include "ssm/core/log.h"

namespace ssm {
namespace {

using namespace config_detail;

void validate_mamba3(const Mamba3Config& c, const std::string& where) {
  check_divides(where, "d_inner = expand * d_model", c.d_inner(), "headdim", c.headdim);
  check_divides(where, "nheads", c.nheads(), "ngroups", c.ngroups);
  if (!(c.rope_fraction >= 0 && c.rope_fraction <= 1))  // NaN too
    throw Error(cat(where, ": rope_fraction must be in [0, 1], got ", c.rope_fraction));
  if (c.is_mimo && c.mimo_rank <= 0) throw Error(cat(where, ": mimo_rank must be positive"));
  if (c.rank() * c.ngroups > kMaxConfigInteger)  // in_proj holds rank * ngroups * d_state columns
    throw Error(cat(where, ": mimo_rank * ngroups (", c.rank() * c.ngroups, ") exceeds ", kMaxConfigInteger));
  if (c.A_floor < 0) throw Error(cat(where, ": A_floor must be non-negative"));
}

ModelConfig parse_state_spaces(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m;
  m.convention = Convention::kStateSpaces;
  m.d_model = r.positive("d_model", 0, true);
  m.n_layer = r.positive("n_layer", 0, true);
  m.vocab_size = r.positive("vocab_size", 0, true);
  m.pad_vocab_size_multiple = r.positive("pad_vocab_size_multiple", 8);
  m.d_intermediate = r.integer("d_intermediate", 0);
  if (m.d_intermediate < 0) throw Error(cat(source, ": d_intermediate must be >= 0"));
  m.rms_norm = r.boolean("rms_norm", true);
  m.residual_in_fp32 = r.boolean("residual_in_fp32", true);
  m.tie_embeddings = r.boolean("tie_embeddings", true);
  m.norm_eps = static_cast<float>(r.number("norm_epsilon", 1e-5));
  // "tokenizer": "bytes" marks a byte-level model; the tokenizer's loader
  // reads it (tokenizer.cpp), and the error that asks for it must not be
  // followed by a warning that it is ignored.
  r.ignore({"fused_add_norm", "tokenizer"});
  if (!m.rms_norm) throw Error(cat(source, ": rms_norm=false (LayerNorm) is not supported"));

  const Json& attn_idx = r.raw("attn_layer_idx");
  if (!attn_idx.is_null()) {
    if (!attn_idx.is_array()) throw Error(cat(source, ": attn_layer_idx must be a list"));
    for (const Json& v : attn_idx) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= m.n_layer)
        throw Error(cat(source, ": attn_layer_idx entry ", v.dump(), " is not a layer index"));
      m.attn_layer_idx.push_back(v.get<int64_t>());
    }
  }

  Reader s(r.object("ssm_cfg"), source + ": ssm_cfg");
  const std::string layer = s.string("layer", "Mamba1");
  s.ignore({"use_mem_eff_path", "dt_init", "dt_scale", "dt_init_floor", "dt_min", "dt_max",
            "A_init_range", "layer_idx", "process_group", "sequence_parallel", "d_ssm",
            "D_has_hdim", "activation", "dt_limit"});
  if (layer == "Mamba2") {
    m.ssm_kind = MixerKind::kMamba2;
    Mamba2Config& c = m.mamba2;
    c.d_model = m.d_model;
    c.d_state = s.positive("d_state", 128);
    c.d_conv = s.positive("d_conv", 4);
    c.expand = s.positive("expand", 2);
    c.headdim = s.positive("headdim", 64);
    c.ngroups = s.positive("ngroups", 1);
    c.chunk_size = s.positive("chunk_size", 256);
    c.rmsnorm = s.boolean("rmsnorm", true);
    c.norm_before_gate = s.boolean("norm_before_gate", false);
    c.proj_bias = s.boolean("bias", false);
    c.conv_bias = s.boolean("conv_bias", true);
    c.dt_min = s.number("dt_min", 0.001);
    c.dt_max = s.number("dt_max", 0.1);
    c.dt_init_floor = s.number("dt_init_floor", 1e-4);
    c.norm_eps = m.norm_eps;
    const Json& lim = r.object("ssm_cfg").contains("dt_limit") ? r.object("ssm_cfg")["dt_limit"] : Json();
    if (!lim.is_null()) {
      if (!lim.is_array() || lim.size() != 2) throw Error(cat(source, ": ssm_cfg.dt_limit must be a pair"));
      c.dt_limit_lo = json_number(lim[0], source + ": ssm_cfg.dt_limit");
      c.dt_limit_hi = json_number(lim[1], source + ": ssm_cfg.dt_limit");
    }
    const Json& cfg = r.object("ssm_cfg");
    if (cfg.contains("D_has_hdim") && cfg["D_has_hdim"] == true)
      throw Error(cat(source, ": ssm_cfg.D_has_hdim=true is not supported"));
    if (cfg.contains("d_ssm") && !cfg["d_ssm"].is_null() && cfg["d_ssm"] != c.d_inner())
      throw Error(cat(source, ": ssm_cfg.d_ssm different from d_inner is not supported"));
    validate_mamba2(c, source + ": ssm_cfg");
  } else if (layer == "Mamba3") {
    m.ssm_kind = MixerKind::kMamba3;
    Mamba3Config& c = m.mamba3;
    c.d_model = m.d_model;
    c.d_state = s.positive("d_state", 128);
    c.expand = s.positive("expand", 2);
    c.headdim = s.positive("headdim", 64);
    c.ngroups = s.positive("ngroups", 1);
    c.rope_fraction = s.number("rope_fraction", 0.5);
    c.A_floor = s.number("A_floor", 1e-4);
    c.is_outproj_norm = s.boolean("is_outproj_norm", false);
    c.is_mimo = s.boolean("is_mimo", false);
    c.mimo_rank = s.positive("mimo_rank", 4);
    c.chunk_size = s.positive("chunk_size", 64);
    c.dt_min = s.number("dt_min", 0.001);
    c.dt_max = s.number("dt_max", 0.1);
    c.dt_init_floor = s.number("dt_init_floor", 1e-4);
    c.norm_eps = m.norm_eps;
    validate_mamba3(c, source + ": ssm_cfg");
  } else {
    throw Error(cat(source, ": ssm_cfg.layer '", layer, "' is not supported (Mamba2 or Mamba3)"));
  }
  s.warn_unknown();

  Reader a(r.object("attn_cfg"), source + ": attn_cfg");
  AttentionConfig& ac = m.attention;
  ac.d_model = m.d_model;
  if (!m.attn_layer_idx.empty()) {
    ac.num_heads = a.positive("num_heads", 0, true);
    ac.num_heads_kv = a.positive("num_heads_kv", ac.num_heads);
    ac.head_dim = a.positive("head_dim", m.d_model / ac.num_heads);
    ac.rotary_emb_dim = a.integer("rotary_emb_dim", 0);
    ac.rotary_emb_base = a.number("rotary_emb_base", 10000.0);
    ac.qkv_proj_bias = a.boolean("qkv_proj_bias", true);
    ac.out_proj_bias = a.boolean("out_proj_bias", true);
    ac.causal = a.boolean("causal", true);
    ac.softmax_scale = a.number("softmax_scale", 0.0);
    a.ignore({"mlp_dim", "d_conv"});
    // Interleaved rotary pairs (2i, 2i+1) are not what SPEC §5 defines.
    if (a.boolean("rotary_emb_interleaved", false))
      throw Error(cat(source, ": attn_cfg.rotary_emb_interleaved=true is not supported"));
    check_divides(source + ": attn_cfg", "num_heads", ac.num_heads, "num_heads_kv", ac.num_heads_kv);
    if (ac.rotary_emb_dim < 0 || ac.rotary_emb_dim % 2 != 0 || ac.rotary_emb_dim > ac.head_dim)
      throw Error(cat(source, ": attn_cfg.rotary_emb_dim must be even and at most head_dim"));
    if (!ac.causal) throw Error(cat(source, ": attn_cfg.causal=false is not supported by a language model"));
    a.warn_unknown();
  }
  r.warn_unknown();
  return m;
}

ModelConfig parse_hugging_face(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m;
  m.convention = Convention::kHuggingFace;
  m.names.embedding = "backbone.embeddings.weight";
  m.d_model = r.positive("hidden_size", 0, true);
  m.n_layer = r.positive("num_hidden_layers", 0, true);
  m.vocab_size = r.positive("vocab_size", 0, true);
  m.pad_vocab_size_multiple = 1;
  m.tie_embeddings = r.boolean("tie_word_embeddings", true);
  m.norm_eps = static_cast<float>(r.number("layer_norm_epsilon", 1e-5));
  m.residual_in_fp32 = r.boolean("residual_in_fp32", true);
  m.ssm_kind = MixerKind::kMamba2;
  Mamba2Config& c = m.mamba2;
  c.d_model = m.d_model;
  c.d_state = r.positive("state_size", 128);
  c.d_conv = r.positive("conv_kernel", 4);
  c.expand = r.positive("expand", 2);
  c.headdim = r.positive("head_dim", 64);
  c.ngroups = r.positive("n_groups", 1);
  c.chunk_size = r.positive("chunk_size", 256);
  c.proj_bias = r.boolean("use_bias", false);
  c.conv_bias = r.boolean("use_conv_bias", true);
  c.rmsnorm = r.boolean("rms_norm", true);
  c.norm_before_gate = r.boolean("norm_before_gate", false);
  c.dt_min = r.number("time_step_min", 0.001);
  c.dt_max = r.number("time_step_max", 0.1);
  c.dt_init_floor = r.number("time_step_floor", 1e-4);
  c.norm_eps = m.norm_eps;
  if (r.has("time_step_limit")) {
    const Json& lim = r.raw("time_step_limit");
    if (!lim.is_array() || lim.size() != 2)
      throw Error(cat(source, ": time_step_limit must be a pair of numbers"));
    c.dt_limit_lo = json_number(lim[0], source + ": time_step_limit");
    c.dt_limit_hi = json_number(lim[1], source + ": time_step_limit");
  }
  const int64_t num_heads = r.positive("num_heads", c.nheads());
  validate_mamba2(c, source);
  if (num_heads != c.nheads())
    throw Error(cat(source, ": num_heads (", num_heads, ") != expand * hidden_size / head_dim (",
                    c.nheads(), ")"));
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu") throw Error(cat(source, ": hidden_act '", act, "' is not supported (silu)"));
  return m;  // HF configs carry many generic keys; unknown ones are not worth a warning.
}

// MambaForCausalLM and FalconMambaForCausalLM: every layer a Mamba-1 mixer.
ModelConfig parse_hf_mamba1(const Json& j, const std::string& source, const std::string& family) {
  Reader r(j, source);
  ModelConfig m;
  m.convention = Convention::kHuggingFace;
  m.family = family;
  m.names.embedding = "backbone.embeddings.weight";
  m.d_model = r.positive("hidden_size", 0, true);
  m.n_layer = r.positive("num_hidden_layers", 0, true);
  m.vocab_size = r.positive("vocab_size", 0, true);
  m.pad_vocab_size_multiple = 1;
  m.tie_embeddings = r.boolean("tie_word_embeddings", true);
  m.norm_eps = static_cast<float>(r.number("layer_norm_epsilon", 1e-5));
  m.residual_in_fp32 = r.boolean("residual_in_fp32", true);
  m.ssm_kind = MixerKind::kMamba1;
  Mamba1Config& c = m.mamba1;
  c.d_model = m.d_model;
  const int64_t expand = r.positive("expand", 2);
  c.d_inner = r.positive("intermediate_size", expand * m.d_model);
  c.d_state = r.positive("state_size", 16);
  c.d_conv = r.positive("conv_kernel", 4);
  // "auto" is ceil(d_model / 16), as mamba_ssm and transformers define it.
  const Json& rank = r.raw("time_step_rank");
  if (rank.is_string() && rank.get<std::string>() == "auto")
    c.dt_rank = (m.d_model + 15) / 16;
  else if (!rank.is_null() && !rank.is_string())
    c.dt_rank = r.positive("time_step_rank", 0);
  else if (rank.is_null())
    c.dt_rank = (m.d_model + 15) / 16;
  else
    throw Error(cat(source, ": time_step_rank must be a positive integer or \"auto\", got ", rank.dump()));
  c.proj_bias = r.boolean("use_bias", false);
  c.conv_bias = r.boolean("use_conv_bias", true);
  c.bcdt_norm = family == "falcon_mamba";
  c.bcdt_eps = static_cast<float>(r.number("mixer_rms_eps", 1e-6));
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu") throw Error(cat(source, ": hidden_act '", act, "' is not supported (silu)"));
  if (c.d_inner > kMaxConfigInteger / std::max<int64_t>(c.d_state, c.d_x_proj()))
    throw Error(cat(source, ": intermediate_size (", c.d_inner, ") times state_size is too large"));
  return m;
}

}  // namespace

MixerKind ModelConfig::mixer_kind(int64_t layer) const {
  if (!layer_kinds.empty()) return layer_kinds.at(static_cast<size_t>(layer));
  for (int64_t i : attn_layer_idx)
    if (i == layer) return MixerKind::kAttention;
  return ssm_kind;
}

std::string ModelConfig::embedding_name() const { return names.embedding; }

std::string ModelConfig::layer_prefix(int64_t layer) const {
  return cat(names.layers, layer, ".", shared_use(layer) >= 0 ? "mamba_decoder." : "");
}

int64_t ModelConfig::shared_use(int64_t layer) const {
  const auto it = std::find(shared_block_layers.begin(), shared_block_layers.end(), layer);
  return it == shared_block_layers.end() ? -1 : it - shared_block_layers.begin();
}

std::string ModelConfig::mixer_prefix(int64_t layer) const {
  return layer_prefix(layer) + (mixer_kind(layer) == MixerKind::kAttention ? names.attention : names.ssm);
}

ModelConfig parse_model_config(const Json& j, const std::string& source) {
  if (!j.is_object()) throw Error(cat(source, ": config must be a JSON object"));
  const Json& type = j.contains("model_type") ? j["model_type"] : Json();
  const std::string model_type = type.is_string() ? type.get<std::string>() : "";
  ModelConfig m;
  if (model_type == "mamba" || model_type == "falcon_mamba") {
    m = parse_hf_mamba1(j, source, model_type);
  } else if (model_type == "bamba") {
    m = config_detail::parse_hf_bamba(j, source);
  } else if (model_type == "granitemoehybrid") {
    m = config_detail::parse_hf_granite_hybrid(j, source);
  } else if (model_type == "nemotron_h") {
    m = config_detail::parse_hf_nemotron_h(j, source);
  } else if (model_type == "jamba") {
    m = config_detail::parse_hf_jamba(j, source);
  } else if (model_type == "falcon_h1") {
    m = config_detail::parse_hf_falcon_h1(j, source);
  } else if (model_type == "zamba2") {
    m = config_detail::parse_hf_zamba2(j, source);
  } else {
    const bool hf = j.contains("hidden_size") || model_type == "mamba2";
    m = hf ? parse_hugging_face(j, source) : parse_state_spaces(j, source);
    if (hf) m.family = "mamba2";
  }
  m.source = j;
  return m;
}

ModelConfig load_model_config(const std::filesystem::path& config_json) {
  return parse_model_config(load_json_file(config_json), config_json.string());
}

}  // namespace ssm
