// Tiny models of each mixer kind the GPU training tests run.
#pragma once

#include <string>

#include "train/tiny_model.h"

namespace ssm::testing {

// Tiny models of each mixer kind training runs through: tiny_config's
// Mamba-2, and Mamba-3 SISO, MIMO (rank 2, two groups, the output norm) and
// a hybrid (Mamba-3, grouped-query attention with partial rotary, MLPs).
inline ModelConfig tiny_kind_config(const std::string& kind) {
  if (kind == "mamba2") return tiny_config();
  const bool mimo = kind == "mamba3_mimo", hybrid = kind == "hybrid";
  Json ssm = {{"layer", "Mamba3"}, {"d_state", 8},           {"headdim", 8},
              {"expand", 2},       {"chunk_size", 8},        {"rope_fraction", 0.5},
              {"is_mimo", mimo},   {"is_outproj_norm", mimo}};
  if (mimo) {
    ssm["mimo_rank"] = 2;
    ssm["ngroups"] = 2;
  }
  const Json j = {{"d_model", 32},
                  {"n_layer", hybrid ? 3 : 2},
                  {"vocab_size", 64},
                  {"pad_vocab_size_multiple", 8},
                  {"d_intermediate", hybrid ? 64 : 0},
                  {"ssm_cfg", ssm},
                  {"tie_embeddings", true},
                  {"attn_layer_idx", hybrid ? Json::array({1}) : Json::array()},
                  {"attn_cfg", hybrid ? Json{{"causal", true},
                                             {"head_dim", 8},
                                             {"num_heads", 4},
                                             {"num_heads_kv", 2},
                                             {"rotary_emb_dim", 4}}
                                      : Json::object()}};
  return parse_model_config(j, "tiny " + kind + " test config");
}

inline LanguageModel tiny_kind_model(const std::string& kind, uint64_t seed) {
  LanguageModel m(tiny_kind_config(kind));
  initialize_model(m, seed);
  return m;
}

}  // namespace ssm::testing
