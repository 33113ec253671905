// ssm help [COMMAND]: the same text as ssm --help and ssm COMMAND --help.
#include <cstdio>

#include "cli/commands.h"

namespace ssm::cli {
namespace {

const CLI::App* find_command(const CLI::App& root, const std::string& name) {
  const auto found = root.get_subcommands([&](const CLI::App* sub) { return sub->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

void setup_help(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("help", "show the commands, or one command's options");
  static std::string command;
  CLI::App* root = &app;
  cmd->add_option("COMMAND", command, "the command to describe")
      ->type_name("NAME")
      ->check(CLI::Validator(
          [root](std::string& name) -> std::string {
            if (find_command(*root, name) != nullptr) return "";
            return cat("'", name, "' is not a command (see 'ssm --help')");
          },
          ""));
  cmd->callback([&action, root] {
    action = [root] {
      // root->help() would describe the chosen sub-command: this one.
      const std::string text = command.empty()
                                   ? root->get_formatter()->make_help(root, "ssm", CLI::AppFormatMode::Normal)
                                   : find_command(*root, command)->help("ssm");
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    };
  });
}

}  // namespace

SSM_COMMAND(help, setup_help);

}  // namespace ssm::cli
