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

// The kernels are built for Highway's static target (the compiler flags'
// best); what the CPU could run is listed beside it, best first.
std::string cpu_targets() {
  std::string supported;
  for (int64_t bits = hwy::SupportedTargets(); bits != 0; bits &= bits - 1)
    supported += cat(supported.empty() ? "" : " ", hwy::TargetName(bits & -bits));
  return cat(hwy::TargetName(HWY_STATIC_TARGET), " in use (Highway ", HWY_MAJOR, ".", HWY_MINOR, ".", HWY_PATCH,
             ", static dispatch); this CPU supports ", supported.empty() ? "none" : supported);
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
