// The model session state files are fuzzed against: Mamba-2 layers around
// one attention layer, so that fixed-size recurrent states and KV caches of
// saved length are both read. Tiny, so that each input stays fast.
#pragma once

#include "ssm/io/json.h"
#include "ssm/model/language_model.h"

namespace ssm::fuzz {

inline constexpr const char* kStateFingerprint = "00fa11ed00fa11ed";

inline LanguageModel make_state_fuzz_model() {
  const Json config = parse_json(R"({
    "d_model": 16, "n_layer": 3, "vocab_size": 40, "pad_vocab_size_multiple": 8,
    "attn_layer_idx": [1], "attn_cfg": {"num_heads": 2, "head_dim": 8},
    "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "headdim": 8, "ngroups": 1,
                "chunk_size": 8, "expand": 2}})", "state fuzz model");
  return LanguageModel(parse_model_config(config, "state fuzz model"));
}

}  // namespace ssm::fuzz
