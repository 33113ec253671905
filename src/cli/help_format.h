// --help as the program's users read it: each option's default and whether
// it is required at the end of its description, not squeezed beside its name.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace ssm::cli {

std::shared_ptr<CLI::Formatter> make_help_formatter();

}  // namespace ssm::cli
