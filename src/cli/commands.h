// Sub-commands register themselves: each lives in its own cmd_*.cpp file and
// declares SSM_COMMAND(name, setup), so adding one touches no shared file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "cli/compute_options.h"
#include "cli/flags.h"
#include "cli/usage_error.h"

namespace ssm::cli {

// Runs after parsing when its sub-command was chosen; returns the exit code.
using Action = std::function<int()>;
// Adds one sub-command to app; its callback stores the work in action.
using Setup = void (*)(CLI::App& app, Action& action);

struct CommandRegistrar {
  CommandRegistrar(const char* name, Setup setup);
};

// Every registered command, sorted by name.
void add_registered_commands(CLI::App& app, Action& action);

}  // namespace ssm::cli

#define SSM_COMMAND(name, setup) \
  static const ::ssm::cli::CommandRegistrar ssm_command_registrar_##name(#name, setup)
