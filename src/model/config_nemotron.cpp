#include "model/config_families.h"
#include "model/config_hf_common.h"

#include <algorithm>
#include <cmath>

namespace ssm::config_detail {
namespace {

// layers_block_type (transformers 5) names, or the characters of the older
// hybrid_override_pattern ("M-M*-"): M Mamba-2, * attention, - MLP, E MoE.
MixerKind block_kind(const std::string& name, const std::string& where) {
  if (name == "mamba" || name == "linear_attention" || name == "M") return MixerKind::kMamba2;
  if (name == "attention" || name == "full_attention" || name == "*") return MixerKind::kAttention;
  if (name == "mlp" || name == "-") return MixerKind::kMlp;
  if (name == "moe" || name == "E") return MixerKind::kMoe;
  throw Error(cat(where, ": unknown layer type '", name, "'"));
}

// The layer kinds; their count is the layer count (num_hidden_layers, where
// a config has it, must agree).
std::vector<MixerKind> block_kinds(Reader& r) {
  std::vector<MixerKind> kinds;
  const Json& list = r.raw("layers_block_type");
  const Json& pattern = r.raw("hybrid_override_pattern");
  if (list.is_array()) {
    for (const Json& e : list) {
      if (!e.is_string()) throw Error(cat(r.where(), ": layers_block_type entries must be strings"));
      kinds.push_back(block_kind(e.get<std::string>(), r.where() + ": layers_block_type"));
    }
  } else if (pattern.is_string()) {
    for (char ch : pattern.get<std::string>())
      kinds.push_back(block_kind(std::string(1, ch), r.where() + ": hybrid_override_pattern"));
  } else {
    throw Error(cat(r.where(), ": missing layers_block_type (or hybrid_override_pattern)"));
  }
  const int64_t n_layer = r.integer("num_hidden_layers", static_cast<int64_t>(kinds.size()));
  if (kinds.empty() || static_cast<int64_t>(kinds.size()) != n_layer)
    throw Error(cat(r.where(), ": ", kinds.size(), " layer types for num_hidden_layers ", n_layer));
  return kinds;
}

// The MoE layers' keys (Nemotron 3 Nano): a sigmoid router with a selection
// bias over n_routed_experts relu² experts, optionally by groups, and one
// relu² shared expert.
void read_moe(Reader& r, ModelConfig& m) {
  const std::string& source = r.where();
  SparseMoeConfig& e = m.sparse_moe;
  e.style = SparseMoeConfig::Style::kNemotronH;
  e.d_model = m.d_model;
  e.experts = r.positive("n_routed_experts", 0, true);
  e.top_k = r.positive("num_experts_per_tok", 1);
  e.expert_hidden = r.positive("moe_intermediate_size", 0, true);
  e.shared_hidden = r.positive("moe_shared_expert_intermediate_size", 0, true);
  e.normalize = r.boolean("norm_topk_prob", true);
  const double scale = r.number("routed_scaling_factor", 1.0);
  if (!(scale > 0) || !std::isfinite(scale))
    throw Error(cat(source, ": routed_scaling_factor must be a positive finite number, got ", scale));
  e.scale = static_cast<float>(scale);
  e.n_group = r.positive("n_group", 1);
  e.topk_group = r.positive("topk_group", 1);
  if (e.top_k > e.experts)
    throw Error(cat(source, ": num_experts_per_tok (", e.top_k, ") exceeds n_routed_experts (", e.experts, ")"));
  if (e.experts % e.n_group != 0)
    throw Error(cat(source, ": n_group (", e.n_group, ") does not divide n_routed_experts (", e.experts, ")"));
  if (e.topk_group > e.n_group)
    throw Error(cat(source, ": topk_group (", e.topk_group, ") exceeds n_group (", e.n_group, ")"));
  if (e.n_group > 1 && e.experts / e.n_group < 2)
    throw Error(cat(source, ": n_group (", e.n_group, ") leaves groups of one expert (each group is scored by its best two)"));
  if (e.topk_group * (e.experts / e.n_group) < e.top_k)
    throw Error(cat(source, ": topk_group (", e.topk_group, ") groups hold fewer than num_experts_per_tok (",
                    e.top_k, ") experts"));
  if (!r.raw("moe_latent_size").is_null())
    throw Error(cat(source, ": moe_latent_size (latent expert projections) is not supported"));
}

}  // namespace

ModelConfig parse_hf_nemotron_h(const Json& j, const std::string& source) {
  Reader r(j, source);
  ModelConfig m;
  m.convention = Convention::kHuggingFace;
  m.family = "nemotron_h";
  m.names.embedding = "backbone.embeddings.weight";  // the rest as state-spaces names them
  m.names.attention = m.names.ssm = "mixer.";
  m.d_model = r.positive("hidden_size", 0, true);
  m.layer_kinds = block_kinds(r);
  m.n_layer = static_cast<int64_t>(m.layer_kinds.size());
  m.vocab_size = r.positive("vocab_size", 0, true);
  m.tie_embeddings = r.boolean("tie_word_embeddings", false);
  m.norm_eps = static_cast<float>(r.number("layer_norm_epsilon", 1e-5));
  for (int64_t i = 0; i < m.n_layer; ++i)
    if (m.layer_kinds[static_cast<size_t>(i)] == MixerKind::kAttention) m.attn_layer_idx.push_back(i);
  m.mlp_as_layers = true;
  m.d_intermediate = r.positive("intermediate_size", 0, true);
  const std::string mlp_act = r.string("mlp_hidden_act", "relu2");
  if (mlp_act != "relu2") throw Error(cat(source, ": mlp_hidden_act '", mlp_act, "' is not supported (relu2)"));
  if (r.boolean("mlp_bias", false)) throw Error(cat(source, ": mlp_bias=true is not supported"));
  require_silu(r, "mamba_hidden_act");

  // The inner width is mamba_num_heads * mamba_head_dim; expand must agree
  // with it.
  const Mamba2Keys keys{"ssm_state_size",  128,
                        "conv_kernel",     "expand",
                        "mamba_head_dim",  "n_groups",
                        "chunk_size",      "use_conv_bias",
                        "mamba_proj_bias", r.boolean("use_bias", false),
                        "mamba_num_heads", true};
  read_mamba2_keys(r, m, keys);

  read_split_attention(r, m);
  m.attention.rotary_emb_dim = 0;  // Nemotron-H's attention has no position embedding
  if (std::find(m.layer_kinds.begin(), m.layer_kinds.end(), MixerKind::kMoe) != m.layer_kinds.end())
    read_moe(r, m);
  return m;
}

}  // namespace ssm::config_detail
