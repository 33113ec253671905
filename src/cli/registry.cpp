#include <map>

#include "cli/commands.h"

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

}  // namespace ssm::cli
