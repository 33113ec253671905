// Fresh-model initialisation as the reference does it (SPEC §6).
#pragma once

#include <cstdint>

#include "ssm/model/language_model.h"

namespace ssm {

// Fills every parameter of model from a generator seeded with seed, visiting
// them in for_each_param order. ssm::Error for a parameter it has no rule for.
void initialize_model(LanguageModel& model, uint64_t seed);

}  // namespace ssm
