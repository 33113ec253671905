// The model, data and options training checkpoints are fuzzed against:
// small enough that a checkpoint is a few kilobytes.
#pragma once

#include <vector>

#include "ssm/io/json.h"
#include "ssm/model/language_model.h"
#include "ssm/train/init.h"
#include "ssm/train/trainer.h"

namespace ssm::fuzz {

inline LanguageModel make_train_fuzz_model() {
  const Json config = parse_json(R"({
    "d_model": 8, "n_layer": 1, "vocab_size": 16, "pad_vocab_size_multiple": 8,
    "ssm_cfg": {"layer": "Mamba2", "d_state": 4, "headdim": 4, "chunk_size": 4}})", "train fuzz model");
  LanguageModel model(parse_model_config(config, "train fuzz model"));
  initialize_model(model, 3);
  return model;
}

inline std::vector<int32_t> train_fuzz_tokens() {
  std::vector<int32_t> t(512);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7 + i / 5) % 16);
  return t;
}

inline TrainOptions train_fuzz_options() {
  return TrainOptions{.steps = 4, .batch = 2, .seq_len = 8, .accumulation = 1, .lr = 1e-3,
                      .warmup = 1, .weight_decay = 0.1, .clip = 1.0, .seed = 2};
}

}  // namespace ssm::fuzz
