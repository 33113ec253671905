// The ssm program: parses the command line and runs one sub-command. Errors
// from the library reach the user as one line on stderr and exit code 1.
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "ssm/core/error.h"

namespace ssm::cli {
namespace {
std::map<std::string, Setup>& registry() {
  static std::map<std::string, Setup> commands;
  return commands;
}
}  // namespace

CommandRegistrar::CommandRegistrar(const char* name, Setup setup) { registry()[name] = setup; }

void add_registered_commands(CLI::App& app, Action& action) {
  for (const auto& [name, setup] : registry()) setup(app, action);
}

void add_threads_option(CLI::App& cmd, int& threads) {
  cmd.add_option("--threads", threads, "worker threads (0: all cores)")->check(CLI::Range(0, 1024));
}

namespace {
LoadOptions& parsed_load_options() {
  static LoadOptions options;  // one command runs per process
  return options;
}
}  // namespace

void add_max_memory_option(CLI::App& cmd) {
  cmd.add_option_function<std::string>(
         "--max-memory",
         [](const std::string& text) { parsed_load_options().max_memory = parse_memory_size(text); },
         "refuse models needing more memory than this (e.g. 2G, 512M; default: physical memory)")
      ->type_name("SIZE")
      ->check([](const std::string& text) {
        try {
          parse_memory_size(text);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
}

LoadOptions load_options() { return parsed_load_options(); }

}  // namespace ssm::cli

int main(int argc, char** argv) {
  CLI::App app{"ssm: run, fine-tune and keep the state of state-space language models"};
  app.require_subcommand(1);
  ssm::cli::Action action;
  ssm::cli::add_registered_commands(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action ? action() : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssm: error: %s\n", e.what());
    return 1;
  }
}
