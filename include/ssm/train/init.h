// Fresh-model initialisation as the reference does it (SPEC §6).
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "ssm/io/sharded_writer.h"
#include "ssm/model/language_model.h"

namespace ssm {

// The initialisation one parameter at a time, for a writer that streams a
// model to disk without holding it: next() must be called for every
// parameter in for_each_param order (the draws come from one generator), and
// then gives exactly what initialize_model puts there.
class ParamInitializer {
 public:
  ParamInitializer(const ModelConfig& config, uint64_t seed);
  // The F32 value of the parameter `name` of `shape`. ssm::Error for a
  // parameter it has no rule for.
  Tensor next(const std::string& name, const Shape& shape);

 private:
  double uniform(double lo, double hi);
  double normal(double stddev);
  const ModelConfig& config_;
  std::mt19937_64 rng_;
};

// Fills every parameter of model from a generator seeded with seed, visiting
// them in for_each_param order. ssm::Error for a parameter it has no rule for.
void initialize_model(LanguageModel& model, uint64_t seed);

// ssm init's work: the model of config_text (a config.json's text, parsed
// and checked; origin names it in errors) initialised from seed and written
// into dir with config.json, streamed one tensor at a time (see
// write_sharded_safetensors for shards, atomicity and check_stop). The
// projection matrices (the 2-D weights, those LanguageModel's
// convert_projections converts) are rounded to `projections` (F32, BF16 or
// F16); norms, convolutions, A, D and biases stay F32 as the engine computes
// with them, so that a BF16 model equals an F32 one loaded with BF16 weights.
ShardedWriteResult write_initialized_model(const std::string& config_text, const std::string& origin,
                                           const std::filesystem::path& dir, uint64_t seed,
                                           DType projections, const ShardedWriteOptions& options);

}  // namespace ssm
