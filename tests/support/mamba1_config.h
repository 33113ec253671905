// The config.json of a Mamba-1 in the HF convention (MambaForCausalLM, as
// state-spaces' mamba-130m ... mamba-2.8b publish it) of a given size: what
// the tests of `ssm init` and of loading write before making a model.
#pragma once

#include <cstdint>
#include <string>

#include "ssm/core/error.h"

namespace ssm::testing {

struct Mamba1Size {
  int64_t hidden = 128, layers = 4, vocab = 1024;
  bool tied = true;
};

inline std::string mamba1_hf_config(const Mamba1Size& s) {
  return cat(R"({"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": )",
             s.hidden, R"(, "num_hidden_layers": )", s.layers, R"(, "vocab_size": )", s.vocab,
             R"(, "state_size": 16, "expand": 2, "conv_kernel": 4, "time_step_rank": "auto",
  "use_bias": false, "use_conv_bias": true, "hidden_act": "silu", "layer_norm_epsilon": 1e-5,
  "residual_in_fp32": true, "tie_word_embeddings": )",
             s.tied ? "true" : "false", "}");
}

}  // namespace ssm::testing
