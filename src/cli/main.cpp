// The ssm program: parses the command line and runs one sub-command. Errors
// from the library reach the user as one line on stderr and exit code 1.
#include <cstdio>

#include "cli/commands.h"
#include "ssm/core/error.h"

namespace ssm::cli {

void add_threads_option(CLI::App& cmd, int& threads) {
  cmd.add_option("--threads", threads, "worker threads (0: all cores)")
      ->check(CLI::Range(0, 1024));
}

}  // namespace ssm::cli

int main(int argc, char** argv) {
  CLI::App app{"ssm: run, fine-tune and keep the state of state-space language models"};
  app.require_subcommand(1);
  ssm::cli::Action action;
  ssm::cli::register_info(app, action);
  ssm::cli::register_logits(app, action);
  ssm::cli::register_tokenize(app, action);
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
