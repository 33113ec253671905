// The options every computing command shares (--threads, --max-memory,
// --backend) and the one place they become a Context and LoadOptions, so that
// a backend registry is wired into the program here and nowhere else.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ssm/ops/context.h"
#include "ssm/model/memory_budget.h"

namespace ssm::cli {

struct ComputeOptions {
  int threads = 0;          // set to every hardware thread when the options are added
  uint64_t max_memory = 0;  // 0: the machine's physical memory
  std::string backend = "cpu";
  // Projection weights once loaded: auto (as stored), f32, bf16, f16, int8.
  std::string dtype = "auto";
  // The recurrent SSM state between steps: f32 (exact) or bf16.
  std::string state_dtype = "f32";
};

// What the weights of a command are for: computing (--dtype defaults to
// auto, the checkpoint's own dtype) or training (F32 master weights whatever
// the storage: --dtype f32, the only value it takes).
enum class WeightUse { kInference, kTraining };

// The dtype a --dtype spelling names (f32, bf16, f16, int8); nullopt for
// auto (LanguageModel::auto_weights decides from the checkpoint).
std::optional<DType> weight_dtype(const std::string& name);
// The --dtype spelling of a projection dtype (Q8: int8).
std::string weight_dtype_name(DType dtype);
// The --dtype spellings, in order.
const std::vector<std::string>& weight_dtype_names();

// --state-dtype (the commands that run a model with a state), checked
// against --backend by load_options.
void add_state_dtype_option(CLI::App& cmd, ComputeOptions& options);

// -t/--threads, --max-memory, --backend, --dtype and, for inference, --state-dtype.
void add_compute_options(CLI::App& cmd, ComputeOptions& options, WeightUse use = WeightUse::kInference);
// --max-memory alone, for commands that load a model but compute nothing.
void add_max_memory_option(CLI::App& cmd, ComputeOptions& options);

// UsageError naming --dtype when it is not f32: training and gradients need
// F32 weights (a 16-bit checkpoint is widened to F32 master weights).
void require_f32_weights(const ComputeOptions& options, const std::string& why);

Context make_context(const ComputeOptions& options);
// UsageError for --state-dtype bf16 on a backend that does not take it.
LoadOptions load_options(const ComputeOptions& options);

}  // namespace ssm::cli
