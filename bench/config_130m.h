// The 130m shape of the published Mamba checkpoints (d_model 768, 24
// layers, d_state 128, headdim 64), for the prefill and decode benchmarks.
#pragma once

#include <string>

#include "ssm/io/json.h"
#include "ssm/model/language_model.h"

namespace ssm::bench {

// layer: "Mamba2" or "Mamba3"; mimo: Mamba-3 with rank 4.
inline ModelConfig config_130m(const std::string& layer, bool mimo = false) {
  Json ssm_cfg = {{"layer", layer}, {"d_state", 128}, {"headdim", 64}, {"expand", 2}};
  if (mimo) {
    ssm_cfg["is_mimo"] = true;
    ssm_cfg["mimo_rank"] = 4;
  }
  const Json j = {{"d_model", 768},
                  {"n_layer", 24},
                  {"vocab_size", 50277},  // padded to 50288 like the published checkpoints
                  {"pad_vocab_size_multiple", 16},
                  {"d_intermediate", 0},
                  {"ssm_cfg", ssm_cfg},
                  {"attn_layer_idx", Json::array()},
                  {"attn_cfg", Json::object()},
                  {"rms_norm", true},
                  {"residual_in_fp32", true},
                  {"fused_add_norm", true},
                  {"tie_embeddings", true}};
  return parse_model_config(j, "bench " + layer);
}

}  // namespace ssm::bench
