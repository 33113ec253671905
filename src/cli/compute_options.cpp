#include "cli/compute_options.h"

#include <thread>

#include "cli/flags.h"
#include "cli/usage_error.h"
#include "ssm/core/error.h"
#include "ssm/ops/backend.h"
#include "ssm/ops/op_table.h"

namespace ssm::cli {
namespace {

int hardware_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace

const std::vector<std::string>& weight_dtype_names() {
  static const std::vector<std::string> names = {"auto", "f32", "bf16", "f16", "int8"};
  return names;
}

std::optional<DType> weight_dtype(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "bf16") return DType::kBF16;
  if (name == "f16") return DType::kF16;
  if (name == "int8") return DType::kQ8;
  SSM_CHECK(name == "f32", "unknown weight dtype '", name, "'");
  return DType::kF32;
}

std::string weight_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kQ8: return "int8";
    default: return "f32";
  }
}

void add_max_memory_option(CLI::App& cmd, ComputeOptions& options) {
  cmd.add_option_function<std::string>(
         "--max-memory", [&options](const std::string& text) { options.max_memory = parse_memory_size(text); },
         "refuse a model needing more memory than this, checked before its weights are read "
         "(e.g. 2G, 512M, 1.5GiB)")
      ->type_name("SIZE")
      ->default_str(cat("physical memory, ", format_bytes(memory_limit({}))))
      ->check(memory_size());
}

void add_state_dtype_option(CLI::App& cmd, ComputeOptions& options) {
  cmd.add_option("--state-dtype", options.state_dtype,
                 "the Mamba-2/Mamba-3 SSM state kept between steps: f32 (exact), or bf16 (half the "
                 "state's memory and traffic; widened to f32 for each step, rounded to nearest "
                 "when stored; every backend)")
      ->type_name("TYPE")
      ->capture_default_str()
      ->check(one_of({"f32", "bf16"}));
}

void add_compute_options(CLI::App& cmd, ComputeOptions& options, WeightUse use) {
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
  // Training updates F32 master weights: a BF16 or F16 checkpoint is
  // widened to F32 when loaded, and f32 is the only value taken.
  const bool training = use == WeightUse::kTraining;
  options.dtype = training ? "f32" : "auto";
  cmd.add_option("--dtype", options.dtype,
                 training ? "weights as trained: f32 only (master weights; a bf16 or f16 checkpoint is "
                            "widened to f32 when loaded)"
                          : "projection weights once loaded (the checkpoint is not changed): auto (as "
                            "stored: bf16, f16 or f32; f32 when stored in several dtypes), f32, bf16, f16, "
                            "or int8 (per-row scales); norms, conv and scan parameters stay f32")
      ->type_name("TYPE")
      ->capture_default_str()
      ->check(one_of(weight_dtype_names()));
  if (!training) add_state_dtype_option(cmd, options);
}

void require_f32_weights(const ComputeOptions& options, const std::string& why) {
  if (options.dtype != "f32")
    throw UsageError(cat("--dtype ", options.dtype, ": ", why, " needs f32 weights"));
}

Context make_context(const ComputeOptions& options) {
  return Context(options.backend, options.threads);
}

LoadOptions load_options(const ComputeOptions& options) {
  const bool bf16_state = options.state_dtype == "bf16";
  const Backend& backend = find_backend(options.backend);
  // A device backend takes it where its scans do (OpTable::bf16_state_scans).
  if (bf16_state && !backend.device().is_host() && !backend.ops().bf16_state_scans)
    throw UsageError(cat("--state-dtype bf16: ", options.backend,
                         ": a BF16 state is not supported yet (--state-dtype f32)"));
  return LoadOptions{.max_memory = options.max_memory,
                     .weights = weight_dtype(options.dtype),
                     .state_dtype = bf16_state ? DType::kBF16 : DType::kF32};
}

}  // namespace ssm::cli
