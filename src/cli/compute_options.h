// The options every computing command shares (--threads, --max-memory,
// --backend) and the one place they become a Context and LoadOptions, so that
// a backend registry is wired into the program here and nowhere else.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "ssm/ops/context.h"
#include "ssm/model/memory_budget.h"

namespace ssm::cli {

struct ComputeOptions {
  int threads = 0;          // set to every hardware thread when the options are added
  uint64_t max_memory = 0;  // 0: the machine's physical memory
  std::string backend = "cpu";
};

// -t/--threads, --max-memory and --backend.
void add_compute_options(CLI::App& cmd, ComputeOptions& options);
// --max-memory alone, for commands that load a model but compute nothing.
void add_max_memory_option(CLI::App& cmd, ComputeOptions& options);

Context make_context(const ComputeOptions& options);
LoadOptions load_options(const ComputeOptions& options);

}  // namespace ssm::cli
