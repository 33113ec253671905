// The writers the crash-safety tests exercise, each with two distinct
// complete versions to alternate between: session state files, training
// checkpoints and converted models.
#pragma once

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ssm/io/json.h"
#include "ssm/model/generator.h"
#include "ssm/model/language_model.h"
#include "ssm/model/state_file.h"
#include "ssm/train/trainer.h"
#include "train/tiny_model.h"

namespace ssm::testing {

// Mamba-2 layers around an attention layer, weights drawn at random: its
// sessions hold both recurrent states and KV caches.
inline LanguageModel hybrid_model() {
  const Json config = parse_json(R"({
    "d_model": 32, "n_layer": 3, "vocab_size": 64, "pad_vocab_size_multiple": 8,
    "attn_layer_idx": [1], "attn_cfg": {"num_heads": 2, "head_dim": 16},
    "ssm_cfg": {"layer": "Mamba2", "d_state": 16, "headdim": 16, "chunk_size": 8}})",
                                 "hybrid test config");
  LanguageModel model(parse_model_config(config, "hybrid test config"));
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 0.1f);
  model.for_each_param([&](const std::string&, Param& p) {
    p.value = Tensor::empty(DType::kF32, p.shape);
    for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data<float>()[i] = normal(rng);
  });
  return model;
}

inline constexpr const char* kFingerprint = "0123456789abcdef";

// A session after `length` tokens.
inline SessionState session_after(LanguageModel& model, int64_t length, Context& ctx) {
  SessionState s = make_session(model, 1);
  Tensor ids = Tensor::zeros(DType::kI64, {1, length});
  for (int64_t i = 0; i < length; ++i) ids.data<int64_t>()[i] = (i * 13 + length) % 64;
  model.forward(ids, &s.model, ctx);
  s.consumed[0] = length;
  s.recent[0] = {1, 2, length};
  return s;
}

// Two trainers of the tiny model at different steps: two checkpoint versions.
struct TwoTrainers {
  std::vector<int32_t> tokens = tiny_tokens(4096);
  Context ctx{1};
  LanguageModel model_a = tiny_model(1), model_b = tiny_model(1);
  TrainOptions options{.steps = 10, .batch = 2, .seq_len = 16, .accumulation = 1, .lr = 3e-3,
                       .warmup = 2, .weight_decay = 0.1, .clip = 1.0, .seed = 5};
  std::unique_ptr<Trainer> a, b;
  TwoTrainers() {
    a = std::make_unique<Trainer>(model_a, tokens, options, ctx);
    b = std::make_unique<Trainer>(model_b, tokens, options, ctx);
    b->step();
  }
};

}  // namespace ssm::testing
