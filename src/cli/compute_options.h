// The options every computing command shares (--threads, --max-memory,
// --backend) and the one place they become a Context and LoadOptions, so that
// a backend registry is wired into the program here and nowhere else.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "ssm/ops/context.h"
#include "ssm/model/memory_budget.h"

namespace ssm::cli {

struct ComputeOptions {
  int threads = 0;          // set to every hardware thread when the options are added
  uint64_t max_memory = 0;  // 0: the machine's physical memory
  std::string backend = "cpu";
  std::string dtype = "f32";  // projection weights once loaded: f32, bf16, f16, int8
};

// The dtype a --dtype spelling names (f32, bf16, f16, int8).
DType weight_dtype(const std::string& name);
// The --dtype spellings, in order.
const std::vector<std::string>& weight_dtype_names();

// -t/--threads, --max-memory, --backend and --dtype.
void add_compute_options(CLI::App& cmd, ComputeOptions& options);
// --max-memory alone, for commands that load a model but compute nothing.
void add_max_memory_option(CLI::App& cmd, ComputeOptions& options);

// UsageError naming --dtype when it is not f32: training and gradients need
// F32 weights.
void require_f32_weights(const ComputeOptions& options, const std::string& why);

Context make_context(const ComputeOptions& options);
LoadOptions load_options(const ComputeOptions& options);

}  // namespace ssm::cli
