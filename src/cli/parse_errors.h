// CLI11's parse failures in the program's words: which flag, what is wrong.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace ssm::cli {

// The message for an unknown command, option or argument left over by a
// parse (every app allows extras so that this check comes first), or
// nullopt when nothing was left over.
std::optional<std::string> leftover_arguments_message(const CLI::App& root);

// The message for a CLI11 parse error that is not a request for help.
std::string parse_error_message(const CLI::App& root, const CLI::ParseError& error);

}  // namespace ssm::cli
