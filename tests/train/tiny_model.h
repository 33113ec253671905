// A small Mamba-2 model and a small text for training tests.
#pragma once

#include <string>
#include <vector>

#include "ssm/model/language_model.h"
#include "ssm/train/init.h"

namespace ssm::testing {

inline ModelConfig tiny_config(int64_t d_intermediate = 0) {
  const Json j = {{"d_model", 32},
                  {"n_layer", 2},
                  {"vocab_size", 64},
                  {"pad_vocab_size_multiple", 8},
                  {"d_intermediate", d_intermediate},
                  {"ssm_cfg", {{"layer", "Mamba2"}, {"d_state", 8}, {"headdim", 8}, {"chunk_size", 8}}},
                  {"tie_embeddings", true},
                  {"attn_layer_idx", Json::array()},
                  {"attn_cfg", Json::object()}};
  return parse_model_config(j, "tiny test config");
}

inline LanguageModel tiny_model(uint64_t seed, int64_t d_intermediate = 0) {
  LanguageModel m(tiny_config(d_intermediate));
  initialize_model(m, seed);
  return m;
}

// A patterned token stream a model can learn quickly: short "words" of a
// small alphabet with a deterministic but non-trivial order.
inline std::vector<int32_t> tiny_tokens(int64_t n) {
  std::vector<int32_t> t;
  uint32_t s = 12345;
  while (static_cast<int64_t>(t.size()) < n) {
    s = s * 1103515245u + 12345u;
    const int32_t word = (s >> 16) % 5;
    for (int32_t k = 0; k <= word; ++k) t.push_back(1 + (word * 7 + k) % 40);
    t.push_back(0);
  }
  t.resize(n);
  return t;
}

}  // namespace ssm::testing
