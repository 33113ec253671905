// Where the program's own data lies: relative to the executable, so that an
// installed ssm (bin/ssm, share/ssm/) and the build tree (the same layout
// under build/) work wherever they are, without the source tree.
#pragma once

#include <filesystem>

namespace ssm::cli {

// <directory of the executable>/<SSM_DATA_DIR_FROM_BIN>/models/default.
std::filesystem::path default_model_dir();

}  // namespace ssm::cli
