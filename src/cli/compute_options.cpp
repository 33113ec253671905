#include "cli/compute_options.h"

#include <thread>

#include "cli/flags.h"
#include "ssm/core/error.h"
#include "ssm/ops/backend.h"

namespace ssm::cli {
namespace {

int hardware_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace

void add_max_memory_option(CLI::App& cmd, ComputeOptions& options) {
  cmd.add_option_function<std::string>(
         "--max-memory", [&options](const std::string& text) { options.max_memory = parse_memory_size(text); },
         "refuse a model needing more memory than this, checked before its weights are read "
         "(e.g. 2G, 512M, 1.5GiB)")
      ->type_name("SIZE")
      ->default_str(cat("physical memory, ", format_bytes(memory_limit({}))))
      ->check(memory_size());
}

void add_compute_options(CLI::App& cmd, ComputeOptions& options) {
  options.threads = hardware_threads();
  cmd.add_option("-t,--threads", options.threads, "worker threads")
      ->type_name("N")
      ->default_str(cat("all cores, ", options.threads))
      ->check(whole_number(1, 1024));
  add_max_memory_option(cmd, options);
  cmd.add_option("--backend", options.backend,
                 "where the computation runs: ref (the scalar reference, slow, exact in double "
                 "where it matters), cpu (the fast host kernels)")
      ->type_name("NAME")
      ->capture_default_str()
      ->check(one_of(backend_names()));
}

Context make_context(const ComputeOptions& options) {
  return Context(options.backend, options.threads);
}

LoadOptions load_options(const ComputeOptions& options) { return LoadOptions{options.max_memory}; }

}  // namespace ssm::cli
