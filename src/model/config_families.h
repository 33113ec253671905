// The parsers of the HF hybrid families' config.json, one per model_type.
#pragma once

#include <string>

#include "ssm/model/config.h"

namespace ssm::config_detail {

// BambaForCausalLM: Mamba-2 layers, attention at attn_layer_indices, a
// SwiGLU MLP in every layer, HF's tensor names.
ModelConfig parse_hf_bamba(const Json& j, const std::string& source);

// GraniteMoeHybridForCausalLM: layer_types of Mamba-2 and attention (no
// position embedding or rope), a mixture-of-experts MLP with a shared
// expert in every layer, the embedding/residual/attention/logit multipliers.
ModelConfig parse_hf_granite_hybrid(const Json& j, const std::string& source);

// NemotronHForCausalLM: a list (or pattern) of layer kinds, each layer one
// of Mamba-2 (n_groups with its grouped norm), attention without position
// embedding, or a relu² MLP, under one norm each.
ModelConfig parse_hf_nemotron_h(const Json& j, const std::string& source);

// JambaForCausalLM: Mamba-1 (normed dt, B, C) and periodic attention
// layers, a softmax-routed mixture of experts every few layers.
ModelConfig parse_hf_jamba(const Json& j, const std::string& source);

// FalconH1ForCausalLM: Mamba-2 and attention side by side in every layer,
// a SwiGLU MLP, muP multipliers throughout.
ModelConfig parse_hf_falcon_h1(const Json& j, const std::string& source);

// Zamba2ForCausalLM: Mamba-2 layers; "hybrid" ones first run a shared
// attention/MLP block over [h | embeddings] with their own adapters.
ModelConfig parse_hf_zamba2(const Json& j, const std::string& source);

}  // namespace ssm::config_detail
