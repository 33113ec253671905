// ssm --version: the release and how this binary was built, as a bug report
// needs it.
#pragma once

#include <string>

namespace ssm::cli {

std::string version_text();

}  // namespace ssm::cli
