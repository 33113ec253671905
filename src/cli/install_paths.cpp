#include "cli/install_paths.h"

#include "ssm/core/error.h"

namespace ssm::cli {

std::filesystem::path default_model_dir() {
  std::error_code ec;
  // The binary itself, symbolic links (build/ssm -> bin/ssm) resolved.
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(cat("cannot find the default model: /proc/self/exe: ", ec.message()));
  return (exe.parent_path() / SSM_DATA_DIR_FROM_BIN / "models" / "default").lexically_normal();
}

}  // namespace ssm::cli
