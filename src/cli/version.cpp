#include "cli/version.h"

#include "ssm/ops/backend.h"

#include <cblas.h>

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "ssm/core/error.h"

namespace ssm::cli {
namespace {

std::string compiler() {
#if defined(__clang__)
  return cat("clang ", __clang_major__, ".", __clang_minor__, ".", __clang_patchlevel__);
#elif defined(__GNUC__)
  return cat("GCC ", __GNUC__, ".", __GNUC_MINOR__, ".", __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

// Names of the targets in a Highway target bit set, best first.
std::string target_names(int64_t targets) {
  std::string names;
  for (int64_t bits = targets; bits != 0; bits &= bits - 1)
    names += cat(names.empty() ? "" : " ", hwy::TargetName(bits & -bits));
  return names.empty() ? "none" : names;
}

// The vectorised kernels are compiled for every target in HWY_TARGETS and
// pick the best this CPU supports when first called (Highway's dynamic
// dispatch); the type conversions use the static target, the compiler
// flags' baseline.
std::string cpu_targets() {
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  return cat(usable ? hwy::TargetName(usable & -usable) : "none", " in use (Highway ", HWY_MAJOR, ".", HWY_MINOR,
             ".", HWY_PATCH, ", dispatched at run time among ", target_names(HWY_TARGETS), "; baseline ",
             hwy::TargetName(HWY_STATIC_TARGET), "); this CPU supports ", target_names(hwy::SupportedTargets()));
}

}  // namespace

std::string version_text() {
  std::string backends;
  for (const std::string& b : backend_names()) backends += (backends.empty() ? "" : ", ") + b;
  return cat("ssm ", SSM_VERSION, "\n",
             "compiler:    ", compiler(), ", C++", __cplusplus / 100 % 100, ", ", SSM_BUILD_TYPE, " build\n",
             "cpu targets: ", cpu_targets(), "\n",
             "blas:        ", openblas_get_config(), "\n",
             "cuda:        off\n",
             "backends:    ", backends);
}

}  // namespace ssm::cli
