// The body of the two config targets: JSON with Python literals ->
// parse_model_config of one convention -> the model's memory check -> the
// model built (layers, parameter shapes) when it fits a small budget.
#pragma once

#include "fuzz_support.h"
#include "ssm/io/json.h"
#include "ssm/model/language_model.h"
#include "ssm/model/memory_budget.h"

namespace ssm::fuzz {

// Large enough for every golden config, small enough to keep each input fast.
inline constexpr uint64_t kConfigBudget = 16u << 20;

// force_hf: make the input a Hugging Face config (model_type mamba2);
// otherwise strip what would make it one, so each target explores one parser.
inline int fuzz_config(const uint8_t* data, size_t size, bool force_hf) {
  silence_logging();
  try {
    Json j = parse_json(std::string(reinterpret_cast<const char*>(data), size), "config.json");
    if (j.is_object()) {
      if (force_hf) {
        j["model_type"] = "mamba2";
      } else {
        j.erase("hidden_size");
        j.erase("model_type");
      }
    }
    const ModelConfig config = parse_model_config(j, "config.json");
    check_memory_budget(min_model_bytes(config), kConfigBudget, "config.json");
    LanguageModel model(config);
    check_memory_budget(model_memory_bytes(model), kConfigBudget, "config.json");
    // The lower bound must not exceed the exact figure.
    if (min_model_bytes(model.config()) > model_memory_bytes(model)) std::abort();
    for (int64_t i = 0; i < model.n_layer(); ++i) (void)model.config().mixer_kind(i);
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace ssm::fuzz
