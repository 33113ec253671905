// The stand-in for builds without -DSSM_NCCL=ON.
#include "ssm/core/error.h"
#include "ssm/train/nccl_transport.h"

namespace ssm {
namespace {

[[noreturn]] void absent() {
  throw Error(
      "this build has no NCCL: a data-parallel run on GPUs needs a build with -DSSM_CUDA=ON "
      "-DSSM_NCCL=ON (see docs/MULTIGPU.md)");
}

}  // namespace

bool nccl_built() { return false; }
std::string nccl_version() { return "not built (-DSSM_NCCL=ON)"; }
std::string nccl_unique_id() { absent(); }
std::unique_ptr<GradientTransport> make_nccl_transport(const std::string&, int, int, Context&, bool,
                                                       int64_t) {
  absent();
}

}  // namespace ssm
