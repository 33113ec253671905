// Each sub-command lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ssm::cli {

// Called after parsing when the sub-command was chosen; returns the exit code.
using Action = std::function<int()>;

// Each register_* adds one sub-command to app and returns its action slot.
void register_info(CLI::App& app, Action& action);
void register_logits(CLI::App& app, Action& action);
void register_tokenize(CLI::App& app, Action& action);

// --threads N on a sub-command, shared by every command that computes.
void add_threads_option(CLI::App& cmd, int& threads);

}  // namespace ssm::cli
